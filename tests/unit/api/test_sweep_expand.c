/*
 * api/sweep_expand.c: a sweep body's trials, grid or random spec into
 * parameter sets, and the trial specs. The random rows were computed with
 * an independent splitmix64 (Python, in the commit that added this test).
 */
#include "sweep.h"
#include "ty_test.h"

#include <stdlib.h>
#include <string.h>

static json_t *parse(const char *text)
{
	json_error_t e;
	json_t *v = json_loads(text, JSON_DECODE_ANY, &e);

	if (!v)
		FAIL("bad test JSON %s: %s", text, e.text);
	return v;
}

/* The expansion of body as compact text with sorted keys. */
static char *expand_text(const char *body, struct api_problem *p)
{
	json_t *b = parse(body), *out;
	char *t;

	memset(p, 0, sizeof(*p));
	out = api_sweep_expand(b, p);
	json_decref(b);
	if (!out)
		return NULL;
	t = json_dumps(out, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
	json_decref(out);
	return t;
}

TY_TEST(splitmix64_reference_value)
{
	uint64_t st = 0;

	/* the published first output of splitmix64 seeded with 0 */
	CHECK(api_sweep_splitmix64(&st) == 0xe220a8397b1dcdafull);
	CHECK(st == 0x9E3779B97F4A7C15ull);
}

TY_TEST(expansions)
{
	static const struct {
		const char *body, *want;
	} rows[] = {
	    /* a list is kept as given */
	    {"{'trials':[{'lr':0.1},{'lr':0.3,'opt':'adam'}]}",
	     "[{\"lr\":0.10000000000000001},{\"lr\":0.29999999999999999,\"opt\":\"adam\"}]"},
	    {"{'trials':[{'flag':true}]}", "[{\"flag\":true}]"},
	    /* grid: keys in byte order, the last varying fastest, values in given order */
	    {"{'grid':{'lr':[0.1,0.01],'batch':[32,64]}}",
	     "[{\"batch\":32,\"lr\":0.10000000000000001},{\"batch\":32,\"lr\":0.01},"
	     "{\"batch\":64,\"lr\":0.10000000000000001},{\"batch\":64,\"lr\":0.01}]"},
	    {"{'grid':{'b':['x','y','z']}}", "[{\"b\":\"x\"},{\"b\":\"y\"},{\"b\":\"z\"}]"},
	    {"{'grid':{'c':[1],'a':[2,3],'B':[4]}}",
	     "[{\"B\":4,\"a\":2,\"c\":1},{\"B\":4,\"a\":3,\"c\":1}]"},
	    /* random, seed 7: per trial, the parameters in byte order, one draw each */
	    {"{'random':{'count':3,'seed':7,'params':{'w':{'uniform':[-1,1]},"
	     "'n':{'int_uniform':[1,6]},'lr':{'log_uniform':[1e-5,1e-1]},"
	     "'batch':{'choice':[32,64,128]}}}}",
	     "[{\"batch\":32,\"lr\":1.1672212299770219e-5,\"n\":1,\"w\":0.16586058605615617},"
	     "{\"batch\":64,\"lr\":9.9477781002288649e-5,\"n\":5,\"w\":-0.34384652169499419},"
	     "{\"batch\":128,\"lr\":0.00044933017999564676,\"n\":2,\"w\":0.91974815314618308}]"},
	    {"{'random':{'count':1,'seed':0,'params':{'k':{'int_uniform':[5,5]}}}}", "[{\"k\":5}]"},
	    /* all 2^64 values (was a division by zero; fuzz/corpus/sweep): the draw itself,
	     * splitmix64(0) = 0xe220a8397b1dcdaf, added to the low end modulo 2^64 */
	    {"{'random':{'count':1,'seed':0,'params':{'k':{'int_uniform':"
	     "[-9223372036854775808,9223372036854775807]}}}}",
	     "[{\"k\":7070836379803831727}]"},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct api_problem p;
		char *body = strdup(rows[i].body), *got;

		for (char *c = body; *c; c++)
			if (*c == '\'')
				*c = '"';
		ty_test_context("%s", rows[i].body);
		got = expand_text(body, &p);
		if (!got)
			FAIL("refused: %s: %s", p.field, p.detail);
		else
			CHECK_STR_EQ(got, rows[i].want);
		free(got);
		free(body);
	}
}

TY_TEST(same_seed_same_trials_other_seed_others)
{
	struct api_problem p;
	const char *a = "{\"random\":{\"count\":50,\"seed\":42,\"params\":"
			"{\"x\":{\"uniform\":[0,1]}}}}";
	const char *b = "{\"random\":{\"count\":50,\"seed\":43,\"params\":"
			"{\"x\":{\"uniform\":[0,1]}}}}";
	char *t1 = expand_text(a, &p), *t2 = expand_text(a, &p), *t3 = expand_text(b, &p);

	REQUIRE(t1 && t2 && t3);
	CHECK_STR_EQ(t1, t2);
	CHECK(strcmp(t1, t3) != 0);
	free(t1);
	free(t2);
	free(t3);
}

static const char *many_trials(int n)
{
	char *s = ty_test_alloc((size_t)n * 12 + 32), *o = s;

	o += sprintf(o, "{'trials':[");
	for (int i = 0; i < n; i++)
		o += sprintf(o, "%s{'i':%d}", i ? "," : "", i);
	strcpy(o, "]}");
	return s;
}

TY_TEST(errors_name_the_field)
{
	static const struct {
		const char *body;
		unsigned status;
		const char *code, *field;
	} rows[] = {
	    {"{}", 422, "missing_field", "trials"},
	    {"{'trials':[{'a':1}],'grid':{'a':[1]}}", 422, "invalid_field", "grid"},
	    {"{'grid':{'a':[1]},'random':{}}", 422, "invalid_field", "random"},
	    {"{'trials':{}}", 422, "invalid_field", "trials"},
	    {"{'trials':[]}", 422, "invalid_field", "trials"},
	    {"{'trials':[{'a':1},3]}", 422, "invalid_field", "trials[1]"},
	    {"{'trials':[{}]}", 422, "invalid_field", "trials[0]"},
	    {"{'trials':[{'a':[1]}]}", 422, "invalid_field", "trials[0]"},
	    {"{'trials':[{'a':null}]}", 422, "invalid_field", "trials[0]"},
	    {"{'trials':[{'':1}]}", 422, "invalid_field", "trials[0]"},
	    {"{'trials':[{'a-b':1,'A_B':2}]}", 422, "invalid_field", "trials[0]"},
	    {"{'grid':[]}", 422, "invalid_field", "grid"},
	    {"{'grid':{}}", 422, "invalid_field", "grid"},
	    {"{'grid':{'a':[]}}", 422, "invalid_field", "grid.a"},
	    {"{'grid':{'a':3}}", 422, "invalid_field", "grid.a"},
	    {"{'grid':{'a':[{}]}}", 422, "invalid_field", "grid.a"},
	    {"{'grid':{'a':[1,2,3,4,5,6,7,8,9,10],'b':[1,2,3,4,5,6,7,8,9,10],"
	     "'c':[1,2,3,4,5,6,7,8,9,10,11]}}",
	     422, "invalid_field", "grid"},
	    {"{'random':3}", 422, "invalid_field", "random"},
	    {"{'random':{'count':1,'seed':1,'params':{'a':{'choice':[1]}},'x':1}}", 400,
	     "unknown_field", "random.x"},
	    {"{'random':{'seed':1,'params':{'a':{'choice':[1]}}}}", 422, "missing_field",
	     "random.count"},
	    {"{'random':{'count':0,'seed':1,'params':{'a':{'choice':[1]}}}}", 422,
	     "invalid_field", "random.count"},
	    {"{'random':{'count':1001,'seed':1,'params':{'a':{'choice':[1]}}}}", 422,
	     "invalid_field", "random.count"},
	    {"{'random':{'count':1,'params':{'a':{'choice':[1]}}}}", 422, "missing_field",
	     "random.seed"},
	    {"{'random':{'count':1,'seed':-1,'params':{'a':{'choice':[1]}}}}", 422,
	     "invalid_field", "random.seed"},
	    {"{'random':{'count':1,'seed':1.5,'params':{'a':{'choice':[1]}}}}", 422,
	     "invalid_field", "random.seed"},
	    {"{'random':{'count':1,'seed':1}}", 422, "missing_field", "random.params"},
	    {"{'random':{'count':1,'seed':1,'params':{}}}", 422, "invalid_field",
	     "random.params"},
	    {"{'random':{'count':1,'seed':1,'params':{'a':3}}}", 422, "invalid_field",
	     "random.params.a"},
	    {"{'random':{'count':1,'seed':1,'params':{'a':{'uniform':[0,1],'choice':[1]}}}}",
	     422, "invalid_field", "random.params.a"},
	    {"{'random':{'count':1,'seed':1,'params':{'a':{'normal':[0,1]}}}}", 400,
	     "unknown_field", "random.params.a"},
	    {"{'random':{'count':1,'seed':1,'params':{'a':{'uniform':[1,1]}}}}", 422,
	     "invalid_field", "random.params.a.uniform"},
	    /* high - low overflows: the draw would be inf or NaN, which JSON cannot hold
	     * (was a 500; fuzz/corpus/sweep) */
	    {"{'random':{'count':1,'seed':1,'params':{'a':{'uniform':[-1e308,1e308]}}}}", 422,
	     "invalid_field", "random.params.a.uniform"},
	    {"{'random':{'count':1,'seed':1,'params':{'a':{'uniform':"
	     "[-1.7976931348623157e308,1.7976931348623157e308]}}}}",
	     422, "invalid_field", "random.params.a.uniform"},
	    {"{'random':{'count':1,'seed':1,'params':{'a':{'uniform':[0]}}}}", 422,
	     "invalid_field", "random.params.a.uniform"},
	    {"{'random':{'count':1,'seed':1,'params':{'a':{'uniform':['0',1]}}}}", 422,
	     "invalid_field", "random.params.a.uniform"},
	    {"{'random':{'count':1,'seed':1,'params':{'a':{'log_uniform':[0,1]}}}}", 422,
	     "invalid_field", "random.params.a.log_uniform"},
	    {"{'random':{'count':1,'seed':1,'params':{'a':{'int_uniform':[2,1]}}}}", 422,
	     "invalid_field", "random.params.a.int_uniform"},
	    {"{'random':{'count':1,'seed':1,'params':{'a':{'int_uniform':[0.5,1]}}}}", 422,
	     "invalid_field", "random.params.a.int_uniform"},
	    {"{'random':{'count':1,'seed':1,'params':{'a':{'choice':[]}}}}", 422,
	     "invalid_field", "random.params.a.choice"},
	    {"{'random':{'count':1,'seed':1,'params':{'a':{'choice':[[1]]}}}}", 422,
	     "invalid_field", "random.params.a.choice"},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct api_problem p;
		char *body = strdup(rows[i].body), *got;

		for (char *c = body; *c; c++)
			if (*c == '\'')
				*c = '"';
		ty_test_context("%s", rows[i].body);
		got = expand_text(body, &p);
		CHECK(got == NULL);
		CHECK_INT_EQ(p.status, rows[i].status);
		CHECK_STR_EQ(p.code, rows[i].code);
		CHECK_STR_EQ(p.field, rows[i].field);
		free(got);
		free(body);
	}
	{
		struct api_problem p;
		char *body = strdup(many_trials(1001)), *ok = strdup(many_trials(1000)), *got;

		for (char *c = body; *c; c++)
			if (*c == '\'')
				*c = '"';
		for (char *c = ok; *c; c++)
			if (*c == '\'')
				*c = '"';
		ty_test_context("1001 trials");
		CHECK((got = expand_text(body, &p)) == NULL);
		CHECK_STR_EQ(p.field, "trials");
		free(got);
		ty_test_context("1000 trials");
		CHECK((got = expand_text(ok, &p)) != NULL);
		free(got);
		free(body);
		free(ok);
	}
}

TY_TEST(env_names_and_values)
{
	static const struct {
		const char *name, *env;
	} names[] = {
	    {"lr", "TRAINYARD_PARAM_LR"},
	    {"batch-size", "TRAINYARD_PARAM_BATCH_SIZE"},
	    {"model.depth", "TRAINYARD_PARAM_MODEL_DEPTH"},
	    {"x9", "TRAINYARD_PARAM_X9"},
	    {"é", "TRAINYARD_PARAM___"},
	};
	static const struct {
		const char *json, *text;
	} values[] = {
	    {"0.1", "0.1"},   {"1e-05", "1e-05"},
	    {"3", "3"},       {"-2", "-2"},
	    {"2.0", "2.0"},   {"1e300", "1e+300"},
	    {"true", "true"}, {"false", "false"},
	    {"\"adam\"", "adam"},
	};
	char buf[128];

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		ty_test_context("%s", names[i].name);
		REQUIRE(api_sweep_env_name(buf, sizeof(buf), names[i].name));
		CHECK_STR_EQ(buf, names[i].env);
	}
	ty_test_context(NULL);
	CHECK(!api_sweep_env_name(buf, 20, "long_name"));
	for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
		json_t *v = parse(values[i].json);
		char *t = api_sweep_value_text(v);

		ty_test_context("%s", values[i].json);
		CHECK_STR_EQ(t, values[i].text);
		free(t);
		json_decref(v);
	}
}

TY_TEST(trial_spec_adds_the_env)
{
	json_t *tmpl = parse("{\"team\":\"t\",\"command\":[\"python\"],\"env\":{\"A\":\"1\"}}");
	json_t *params = parse("{\"lr\":0.1,\"opt\":\"adam\",\"batch-size\":32}");
	json_t *spec = api_sweep_trial_spec(tmpl, params), *env;

	REQUIRE(spec != NULL);
	env = json_object_get(spec, "env");
	CHECK_INT_EQ(json_object_size(env), 5);
	CHECK_STR_EQ(json_string_value(json_object_get(env, "A")), "1");
	CHECK_STR_EQ(json_string_value(json_object_get(env, "TRAINYARD_PARAMS")),
		     "{\"batch-size\":32,\"lr\":0.1,\"opt\":\"adam\"}");
	CHECK_STR_EQ(json_string_value(json_object_get(env, "TRAINYARD_PARAM_LR")), "0.1");
	CHECK_STR_EQ(json_string_value(json_object_get(env, "TRAINYARD_PARAM_OPT")), "adam");
	CHECK_STR_EQ(json_string_value(json_object_get(env, "TRAINYARD_PARAM_BATCH_SIZE")),
		     "32");
	/* the template itself is untouched */
	CHECK_INT_EQ(json_object_size(json_object_get(tmpl, "env")), 1);
	json_decref(spec);
	json_decref(params);
	json_decref(tmpl);
}
