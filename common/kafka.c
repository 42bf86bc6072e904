/* librdkafka wrapper. */
#include "ty_kafka.h"
#include "ty_log.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The operator's properties ("key=value"), applied to every client after Trainyard's own. */
static char **op_props;
static size_t op_nprops;

int ty_kafka_bootstrap(char *out, size_t outsz, const char *spec, struct ty_err *err)
{
	if (!spec || !*spec)
		return ty_err_set(err, TY_ECONFIG, "no Kafka bootstrap servers configured");
	if (spec[0] != '@') {
		if (strlen(spec) >= outsz)
			return ty_err_set(err, TY_ECONFIG, "bootstrap list too long");
		strcpy(out, spec);
		return 0;
	}
	FILE *f = fopen(spec + 1, "r");
	if (!f)
		return ty_err_set(err, TY_ECONFIG, "cannot read bootstrap file '%s': %s", spec + 1,
				  strerror(errno));
	if (!fgets(out, (int)outsz, f)) {
		fclose(f);
		return ty_err_set(err, TY_ECONFIG, "bootstrap file '%s' is empty", spec + 1);
	}
	fclose(f);
	out[strcspn(out, "\r\n")] = '\0';
	if (!*out)
		return ty_err_set(err, TY_ECONFIG, "bootstrap file '%s' is empty", spec + 1);
	return 0;
}

int ty_kafka_conf_set(rd_kafka_conf_t *conf, const char *k, const char *v, struct ty_err *err)
{
	char errstr[512];

	if (rd_kafka_conf_set(conf, k, v, errstr, sizeof(errstr)) != RD_KAFKA_CONF_OK)
		return ty_err_set(err, TY_ECONFIG, "kafka setting '%s': %s", k, errstr);
	return 0;
}

void ty_kafka_log(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
	/* syslog levels */
	enum ty_log_level l = level <= 3   ? TY_LOG_ERROR
			      : level == 4 ? TY_LOG_WARN
			      : level <= 6 ? TY_LOG_INFO
					   : TY_LOG_DEBUG;

	ty_log_at(l, 0, "rdkafka %s: %s", fac, buf);
}

static int conf_extra(rd_kafka_conf_t *conf, const char *const *extra, struct ty_err *err)
{
	for (; extra && *extra; extra++) {
		char key[256];
		const char *eq = strchr(*extra, '=');

		if (!eq || (size_t)(eq - *extra) >= sizeof(key))
			return ty_err_set(err, TY_ECONFIG, "kafka setting '%s' is not key=value",
					  *extra);
		snprintf(key, sizeof(key), "%.*s", (int)(eq - *extra), *extra);
		if (ty_kafka_conf_set(conf, key, eq + 1, err))
			return err ? err->code : TY_ECONFIG;
	}
	return 0;
}

/* Properties Trainyard sets itself: a file may not change what the code relies on. */
static const char *const reserved[] = {"bootstrap.servers", "metadata.broker.list", "group.id",
				       "enable.idempotence", "acks", "request.required.acks",
				       "enable.auto.commit", NULL};

static void props_clear(void)
{
	for (size_t i = 0; i < op_nprops; i++) {
		/* values may be passwords (sasl.password, ssl.key.password) */
		memset(op_props[i], 0, strlen(op_props[i]));
		free(op_props[i]);
	}
	free(op_props);
	op_props = NULL;
	op_nprops = 0;
}

static int conf_operator(rd_kafka_conf_t *conf, struct ty_err *err)
{
	return conf_extra(conf, (const char *const *)op_props, err);
}

static void quiet_log(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
	(void)rk, (void)level, (void)fac, (void)buf;
}

/* "key = value" with the blanks around both trimmed, in place; false when not key=value. */
static bool split_line(char **key, char **value, char *line)
{
	char *eq = strchr(line, '='), *e;

	if (!eq)
		return false;
	*eq = '\0';
	for (*key = line; **key == ' ' || **key == '\t'; (*key)++)
		;
	for (e = eq; e > *key && (e[-1] == ' ' || e[-1] == '\t'); e--)
		e[-1] = '\0';
	for (*value = eq + 1; **value == ' ' || **value == '\t'; (*value)++)
		;
	for (e = *value + strlen(*value); e > *value && (e[-1] == ' ' || e[-1] == '\t'); e--)
		e[-1] = '\0';
	return **key != '\0';
}

int ty_kafka_properties_load(const char *path, struct ty_err *err)
{
	rd_kafka_conf_t *conf = NULL;
	char line[4096], errstr[512];
	char **props = NULL;
	size_t n = 0;
	int lineno = 0, rc = 0;
	rd_kafka_t *rk;
	FILE *f;

	props_clear();
	if (!path)
		return 0;
	if (!(f = fopen(path, "r")))
		return ty_err_set(err, TY_ECONFIG, "cannot read kafka properties file '%s': %s",
				  path, strerror(errno));
	conf = rd_kafka_conf_new();
	while (fgets(line, sizeof(line), f)) {
		char *key, *value, **grown;
		size_t len = strcspn(line, "\r\n");

		lineno++;
		if (line[len] == '\0' && !feof(f)) {
			rc = ty_err_set(err, TY_ECONFIG, "'%s' line %d is longer than %zu bytes", path,
					lineno, sizeof(line) - 2);
			goto out;
		}
		line[len] = '\0';
		key = line + strspn(line, " \t");
		if (!*key || *key == '#')
			continue;
		if (!split_line(&key, &value, key)) {
			rc = ty_err_set(err, TY_ECONFIG, "'%s' line %d is not 'key = value'", path,
					lineno);
			goto out;
		}
		for (const char *const *r = reserved; *r; r++)
			if (!strcmp(key, *r)) {
				rc = ty_err_set(err, TY_ECONFIG,
						"kafka property '%s' ('%s' line %d) is set by "
						"Trainyard itself and cannot be changed",
						key, path, lineno);
				goto out;
			}
		if (rd_kafka_conf_set(conf, key, value, errstr, sizeof(errstr)) !=
		    RD_KAFKA_CONF_OK) {
			rc = ty_err_set(err, TY_ECONFIG, "kafka property '%s' ('%s' line %d): %s", key,
					path, lineno, errstr);
			goto out;
		}
		/* name a missing file here: librdkafka's own message does not */
		len = strlen(key);
		if (len > 9 && !strcmp(key + len - 9, ".location") && strcmp(value, "probe") &&
		    access(value, R_OK) != 0) {
			rc = ty_err_set(err, TY_ECONFIG,
					"kafka property '%s' ('%s' line %d): cannot read '%s': %s", key,
					path, lineno, value, strerror(errno));
			goto out;
		}
		if (!(grown = realloc(props, (n + 2) * sizeof(*props))) ||
		    !(grown[n] = malloc(strlen(key) + strlen(value) + 2))) {
			if (grown)
				props = grown;
			rc = ty_err_set(err, TY_ENOMEM, NULL);
			goto out;
		}
		props = grown;
		sprintf(props[n], "%s=%s", key, value);
		props[++n] = NULL;
	}
	if (ferror(f)) {
		rc = ty_err_set(err, TY_ECONFIG, "cannot read kafka properties file '%s': %s", path,
				strerror(errno));
		goto out;
	}
	/* a client from them, without brokers, checks what only a client checks (TLS files) */
	rd_kafka_conf_set_log_cb(conf, quiet_log);
	rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
	if (!rk) {
		rc = ty_err_set(err, TY_ECONFIG, "kafka properties in '%s' do not make a client: %s",
				path, errstr);
		goto out;
	}
	conf = NULL; /* the client owns it */
	rd_kafka_destroy(rk);
	op_props = props;
	op_nprops = n;
	props = NULL;
	n = 0;
out:
	fclose(f);
	if (conf)
		rd_kafka_conf_destroy(conf);
	memset(line, 0, sizeof(line));
	for (size_t i = 0; i < n; i++) {
		memset(props[i], 0, strlen(props[i]));
		free(props[i]);
	}
	free(props);
	return rc;
}

size_t ty_kafka_properties_count(void)
{
	return op_nprops;
}

static int make(rd_kafka_t **out, rd_kafka_type_t type, rd_kafka_conf_t *conf,
		struct ty_err *err)
{
	char errstr[512];

	rd_kafka_conf_set_log_cb(conf, ty_kafka_log);
	*out = rd_kafka_new(type, conf, errstr, sizeof(errstr));
	if (!*out) {
		rd_kafka_conf_destroy(conf);
		return ty_err_set(err, TY_EKAFKA, "cannot create kafka client: %s", errstr);
	}
	return 0;
}

int ty_kafka_producer_new_dr(rd_kafka_t **out, const char *bootstrap, const char *const *extra,
			     void (*dr)(rd_kafka_t *, const rd_kafka_message_t *, void *),
			     void *opaque, struct ty_err *err)
{
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	int rc;

	*out = NULL;
	if ((rc = ty_kafka_conf_set(conf, "bootstrap.servers", bootstrap, err)) ||
	    (rc = ty_kafka_conf_set(conf, "enable.idempotence", "true", err)) ||
	    (rc = ty_kafka_conf_set(conf, "acks", "all", err)) ||
	    (rc = ty_kafka_conf_set(conf, "linger.ms", "1", err)) ||
	    (rc = conf_extra(conf, extra, err)) || (rc = conf_operator(conf, err))) {
		rd_kafka_conf_destroy(conf);
		return rc;
	}
	if (dr)
		rd_kafka_conf_set_dr_msg_cb(conf, dr);
	rd_kafka_conf_set_opaque(conf, opaque);
	return make(out, RD_KAFKA_PRODUCER, conf, err);
}

int ty_kafka_producer_new(rd_kafka_t **out, const char *bootstrap, const char *const *extra,
			  struct ty_err *err)
{
	return ty_kafka_producer_new_dr(out, bootstrap, extra, NULL, NULL, err);
}

int ty_kafka_consumer_new(rd_kafka_t **out, const char *bootstrap, const char *group,
			  const char *const *extra, struct ty_err *err)
{
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	int rc;

	*out = NULL;
	if ((rc = ty_kafka_conf_set(conf, "bootstrap.servers", bootstrap, err)) ||
	    (rc = ty_kafka_conf_set(conf, "group.id", group, err)) ||
	    (rc = ty_kafka_conf_set(conf, "enable.auto.commit", "false", err)) ||
	    (rc = ty_kafka_conf_set(conf, "auto.offset.reset", "earliest", err)) ||
	    (rc = conf_extra(conf, extra, err)) || (rc = conf_operator(conf, err))) {
		rd_kafka_conf_destroy(conf);
		return rc;
	}
	if ((rc = make(out, RD_KAFKA_CONSUMER, conf, err)))
		return rc;
	rd_kafka_poll_set_consumer(*out);
	return 0;
}

void ty_kafka_destroy(rd_kafka_t *rk, int flush_ms)
{
	if (!rk)
		return;
	if (rd_kafka_type(rk) == RD_KAFKA_PRODUCER) {
		if (rd_kafka_flush(rk, flush_ms) != RD_KAFKA_RESP_ERR_NO_ERROR)
			ty_warn("kafka producer closed with %d undelivered messages",
				rd_kafka_outq_len(rk));
	} else {
		rd_kafka_consumer_close(rk);
		/*
		 * Closing hands the group coordinator's broker thread a node
		 * update that makes it refresh metadata; librdkafka 2.0.2
		 * aborts ("rd_kafka_broker_destroy_final: Assertion
		 * thrd_is_current") when rd_kafka_destroy has meanwhile begun
		 * to decommission the broker that refresh holds (upstream
		 * issue 3608). Let the thread serve it first.
		 */
		usleep(TY_KAFKA_CLOSE_SETTLE_MS * 1000);
	}
	rd_kafka_destroy(rk);
}
