/*
 * Failure classification (pure): rules that map log lines to classes, the
 * verdict for a failed attempt with its evidence, and the small parsers of
 * cgroup files that tell an OOM kill.
 */
#include "exec.h"

#include <errno.h>
#include <regex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LINE_MAX_SCAN 4096 /* bytes of one log line that rules see */

struct rule {
	enum exec_rule_class cls;
	regex_t re;
};

struct exec_classifier {
	struct rule *rules;
	size_t n, cap;
};

/* a rule class's name in rule files */
static const char *const class_names[EXEC_RULE_CLASSES] = {
    [EXEC_RULE_HARDWARE] = "hardware",
    [EXEC_RULE_OOM] = "oom",
    [EXEC_RULE_SYSTEM] = "system",
    [EXEC_RULE_USER_TRACEBACK] = "user_traceback",
    [EXEC_RULE_WEAK_SYSTEM] = "weak_system",
    [EXEC_RULE_USER] = "user",
    [EXEC_RULE_OOM_KILL] = "oom_kill",
    [EXEC_RULE_NOT_USER] = "not_user",
};

/* the failure class a rule class's match decides (PROTO_FAILURE_CLASS_COUNT: none) */
static const enum proto_failure_class class_verdicts[EXEC_RULE_CLASSES] = {
    [EXEC_RULE_HARDWARE] = PROTO_FAILURE_HARDWARE,
    [EXEC_RULE_OOM] = PROTO_FAILURE_OOM,
    [EXEC_RULE_SYSTEM] = PROTO_FAILURE_SYSTEM,
    [EXEC_RULE_USER_TRACEBACK] = PROTO_FAILURE_USER,
    [EXEC_RULE_WEAK_SYSTEM] = PROTO_FAILURE_SYSTEM,
    [EXEC_RULE_USER] = PROTO_FAILURE_USER,
    [EXEC_RULE_OOM_KILL] = PROTO_FAILURE_OOM,
    [EXEC_RULE_NOT_USER] = PROTO_FAILURE_CLASS_COUNT,
};

/* what one log is searched for, strongest first */
static const enum exec_rule_class log_order[] = {
    EXEC_RULE_OOM, EXEC_RULE_SYSTEM, EXEC_RULE_USER_TRACEBACK, EXEC_RULE_WEAK_SYSTEM,
    EXEC_RULE_USER,
};

int exec_classifier_new(struct exec_classifier **out, struct ty_err *err)
{
	if (!(*out = calloc(1, sizeof(**out))))
		return ty_err_set(err, TY_ENOMEM, NULL);
	return 0;
}

void exec_classifier_free(struct exec_classifier *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n; i++)
		regfree(&c->rules[i].re);
	free(c->rules);
	free(c);
}

size_t exec_classifier_count(const struct exec_classifier *c)
{
	return c ? c->n : 0;
}

static int class_parse(const char *s, size_t n)
{
	for (int i = 0; i < EXEC_RULE_CLASSES; i++)
		if (strlen(class_names[i]) == n && strncmp(class_names[i], s, n) == 0)
			return i;
	return -1;
}

/* Drop the rules from `keep` on (a file that failed half way adds nothing). */
static void truncate_rules(struct exec_classifier *c, size_t keep)
{
	while (c->n > keep)
		regfree(&c->rules[--c->n].re);
}

static int add_rule(struct exec_classifier *c, const char *name, int lineno, const char *line,
		    struct ty_err *err)
{
	const char *p = line, *re;
	char msg[256];
	int cls, rc;

	while (*p && *p != ' ' && *p != '\t')
		p++;
	if ((cls = class_parse(line, (size_t)(p - line))) < 0)
		return ty_err_set(err, TY_EINVAL,
				  "%s:%d: unknown class '%.*s' (hardware, oom, system, "
				  "user_traceback, weak_system, user, oom_kill or not_user)",
				  name, lineno, (int)(p - line > 64 ? 64 : p - line), line);
	for (re = p; *re == ' ' || *re == '\t'; re++)
		;
	if (!*re)
		return ty_err_set(err, TY_EINVAL, "%s:%d: no regular expression after '%s'", name,
				  lineno, class_names[cls]);
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 32;
		struct rule *r = realloc(c->rules, cap * sizeof(*r));

		if (!r)
			return ty_err_set(err, TY_ENOMEM, NULL);
		c->rules = r;
		c->cap = cap;
	}
	if ((rc = regcomp(&c->rules[c->n].re, re, REG_EXTENDED | REG_NOSUB))) {
		regerror(rc, &c->rules[c->n].re, msg, sizeof(msg));
		return ty_err_set(err, TY_EINVAL, "%s:%d: bad regular expression '%.128s': %s",
				  name, lineno, re, msg);
	}
	c->rules[c->n++].cls = (enum exec_rule_class)cls;
	return 0;
}

int exec_classifier_add(struct exec_classifier *c, const char *text, const char *name,
			struct ty_err *err)
{
	size_t keep = c->n;
	char line[LINE_MAX_SCAN];
	int lineno = 0, rc;

	for (const char *p = text; *p;) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		const char *s;

		lineno++;
		if (len >= sizeof(line)) {
			truncate_rules(c, keep);
			return ty_err_set(err, TY_EINVAL, "%s:%d: line longer than %zu bytes", name,
					  lineno, sizeof(line) - 1);
		}
		memcpy(line, p, len);
		line[len] = '\0';
		if (len && line[len - 1] == '\r')
			line[len - 1] = '\0';
		p += len + (nl ? 1 : 0);
		for (s = line; *s == ' ' || *s == '\t'; s++)
			;
		if (!*s || *s == '#')
			continue;
		if ((rc = add_rule(c, name, lineno, s, err))) {
			truncate_rules(c, keep);
			return rc;
		}
	}
	return 0;
}

int exec_classifier_add_file(struct exec_classifier *c, const char *path, struct ty_err *err)
{
	struct ty_buf b = TY_BUF_INIT;
	int rc = ty_buf_read_text_file(&b, path, err);

	if (!rc)
		rc = exec_classifier_add(c, b.len ? b.data : "", path, err);
	ty_buf_free(&b);
	return rc;
}

/* Whether any rule of class cls matches line. */
static bool line_is(const struct exec_classifier *c, enum exec_rule_class cls, const char *line)
{
	for (size_t i = 0; i < c->n; i++)
		if (c->rules[i].cls == cls && regexec(&c->rules[i].re, line, 0, NULL, 0) == 0)
			return true;
	return false;
}

/*
 * The first rule of class cls (in rule order) that matches a line of text,
 * and that line. Lines longer than LINE_MAX_SCAN are seen cut. A
 * user_traceback rule does not take a line that a not_user rule matches:
 * an exception that reports NCCL, CUDA or the process group is not the
 * job's own error, and ERE has no negation to say so in the rule itself.
 */
static bool match_class(char *line, size_t linesz, const struct exec_classifier *c,
			enum exec_rule_class cls, const char *text)
{
	if (!c || !text)
		return false;
	for (size_t i = 0; i < c->n; i++) {
		if (c->rules[i].cls != cls)
			continue;
		for (const char *p = text; *p;) {
			const char *nl = strchr(p, '\n');
			size_t len = nl ? (size_t)(nl - p) : strlen(p);
			size_t take = len < linesz - 1 ? len : linesz - 1;

			memcpy(line, p, take);
			line[take] = '\0';
			if (take && line[take - 1] == '\r')
				line[take - 1] = '\0';
			p += len + (nl ? 1 : 0);
			if (regexec(&c->rules[i].re, line, 0, NULL, 0) == 0 &&
			    !(cls == EXEC_RULE_USER_TRACEBACK && line_is(c, EXEC_RULE_NOT_USER, line)))
				return true;
		}
	}
	return false;
}

/* Length of the valid UTF-8 sequence at p (1..4), or 0. */
static size_t utf8_seq(const unsigned char *p)
{
	size_t n;
	unsigned cp;

	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		n = 2, cp = p[0] & 0x1fu;
	else if (p[0] >= 0xe0 && p[0] <= 0xef)
		n = 3, cp = p[0] & 0x0fu;
	else if (p[0] >= 0xf0 && p[0] <= 0xf4)
		n = 4, cp = p[0] & 0x07u;
	else
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (p[i] & 0x3fu);
	}
	if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

void exec_text_clean(char *s)
{
	unsigned char *p = (unsigned char *)s;

	while (*p) {
		size_t n = utf8_seq(p);

		if (n == 0)
			*p++ = '?';
		else if (n == 1 && (*p < 0x20 || *p == 0x7f))
			*p++ = ' ';
		else
			p += n;
	}
}

static void set_verdict(struct exec_verdict *v, const char *cls, int rank, const char *what)
{
	snprintf(v->failure_class, sizeof(v->failure_class), "%s", cls);
	if (snprintf(v->evidence, sizeof(v->evidence), "rank %d: %s", rank, what) >=
	    (int)sizeof(v->evidence))
		v->evidence[sizeof(v->evidence) - 1] = '\0'; /* cut: evidence is bounded */
	exec_text_clean(v->evidence);
}


/* A rule of cls matching the log of rank (or of any other rank when others). */
static bool match_logs(struct exec_verdict *v, const struct exec_classifier *c,
		       enum exec_rule_class cls, const struct exec_rank_log *logs, size_t nlogs,
		       int rank, bool others)
{
	char line[LINE_MAX_SCAN];

	for (size_t i = 0; i < nlogs; i++) {
		if ((logs[i].rank == rank) == others)
			continue;
		if (match_class(line, sizeof(line), c, cls, logs[i].text)) {
			set_verdict(v, proto_failure_class_name(class_verdicts[cls]), logs[i].rank, line);
			v->log_only = true;
			return true;
		}
	}
	return false;
}

/*
 * The strongest evidence in the logs of rank (or of the others), classes
 * in log_order; killed: the user classes are skipped (something outside
 * killed the rank, whatever its log says).
 */
static bool match_order(struct exec_verdict *v, const struct exec_classifier *c,
			const struct exec_rank_log *logs, size_t nlogs, int rank, bool others,
			bool killed)
{
	for (size_t k = 0; k < sizeof(log_order) / sizeof(log_order[0]); k++) {
		if (killed && (log_order[k] == EXEC_RULE_USER_TRACEBACK ||
			       log_order[k] == EXEC_RULE_USER))
			continue;
		if (match_logs(v, c, log_order[k], logs, nlogs, rank, others))
			return true;
	}
	return false;
}

static void decide(struct exec_verdict *v, const struct exec_classifier *c,
		   const struct exec_rank_end *end, const struct exec_rank_log *logs, size_t nlogs)
{
	bool killed = end->signal == SIGKILL || (!end->signal && end->exit_code == 137);
	char what[128], line[LINE_MAX_SCAN];

	memset(v, 0, sizeof(*v));
	/* a broken GPU anywhere explains what its peers saw */
	for (size_t i = 0; i < nlogs; i++)
		if (match_class(line, sizeof(line), c, EXEC_RULE_HARDWARE, logs[i].text)) {
			set_verdict(v, EXEC_CLASS(HARDWARE), logs[i].rank, line);
			v->log_only = true;
			return;
		}
	if (match_order(v, c, logs, nlogs, end->rank, false, killed))
		return;
	if (end->signal)
		snprintf(what, sizeof(what), "killed by signal %d (SIG%s)", end->signal,
			 sigabbrev_np(end->signal) ? sigabbrev_np(end->signal) : "?");
	else if (killed)
		snprintf(what, sizeof(what), "exit code 137 (SIGKILL)");
	else
		snprintf(what, sizeof(what), "exit code %d", end->exit_code);
	if (killed && end->cgroup_oom) {
		snprintf(line, sizeof(line), "%s, memory cgroup oom_kill", what);
		set_verdict(v, EXEC_CLASS(OOM), end->rank, line);
		return;
	}
	if (killed && match_logs(v, c, EXEC_RULE_OOM_KILL, logs, nlogs, end->rank, false))
		return;
	if (match_order(v, c, logs, nlogs, end->rank, true, killed))
		return;
	if (killed)
		strcat(what, ", no OOM evidence");
	set_verdict(v, end->signal || killed ? EXEC_CLASS(SYSTEM) : EXEC_CLASS(USER), end->rank,
		    what);
	v->log_only = true; /* the exit code is the job's; a signal, below */
}

void exec_classify(struct exec_verdict *v, const struct exec_classifier *c,
		   const struct exec_rank_end *end, const struct exec_rank_log *logs, size_t nlogs)
{
	decide(v, c, end, logs, nlogs);
	/*
	 * A signal the executor did not send is its own observation, and says
	 * system by itself: a log line that agrees does not make it the job's word.
	 */
	if (end->signal && !strcmp(v->failure_class, EXEC_CLASS(SYSTEM)))
		v->log_only = false;
}

void exec_evidence_tails(char *out, const char *head, const struct exec_rank_log *logs,
			 size_t nlogs)
{
	size_t o, cap = EXEC_EVIDENCE_MAX, share;

	o = (size_t)snprintf(out, cap + 1, "%s", head);
	if (o >= cap || nlogs == 0)
		return;
	share = (cap - o) / nlogs;
	for (size_t i = 0; i < nlogs && o < cap; i++) {
		const char *t = logs[i].text ? logs[i].text : "";
		size_t len = strlen(t), room, start, k;
		int n;

		while (len && (t[len - 1] == '\n' || t[len - 1] == '\r'))
			len--;
		n = snprintf(out + o, cap + 1 - o, "; rank %d:%s", logs[i].rank,
			     len ? " " : " (no output)");
		if (n < 0 || (size_t)n >= cap - o) {
			out[o] = '\0';
			return;
		}
		o += (size_t)n;
		room = share > (size_t)n ? share - (size_t)n : 0;
		if (room > cap - o)
			room = cap - o;
		/* the newest output fits best: keep the end of the tail */
		start = len > room ? len - room : 0;
		for (k = start; k < len; k++)
			out[o++] = t[k] == '\n' ? '|' : t[k];
		out[o] = '\0';
	}
	exec_text_clean(out);
}

static bool put_path(char *out, size_t outsz, const char *pre, const char *p, size_t n,
		     const char *file)
{
	int k = snprintf(out, outsz, "%s%.*s%s%s", pre, (int)n, p, n > 1 ? "/" : "", file);

	return k > 0 && (size_t)k < outsz;
}

bool exec_cgroup_oom_file(char *out, size_t outsz, const char *proc_cgroup)
{
	const char *v2 = NULL;
	size_t v2len = 0;

	for (const char *p = proc_cgroup; p && *p;) {
		const char *nl = strchr(p, '\n'), *c1, *c2;
		size_t len = nl ? (size_t)(nl - p) : strlen(p);

		c1 = memchr(p, ':', len);
		c2 = c1 ? memchr(c1 + 1, ':', len - (size_t)(c1 + 1 - p)) : NULL;
		if (c2 && c2 + 1 < p + len && c2[1] == '/') {
			const char *path = c2 + 1;
			size_t plen = len - (size_t)(path - p);
			const char *ctl = c1 + 1;
			size_t clen = (size_t)(c2 - ctl);

			if (c1 - p == 1 && *p == '0' && clen == 0) {
				v2 = path;
				v2len = plen;
			}
			/* the controller list is comma-separated: "memory" alone or with others */
			for (const char *q = ctl; q < c2;) {
				const char *comma = memchr(q, ',', (size_t)(c2 - q));
				size_t qlen = comma ? (size_t)(comma - q) : (size_t)(c2 - q);

				if (qlen == 6 && strncmp(q, "memory", 6) == 0)
					return put_path(out, outsz, "/sys/fs/cgroup/memory", path,
							plen, "memory.oom_control");
				q += qlen + 1;
			}
		}
		p += len + (nl ? 1 : 0);
	}
	return v2 && put_path(out, outsz, "/sys/fs/cgroup", v2, v2len, "memory.events");
}

long long exec_memory_events_oom_kill(const char *text)
{
	for (const char *p = text; p && *p;) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		char *end;
		long long v;

		if (len > 9 && strncmp(p, "oom_kill ", 9) == 0) {
			errno = 0;
			v = strtoll(p + 9, &end, 10);
			if (!errno && end != p + 9 && (end == p + len) && v >= 0)
				return v;
			return -1;
		}
		p += len + (nl ? 1 : 0);
	}
	return -1;
}
