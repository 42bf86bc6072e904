"""Where the server, token, timeout and CA file come from: exactly as jobctl finds them.

Each setting comes from the explicit argument, else the environment
(JOBCTL_SERVER, JOBCTL_TOKEN, JOBCTL_TOKEN_FILE, JOBCTL_TIMEOUT,
JOBCTL_CACERT), else the config file (JOBCTL_CONFIG, else
$XDG_CONFIG_HOME/jobctl/config, else ~/.config/jobctl/config) of
``key = value`` lines and ``#`` comments, else the default (cli/http.c).
"""

from __future__ import annotations

import os
import pwd
from dataclasses import dataclass
from typing import Dict, Mapping, Optional, Tuple

from .errors import ConfigError

DEFAULT_SERVER = "http://127.0.0.1:8080"
DEFAULT_TIMEOUT = 60
_KEYS = ("server", "token", "token-file", "timeout", "cacert")
_RANK = {"argument": 3, "environment": 2, "config file": 1, "default": 0}


@dataclass(frozen=True)
class Settings:
    """The resolved settings; ``sources`` says where each came from (for messages)."""

    server: str
    token: Optional[str]
    timeout: float
    cacert: Optional[str]
    sources: Mapping[str, str]

    def __repr__(self) -> str:  # never show the token
        return (f"Settings(server={self.server!r}, token={'***' if self.token else None}, "
                f"timeout={self.timeout!r}, cacert={self.cacert!r})")


def default_config_path(env: Mapping[str, str]) -> Optional[str]:
    """$XDG_CONFIG_HOME/jobctl/config (absolute XDG only), else ~/.config/jobctl/config."""
    xdg = env.get("XDG_CONFIG_HOME", "")
    if xdg.startswith("/"):
        return os.path.join(xdg, "jobctl", "config")
    home = env.get("HOME") or ""
    if not home:
        try:
            home = pwd.getpwuid(os.getuid()).pw_dir
        except KeyError:
            return None
    return os.path.join(home, ".config", "jobctl", "config") if home else None


def read_config_file(path: str) -> Dict[str, Tuple[str, str]]:
    """{key: (value, "path:line")} of a jobctl config file; ConfigError on a bad line."""
    out: Dict[str, Tuple[str, str]] = {}
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise ConfigError(f"cannot open config file '{path}': {e.strerror}") from None
    for n, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        where = f"{path}:{n}"
        key, sep, value = line.partition("=")
        if not sep:
            raise ConfigError(f"{where}: expected 'key = value'")
        key = key.strip().replace("_", "-")
        if key not in _KEYS:
            raise ConfigError(f"{where}: unknown option '{key.strip()}'")
        out[key] = (value.strip(), where)
    return out


def _token_ok(token: str) -> bool:
    return bool(token) and all(0x21 <= ord(c) <= 0x7E for c in token)


def resolve(server: Optional[str] = None, token: Optional[str] = None,
            token_file: Optional[str] = None, timeout: Optional[float] = None,
            cacert: Optional[str] = None, env: Optional[Mapping[str, str]] = None,
            require_token: bool = True) -> Settings:
    """The settings, first found wins: arguments, environment, config file, defaults.

    Raises ConfigError naming what is missing or wrong (never echoing a token).
    """
    env = os.environ if env is None else env
    given = {"server": server, "token": token, "token-file": token_file,
             "timeout": None if timeout is None else str(timeout), "cacert": cacert}
    conf_path = env.get("JOBCTL_CONFIG") or None
    if conf_path is None:
        conf_path = default_config_path(env)
        if conf_path and not os.path.exists(conf_path):
            conf_path = None
    conf = read_config_file(conf_path) if conf_path else {}
    vals: Dict[str, Optional[str]] = {}
    srcs: Dict[str, str] = {}
    for key in _KEYS:
        env_name = "JOBCTL_" + key.upper().replace("-", "_")
        if given[key] is not None:
            vals[key], srcs[key] = given[key], "argument"
        elif env.get(env_name) is not None:
            vals[key], srcs[key] = env[env_name], "environment"
        elif key in conf:
            vals[key], srcs[key] = conf[key][0], "config file"
        else:
            vals[key], srcs[key] = None, "default"

    url = vals["server"] if vals["server"] is not None else DEFAULT_SERVER
    if not (url.startswith("http://") or url.startswith("https://")):
        raise ConfigError(f"server URL must start with http:// or https://, not '{url[:200]}'"
                          f" (from the {srcs['server']})")
    url = url.rstrip("/")

    secs = float(DEFAULT_TIMEOUT)
    if vals["timeout"] is not None:
        try:
            secs = float(vals["timeout"])
        except ValueError:
            secs = -1.0
        if not 0 < secs <= 86400:
            raise ConfigError(f"timeout '{vals['timeout']}' (from the {srcs['timeout']}) "
                              f"is not a number of seconds above 0 and at most 86400")

    tok = vals["token"] or None
    path = vals["token-file"] or None
    if path:
        if tok and _RANK[srcs["token"]] == _RANK[srcs["token-file"]]:
            raise ConfigError(f"a token and a token file both come from the "
                              f"{srcs['token']}: give one")
        if not tok or _RANK[srcs["token-file"]] > _RANK[srcs["token"]]:
            try:
                with open(path, encoding="utf-8") as f:
                    first = f.readline()
            except OSError as e:
                raise ConfigError(f"cannot read the token file '{path[:200]}' (from the "
                                  f"{srcs['token-file']}): {e.strerror}") from None
            tok = first.rstrip("\r\n").rstrip(" \t")
            if not tok:
                raise ConfigError(f"the token file '{path[:200]}' (from the "
                                  f"{srcs['token-file']}) is empty")
            srcs["token"] = "token file"
    if tok is not None and not _token_ok(tok):
        raise ConfigError(f"the token (from the {srcs['token']}) contains invalid characters")
    if tok is None and require_token:
        raise ConfigError("no token: pass token= or token_file=, set JOBCTL_TOKEN or "
                          "JOBCTL_TOKEN_FILE, or put 'token = ...' in the config file"
                          + (f" ({conf_path})" if conf_path else ""), missing="token")

    ca = vals["cacert"] or None
    if ca and not os.access(ca, os.R_OK):
        raise ConfigError(f"cannot read the CA file '{ca[:200]}' (from the {srcs['cacert']})")
    return Settings(server=url, token=tok, timeout=secs, cacert=ca, sources=dict(srcs))
