/* Training progress: a rank's progress file read, its step and step rate (pure). */
#include "exec.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* A bare step: digits and blanks around them */
static int bare_step(int64_t *step, const char *buf, struct ty_err *err)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(buf, &end, 10);
	while (isspace((unsigned char)*end))
		end++;
	if (!isdigit((unsigned char)*buf) || *end || errno)
		return ty_err_set(err, TY_EPARSE,
				  "not a step (a non-negative integer) or a JSON object");
	*step = v;
	return 0;
}

int exec_progress_parse(int64_t *step, double *samples, const char *buf, size_t len,
			struct ty_err *err)
{
	char text[EXEC_PROGRESS_FILE_MAX + 1];
	const char *p;
	json_t *doc, *v;
	json_error_t jerr;
	int rc = 0;

	*step = -1;
	*samples = -1;
	if (len > EXEC_PROGRESS_FILE_MAX)
		return ty_err_set(err, TY_EPARSE, "longer than %d bytes", EXEC_PROGRESS_FILE_MAX);
	if (memchr(buf, '\0', len))
		return ty_err_set(err, TY_EPARSE, "holds a NUL byte");
	memcpy(text, buf, len);
	text[len] = '\0';
	for (p = text; isspace((unsigned char)*p); p++)
		;
	if (!*p)
		return 0; /* touched: liveness only */
	if (*p != '{')
		return bare_step(step, p, err);
	if (!(doc = json_loads(p, 0, &jerr)))
		return ty_err_set(err, TY_EPARSE, "not JSON: %s", jerr.text);
	v = json_object_get(doc, "step");
	if (v && !json_is_null(v) && (!json_is_integer(v) || json_integer_value(v) < 0)) {
		rc = ty_err_set(err, TY_EPARSE, "step must be a non-negative integer");
		goto out;
	}
	if (json_is_integer(v))
		*step = json_integer_value(v);
	v = json_object_get(doc, "samples_per_second");
	if (v && !json_is_null(v) && (!json_is_number(v) || json_number_value(v) < 0)) {
		*step = -1;
		rc = ty_err_set(err, TY_EPARSE, "samples_per_second must be a non-negative number");
		goto out;
	}
	if (json_is_number(v))
		*samples = json_number_value(v);
out:
	json_decref(doc);
	return rc;
}

bool exec_progress_note(struct exec_progress *p, int64_t step, double samples, int64_t now,
			int64_t wall)
{
	int slot;

	p->samples_per_second = samples;
	if (p->have_step && step == p->step)
		return false;
	if (p->have_step && step < p->step)
		p->n = p->head = 0; /* the job counts afresh: so does the rate */
	p->have_step = true;
	p->step = step;
	p->step_ms = now;
	p->step_wall_ms = wall;
	if (p->n == EXEC_PROGRESS_RING)
		p->head = (p->head + 1) % EXEC_PROGRESS_RING;
	else
		p->n++;
	slot = (p->head + p->n - 1) % EXEC_PROGRESS_RING;
	p->ring[slot].ms = now;
	p->ring[slot].step = step;
	return true;
}

double exec_progress_rate(const struct exec_progress *p, int64_t now)
{
	int base = 0, last;

	if (!p->have_step || p->n == 0)
		return -1;
	last = p->n - 1;
	/* the newest change at or before the window's start, if any */
	for (int i = 0; i < p->n; i++)
		if (p->ring[(p->head + i) % EXEC_PROGRESS_RING].ms <= now - EXEC_PROGRESS_WINDOW_MS)
			base = i;
	if (base == last)
		return now - p->ring[(p->head + last) % EXEC_PROGRESS_RING].ms >=
			       EXEC_PROGRESS_WINDOW_MS
			   ? 0
			   : -1;
	{
		int64_t b_ms = p->ring[(p->head + base) % EXEC_PROGRESS_RING].ms;
		int64_t steps = p->ring[(p->head + last) % EXEC_PROGRESS_RING].step -
				p->ring[(p->head + base) % EXEC_PROGRESS_RING].step;

		return now > b_ms ? (double)steps * 1000.0 / (double)(now - b_ms) : -1;
	}
}
