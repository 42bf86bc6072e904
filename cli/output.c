/* jobctl output: JSON printing, member access for display, ages, aligned tables. */
#include "cli.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void cli_print_json(const json_t *v)
{
	if (json_dumpf(v, stdout, JSON_INDENT(2) | JSON_ENCODE_ANY) == 0)
		fputc('\n', stdout);
}

const char *cli_json_str(const json_t *obj, const char *key, const char *dflt)
{
	const char *s = json_string_value(json_object_get(obj, key));

	return s ? s : dflt;
}

const char *cli_json_num(char *buf, size_t sz, const json_t *obj, const char *key)
{
	const json_t *v = json_object_get(obj, key);

	if (json_is_integer(v))
		snprintf(buf, sz, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
	else if (json_is_real(v))
		snprintf(buf, sz, "%g", json_real_value(v));
	else if (json_is_string(v))
		snprintf(buf, sz, "%s", json_string_value(v));
	else
		snprintf(buf, sz, "-");
	return buf;
}

const char *cli_age(char *buf, size_t sz, const char *rfc3339)
{
	struct tm tm = {0};
	long long d;
	time_t t;

	if (!rfc3339 || sscanf(rfc3339, "%d-%d-%dT%d:%d:%d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
			       &tm.tm_hour, &tm.tm_min, &tm.tm_sec) != 6) {
		snprintf(buf, sz, "-");
		return buf;
	}
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	t = timegm(&tm);
	d = (long long)difftime(time(NULL), t);
	if (d < 0)
		d = 0;
	if (d < 60)
		snprintf(buf, sz, "%llds", d);
	else if (d < 3600)
		snprintf(buf, sz, "%lldm", d / 60);
	else if (d < 86400)
		snprintf(buf, sz, "%lldh", d / 3600);
	else
		snprintf(buf, sz, "%lldd", d / 86400);
	return buf;
}

/* Display width: UTF-8 code points, not bytes. */
static size_t width(const char *s)
{
	size_t w = 0;

	for (; *s; s++)
		if (((unsigned char)*s & 0xc0) != 0x80)
			w++;
	return w;
}

static int push(struct cli_strv *s, const char *str)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 32;
		const char **v = realloc(s->v, cap * sizeof(*v));

		if (!v)
			return TY_ENOMEM;
		s->v = v;
		s->cap = cap;
	}
	s->v[s->n++] = str;
	return 0;
}

int cli_table_add(struct cli_table *t, const char *cell)
{
	return push(&t->cells, cell ? cell : "-");
}

int cli_table_addf(struct cli_table *t, const char *fmt, ...)
{
	va_list ap;
	char *s = NULL;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n < 0)
		return TY_ENOMEM;
	if (push(&t->owned, s)) {
		free(s);
		return TY_ENOMEM;
	}
	return push(&t->cells, s);
}

void cli_table_print(FILE *f, const struct cli_table *t)
{
	size_t *w = calloc(t->ncols, sizeof(*w));

	if (!w)
		return;
	for (size_t i = 0; i < t->cells.n; i++) {
		size_t cw = width(t->cells.v[i]);

		if (cw > w[i % t->ncols])
			w[i % t->ncols] = cw;
	}
	for (size_t i = 0; i < t->cells.n; i++) {
		size_t col = i % t->ncols;

		fputs(t->cells.v[i], f);
		if (col + 1 == t->ncols || i + 1 == t->cells.n)
			fputc('\n', f);
		else
			fprintf(f, "%*s", (int)(w[col] - width(t->cells.v[i]) + 2), "");
	}
	free(w);
}

void cli_table_free(struct cli_table *t)
{
	for (size_t i = 0; i < t->owned.n; i++)
		free((char *)t->owned.v[i]);
	cli_strv_free(&t->owned);
	cli_strv_free(&t->cells);
}

int cli_table_add_time(struct cli_table *t, const char *label, const json_t *obj,
		       const char *key)
{
	const char *ts = cli_json_str(obj, key, NULL);
	char age[32];

	if (cli_table_add(t, label))
		return TY_ENOMEM;
	if (!ts)
		return cli_table_add(t, "-");
	return cli_table_addf(t, "%s (%s ago)", ts, cli_age(age, sizeof(age), ts));
}
