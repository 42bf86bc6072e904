/*
 * Node labels from "k=v,k=v", and what the node is expected to have: the
 * expected-GPUs label and the fault register reports when fewer are found
 * (pure).
 */
#include "exec.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LABEL_MAX 63

static bool key_char(char c)
{
	return isalnum((unsigned char)c) || c == '.' || c == '_' || c == '-' || c == '/';
}

static bool value_char(char c)
{
	return isalnum((unsigned char)c) || c == '.' || c == '_' || c == '-';
}

/* One "k=v" of length n at s into obj. */
static int parse_one(json_t *obj, const char *s, size_t n, struct ty_err *err)
{
	const char *eq = memchr(s, '=', n);
	char key[LABEL_MAX + 1], val[LABEL_MAX + 1];
	size_t kl, vl;

	if (!eq)
		return ty_err_set(err, TY_EINVAL, "label '%.*s' is not key=value", (int)n, s);
	kl = (size_t)(eq - s);
	vl = n - kl - 1;
	if (kl == 0 || kl > LABEL_MAX || !isalnum((unsigned char)s[0]))
		return ty_err_set(err, TY_EINVAL,
				  "label key '%.*s' must be 1-%d characters starting alphanumeric",
				  (int)kl, s, LABEL_MAX);
	if (vl > LABEL_MAX)
		return ty_err_set(err, TY_EINVAL, "label '%.*s' has a value over %d characters",
				  (int)kl, s, LABEL_MAX);
	for (size_t i = 0; i < kl; i++)
		if (!key_char(s[i]))
			return ty_err_set(err, TY_EINVAL,
					  "label key '%.*s' may only hold [A-Za-z0-9._/-]", (int)kl,
					  s);
	for (size_t i = 0; i < vl; i++)
		if (!value_char(eq[1 + i]))
			return ty_err_set(err, TY_EINVAL,
					  "label '%.*s' value may only hold [A-Za-z0-9._-]",
					  (int)kl, s);
	memcpy(key, s, kl);
	key[kl] = '\0';
	memcpy(val, eq + 1, vl);
	val[vl] = '\0';
	if (json_object_get(obj, key))
		return ty_err_set(err, TY_EINVAL, "label '%s' is given twice", key);
	if (json_object_set_new(obj, key, json_string(val)))
		return ty_err_set(err, TY_ENOMEM, NULL);
	return 0;
}

int exec_labels_parse(json_t **out, const char *spec, struct ty_err *err)
{
	json_t *obj = json_object();
	const char *s = spec ? spec : "";
	const json_t *v;
	int rc = 0;

	*out = NULL;
	if (!obj)
		return ty_err_set(err, TY_ENOMEM, NULL);
	while (*s) {
		size_t n = strcspn(s, ",");

		if (n == 0) {
			rc = ty_err_set(err, TY_EINVAL, "empty label in '%s'", spec);
			goto out;
		}
		if ((rc = parse_one(obj, s, n, err)))
			goto out;
		s += n;
		if (*s == ',' && !*++s) {
			rc = ty_err_set(err, TY_EINVAL, "empty label in '%s'", spec);
			goto out;
		}
	}
	/* the scheduler's spot logic reads pool: a typo must not pass as on-demand */
	if ((v = json_object_get(obj, "pool")) && strcmp(json_string_value(v), "spot") &&
	    strcmp(json_string_value(v), "on-demand")) {
		rc = ty_err_set(err, TY_EINVAL, "label pool '%s' is not spot or on-demand",
				json_string_value(v));
		goto out;
	}
	/* a typo here would silently turn the expectation off */
	if ((rc = exec_labels_expected_gpus(&(int){0}, obj, err)))
		goto out;
	*out = obj;
	obj = NULL;
out:
	json_decref(obj);
	return rc;
}

int exec_labels_expected_gpus(int *out, const json_t *labels, struct ty_err *err)
{
	const char *v = json_string_value(json_object_get(labels, EXEC_LABEL_EXPECTED_GPUS));
	char *end;
	long n;

	*out = 0;
	if (!v)
		return 0;
	/* digits only: strtol alone would take " 8", "+8" and "8.0"'s 8 */
	n = isdigit((unsigned char)v[0]) ? strtol(v, &end, 10) : -1;
	if (n < 0 || *end || n > EXEC_EXPECT_GPUS_MAX)
		return ty_err_set(err, TY_EINVAL,
				  "label " EXEC_LABEL_EXPECTED_GPUS " '%s' is not a number of GPUs "
				  "from 0 to %d",
				  v, EXEC_EXPECT_GPUS_MAX);
	*out = (int)n;
	return 0;
}

void exec_expect_fault(char *out, size_t outsz, int expected, size_t found, const char *gpu_fault)
{
	bool unread = gpu_fault && *gpu_fault;

	if (outsz)
		out[0] = '\0';
	if (expected <= 0 || (found >= (size_t)expected && !unread))
		return;
	if (found < (size_t)expected)
		snprintf(out, outsz, "found %zu of %d expected GPUs%s%s", found, expected,
			 unread ? "; " : "", unread ? gpu_fault : "");
	else
		snprintf(out, outsz, "found %zu GPUs (%d expected), but %s", found, expected,
			 gpu_fault);
}
