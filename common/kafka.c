/* librdkafka wrapper. */
#include "ty_kafka.h"
#include "ty_log.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

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
	    (rc = conf_extra(conf, extra, err))) {
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
	    (rc = conf_extra(conf, extra, err))) {
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
	}
	rd_kafka_destroy(rk);
}
