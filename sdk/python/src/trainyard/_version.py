"""The package version, read by pyproject.toml and the User-Agent."""

__version__ = "0.1.0"
