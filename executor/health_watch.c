/*
 * The health watch (docs/dispatch.md, "Node conditions"): a thread of its
 * own holding one NVML session while the executor runs, which waits for
 * Xid and double-bit ECC events (nvmlEventSetWait_v2) and every
 * --health-check-ms reads each inventory GPU's health counters, judging
 * both into the node's conditions (health.c). It holds no CUDA context, but
 * its NVML session keeps the driver's handles open: like DCGM, it must be
 * stopped (the executor with it) before `nvidia-smi -r` resets a GPU.
 */
#include "exec.h"
#include "nvml.h"
#include "ty_log.h"
#include "ty_metrics.h"
#include "ty_time.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* the longest one wait for events blocks: how soon a stop or a sync is seen */
#define SLICE_MS 200
#define M_XID "DCGM_FI_DEV_XID_ERRORS"
#define EVENTS (NVML_EVENT_XID_CRITICAL | NVML_EVENT_DOUBLE_BIT_ECC)
/* conditions a GPU's pass speaks for: all but the ports' */
#define GPU_KINDS                                                                                  \
	(((1u << PROTO_CONDITION_KIND_COUNT) - 1) &                                                \
	 ~((1u << PROTO_CONDITION_PORT_DOWN) | (1u << PROTO_CONDITION_PORT_RATE_LOW)))
/* at most one condition of each kind per GPU and pass */
#define MAX_FOUND PROTO_CONDITION_KIND_COUNT

/* the calls whose failures are logged once per GPU */
enum call { C_HANDLE, C_REGISTER, C_ECC, C_REMAP, C_RETIRED, C_REASONS, C_NVLINK };

struct gpu_watch {
	struct hw_gpu gpu; /* a copy of the inventory's */
	nvml_device h;
	bool handle;
	bool lost; /* gpu_lost is listed: nothing is asked of it any more */
	bool have_start, have_prev;
	struct hw_gpu_reading start, prev;
	unsigned warned; /* 1 << enum call: failures already logged */
};

struct exec_health {
	struct exec_health_opts o; /* pointers borrowed */
	struct nvml nvml;
	bool inited; /* nvmlInit_v2 succeeded: one nvmlShutdown owed */
	nvml_event_set set;
	struct gpu_watch *g;
	size_t n;
	pthread_t thread;
	bool running;
	pthread_mutex_t mu; /* the fields below */
	pthread_cond_t cv;
	bool stop, wake;
	uint64_t started, done; /* passes begun and ended */
	bool wait_warned;
};

static void warn_once(struct gpu_watch *g, enum call c, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void warn_once(struct gpu_watch *g, enum call c, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	if (g->warned & (1u << c))
		return;
	g->warned |= 1u << c;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	ty_warn("health watch: GPU %d (%s): %s (logged once)", g->gpu.index, g->gpu.uuid, msg);
}

static void note(struct exec_health *h, const struct hw_condition *c, int64_t now)
{
	struct hw_condition added;

	if (hw_conditions_note(h->o.conditions, c, now, &added) && h->o.on_new)
		h->o.on_new(h->o.arg, &added);
}

static int get_handle(struct exec_health *h, struct gpu_watch *g, const char **call)
{
	int rc;

	if (g->gpu.uuid[0] && h->nvml.handle_by_uuid) {
		*call = "nvmlDeviceGetHandleByUUID";
		rc = h->nvml.handle_by_uuid(g->gpu.uuid, &g->h);
	} else {
		*call = "nvmlDeviceGetHandleByIndex_v2";
		rc = h->nvml.handle((unsigned)g->gpu.index, &g->h);
	}
	g->handle = rc == NVML_SUCCESS;
	return rc;
}

/*
 * rc of call on g into r: true when it answered. GPU is lost marks r lost
 * (the caller stops asking); a failure other than Not Supported is logged
 * once per GPU and kind of call.
 */
static bool answered(struct exec_health *h, struct gpu_watch *g, struct hw_gpu_reading *r, int rc,
		     const char *call, enum call c)
{
	if (rc == NVML_SUCCESS)
		return true;
	if (rc == NVML_ERROR_GPU_IS_LOST) {
		r->lost = true;
		snprintf(r->lost_call, sizeof(r->lost_call), "%s", call);
	} else if (rc != NVML_ERROR_NOT_SUPPORTED) {
		warn_once(g, c, "%s: %s (error %d)", call, nvml_str(&h->nvml, rc), rc);
	}
	return false;
}

static void read_links(struct exec_health *h, struct gpu_watch *g, struct hw_gpu_reading *r)
{
	for (unsigned l = 0; l < HW_NVLINKS && !r->lost; l++) {
		struct hw_link_reading *k = &r->links[l];
		unsigned int active = 0;
		int rc = h->nvml.nvlink_state(g->h, l, &active);

		/* past the GPU's links, or none at all */
		if (rc == NVML_ERROR_INVALID_ARGUMENT || (l == 0 && rc == NVML_ERROR_NOT_SUPPORTED))
			break;
		r->nlinks = (int)l + 1;
		if (!answered(h, g, r, rc, "nvmlDeviceGetNvLinkState", C_NVLINK))
			continue;
		k->known = true;
		k->active = active == NVML_FEATURE_ENABLED;
		k->errors_known = h->nvml.nvlink_errors != NULL;
		for (unsigned c = 0; c < 4 && k->errors_known && !r->lost; c++)
			k->errors_known =
			    answered(h, g, r, h->nvml.nvlink_errors(g->h, l, c, &k->errors[c]),
				     "nvmlDeviceGetNvLinkErrorCounter", C_NVLINK);
	}
}

/* One reading of g's counters; stops at the first call that says the GPU is lost. */
static void read_gpu(struct exec_health *h, struct gpu_watch *g, struct hw_gpu_reading *r)
{
	const struct nvml *n = &h->nvml;
	unsigned int corr, unc, pend, fail, retired;

	memset(r, 0, sizeof(*r));
	if (n->ecc_total)
		r->ecc_known = answered(h, g, r,
					n->ecc_total(g->h, NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
						     NVML_VOLATILE_ECC, &r->ecc_dbe),
					"nvmlDeviceGetTotalEccErrors", C_ECC);
	if (!r->lost && n->remapped_rows &&
	    (r->remap_known = answered(h, g, r, n->remapped_rows(g->h, &corr, &unc, &pend, &fail),
				       "nvmlDeviceGetRemappedRows", C_REMAP))) {
		r->remap_pending = pend != 0;
		r->remap_failed = fail != 0;
	}
	if (!r->lost && n->retired_pending &&
	    (r->retired_known = answered(h, g, r, n->retired_pending(g->h, &retired),
					 "nvmlDeviceGetRetiredPagesPendingStatus", C_RETIRED)))
		r->retired_pending = retired == NVML_FEATURE_ENABLED;
	if (!r->lost && n->clock_reasons)
		r->reasons_known =
		    answered(h, g, r, n->clock_reasons(g->h, &r->clock_reasons),
			     "nvmlDeviceGetCurrentClocksEventReasons", C_REASONS);
	if (!r->lost && n->nvlink_state)
		read_links(h, g, r);
}

/* Read every GPU and judge what it says. */
static void pass(struct exec_health *h)
{
	struct hw_condition found[MAX_FOUND];

	pthread_mutex_lock(&h->mu);
	h->started++;
	pthread_mutex_unlock(&h->mu);
	for (size_t i = 0; i < h->n; i++) {
		struct gpu_watch *g = &h->g[i];
		struct hw_gpu_reading cur;
		int64_t now = ty_wall_ms();
		const char *call;
		size_t k;
		int rc;

		if (g->lost)
			continue; /* gpu_lost stays listed until the executor restarts */
		memset(&cur, 0, sizeof(cur));
		if (!g->handle && (rc = get_handle(h, g, &call)) &&
		    !answered(h, g, &cur, rc, call, C_HANDLE) && !cur.lost)
			continue;
		if (!cur.lost)
			read_gpu(h, g, &cur);
		k = hw_health_judge(found, MAX_FOUND, &g->gpu, g->have_start ? &g->start : NULL,
				    g->have_prev ? &g->prev : NULL, &cur);
		for (size_t j = 0; j < k; j++)
			note(h, &found[j], now);
		hw_conditions_expire(h->o.conditions, g->gpu.index, GPU_KINDS, found, k, now);
		g->lost = cur.lost;
		if (!g->have_start) {
			g->start = cur;
			g->have_start = true;
		}
		g->prev = cur;
		g->have_prev = true;
	}
	pthread_mutex_lock(&h->mu);
	h->done++;
	pthread_cond_broadcast(&h->cv);
	pthread_mutex_unlock(&h->mu);
}

static struct gpu_watch *gpu_of_event(struct exec_health *h, nvml_device d)
{
	char uuid[HW_UUID_MAX * 2];

	for (size_t i = 0; i < h->n; i++)
		if (h->g[i].handle && h->g[i].h == d)
			return &h->g[i];
	/* a handle is the device's for the session, but match the UUID if not */
	if (h->nvml.uuid(d, uuid, sizeof(uuid)) == NVML_SUCCESS)
		for (size_t i = 0; i < h->n; i++)
			if (!strcmp(h->g[i].gpu.uuid, uuid))
				return &h->g[i];
	return NULL;
}

static void on_event(struct exec_health *h, const struct nvml_event_data *d)
{
	struct gpu_watch *g = gpu_of_event(h, d->device);
	struct hw_condition c;
	int64_t now = ty_wall_ms();
	char gpu[16];
	const char *desc;

	if (!g) {
		ty_debug("health watch: an event (type 0x%llx) of a GPU not in the inventory",
			 d->event_type);
		return;
	}
	if (d->event_type & NVML_EVENT_XID_CRITICAL) {
		/* dcgm-exporter's series: the last Xid seen on the GPU */
		snprintf(gpu, sizeof(gpu), "%d", g->gpu.index);
		if (h->o.metrics)
			ty_metrics_set(h->o.metrics, M_XID, (const char *[]){gpu, g->gpu.uuid},
				       (double)d->event_data);
		if (hw_xid_judge(&c, h->o.xids, &g->gpu, d->event_data))
			note(h, &c, now);
		else if (hw_xid_lookup(h->o.xids, d->event_data, &desc) == HW_XID_IGNORE)
			ty_info("health watch: Xid %llu on GPU %d (%s): %s: ignored (the "
				"application's own fault)",
				d->event_data, g->gpu.index, g->gpu.uuid, desc ? desc : "");
	}
	if (d->event_type & NVML_EVENT_DOUBLE_BIT_ECC) {
		memset(&c, 0, sizeof(c));
		c.kind = PROTO_CONDITION_ECC_DBE;
		c.severity = PROTO_SEVERITY_FATAL;
		c.gpu = g->gpu.index;
		c.code = -1;
		snprintf(c.gpu_uuid, sizeof(c.gpu_uuid), "%s", g->gpu.uuid);
		snprintf(c.evidence, sizeof(c.evidence), "GPU %d (%s): double-bit ECC error event",
			 g->gpu.index, g->gpu.uuid);
		note(h, &c, now);
	}
}

/* Whether to stop; else wait (cond, no events to wait for) up to ms. */
static bool stopping(struct exec_health *h, int64_t sleep_ms, bool *wake)
{
	bool stop;

	pthread_mutex_lock(&h->mu);
	if (sleep_ms > 0 && !h->stop && !h->wake) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += sleep_ms / 1000;
		ts.tv_nsec += (long)(sleep_ms % 1000) * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&h->cv, &h->mu, &ts);
	}
	stop = h->stop;
	*wake = h->wake;
	h->wake = false;
	pthread_mutex_unlock(&h->mu);
	return stop;
}

/*
 * Events until the next pass is due (or one is asked for, or a wait says a
 * GPU is lost); false when the watch is to stop.
 */
static bool wait_events(struct exec_health *h)
{
	int64_t due = ty_mono_ms() + h->o.check_ms;
	bool wake = false;

	for (;;) {
		int64_t left = due - ty_mono_ms();
		struct nvml_event_data d;
		int rc;

		if (stopping(h, 0, &wake))
			return false;
		if (wake || left <= 0)
			return true;
		if (left > SLICE_MS)
			left = SLICE_MS;
		if (!h->set) {
			if (stopping(h, left, &wake))
				return false;
			if (wake)
				return true;
			continue;
		}
		memset(&d, 0, sizeof(d));
		rc = h->nvml.event_set_wait(h->set, &d, (unsigned)left);
		if (rc == NVML_SUCCESS)
			on_event(h, &d);
		else if (rc == NVML_ERROR_GPU_IS_LOST)
			return true; /* the pass finds out which */
		else if (rc != NVML_ERROR_TIMEOUT) {
			if (!h->wait_warned)
				ty_warn("health watch: nvmlEventSetWait_v2: %s (error %d): counters "
					"only (logged once)",
					nvml_str(&h->nvml, rc), rc);
			h->wait_warned = true;
			if (stopping(h, left, &wake))
				return false;
		}
	}
}

static void *watch_main(void *arg)
{
	struct exec_health *h = arg;

	do
		pass(h);
	while (wait_events(h));
	return NULL;
}

/* The event set, each GPU registered for what it supports of EVENTS; NULL set: none. */
static void events_open(struct exec_health *h)
{
	const struct nvml *n = &h->nvml;
	int rc;

	if (!n->event_set_create || !n->event_set_free || !n->event_set_wait ||
	    !n->register_events) {
		ty_info("health watch: this NVML has no event sets: counters only");
		return;
	}
	if ((rc = n->event_set_create(&h->set))) {
		ty_warn("health watch: nvmlEventSetCreate: %s (error %d): counters only",
			nvml_str(n, rc), rc);
		h->set = NULL;
		return;
	}
	for (size_t i = 0; i < h->n; i++) {
		struct gpu_watch *g = &h->g[i];
		unsigned long long types = EVENTS;

		if (!g->handle)
			continue;
		if (n->supported_events && n->supported_events(g->h, &types) == NVML_SUCCESS)
			types &= EVENTS;
		if (!types) {
			ty_info("health watch: GPU %d (%s) reports no Xid or ECC events",
				g->gpu.index, g->gpu.uuid);
			continue;
		}
		if ((rc = n->register_events(g->h, types, h->set)))
			warn_once(g, C_REGISTER, "nvmlDeviceRegisterEvents: %s (error %d)",
				  nvml_str(n, rc), rc);
	}
}

static void health_free(struct exec_health *h)
{
	if (h->set && h->nvml.event_set_free)
		h->nvml.event_set_free(h->set);
	if (h->inited)
		h->nvml.shutdown();
	nvml_unload(&h->nvml);
	pthread_cond_destroy(&h->cv);
	pthread_mutex_destroy(&h->mu);
	free(h->g);
	free(h);
}

int exec_health_start(struct exec_health **out, const struct exec_health_opts *o,
		      struct ty_err *err)
{
	static const char *const xid_labels[] = {"gpu", "UUID", NULL};
	const struct hw_inventory *inv = o->inventory;
	const char *lib = o->nvml ? o->nvml : HW_NVML_DEFAULT;
	struct exec_health *h;
	struct ty_err why = {0};
	int rc;

	*out = NULL;
	if (o->check_ms <= 0)
		return ty_err_set(err, TY_EUNAVAIL, "--health-check-ms is 0");
	if (!inv || inv->simulated)
		return ty_err_set(err, TY_EUNAVAIL,
				  "the inventory is simulated (--fake-gpus, --inventory-file)");
	if (!inv->ngpus)
		return ty_err_set(err, TY_EUNAVAIL, "no GPU in the inventory");
	if (strcmp(inv->gpu_source, "nvml") != 0)
		return ty_err_set(err, TY_EUNAVAIL, "the GPUs came from %s, not from NVML",
				  inv->gpu_source[0] ? inv->gpu_source : "no probe");
	if (!(h = calloc(1, sizeof(*h))) || !(h->g = calloc(inv->ngpus, sizeof(*h->g)))) {
		free(h);
		return ty_err_set(err, TY_ENOMEM, NULL);
	}
	h->o = *o;
	h->n = inv->ngpus;
	pthread_mutex_init(&h->mu, NULL);
	pthread_cond_init(&h->cv, NULL);
	if (nvml_load(&h->nvml, lib, &why)) {
		rc = ty_err_set(err, TY_EUNAVAIL, "%s", why.msg);
		goto fail;
	}
	if ((rc = h->nvml.init())) {
		rc = ty_err_set(err, TY_EUNAVAIL, "nvmlInit_v2 of '%s': %s (error %d)", lib,
				nvml_str(&h->nvml, rc), rc);
		goto fail;
	}
	h->inited = true;
	if (o->metrics &&
	    (rc = ty_metrics_family(o->metrics, TY_METRIC_GAUGE, M_XID,
				    "The last Xid seen on the GPU, 0 when none (as dcgm-exporter).",
				    xid_labels, NULL, 0, err)))
		goto fail;
	for (size_t i = 0; i < h->n; i++) {
		struct gpu_watch *g = &h->g[i];
		char gpu[16];
		const char *call;

		g->gpu = inv->gpus[i];
		snprintf(gpu, sizeof(gpu), "%d", g->gpu.index);
		if (o->metrics)
			ty_metrics_set(o->metrics, M_XID, (const char *[]){gpu, g->gpu.uuid}, 0);
		/* a lost GPU is found by the first pass, which asks again */
		if ((rc = get_handle(h, g, &call)) && rc != NVML_ERROR_GPU_IS_LOST)
			warn_once(g, C_HANDLE, "%s: %s (error %d)", call, nvml_str(&h->nvml, rc),
				  rc);
	}
	events_open(h);
	if ((rc = pthread_create(&h->thread, NULL, watch_main, h))) {
		rc = ty_err_set(err, TY_EIO, "cannot start the health watch's thread: %s",
				strerror(rc));
		goto fail;
	}
	h->running = true;
	ty_info("health watch: %zu GPU(s) through '%s', counters every %lld ms, Xid events %s; "
		"stop the executor before resetting a GPU (nvidia-smi -r)",
		h->n, lib, (long long)o->check_ms, h->set ? "on" : "off");
	*out = h;
	return 0;
fail:
	health_free(h);
	return rc;
}

void exec_health_stop(struct exec_health *h)
{
	if (!h)
		return;
	pthread_mutex_lock(&h->mu);
	h->stop = true;
	pthread_cond_broadcast(&h->cv);
	pthread_mutex_unlock(&h->mu);
	if (h->running)
		pthread_join(h->thread, NULL);
	health_free(h);
}

uint64_t exec_health_sync_request(struct exec_health *h)
{
	uint64_t t;

	pthread_mutex_lock(&h->mu);
	t = h->started + 1; /* a pass that begins from now on */
	h->wake = true;
	pthread_cond_broadcast(&h->cv);
	pthread_mutex_unlock(&h->mu);
	return t;
}

bool exec_health_synced(struct exec_health *h, uint64_t ticket)
{
	bool done;

	pthread_mutex_lock(&h->mu);
	done = h->done >= ticket;
	pthread_mutex_unlock(&h->mu);
	return done;
}

size_t exec_health_gpus(const struct exec_health *h)
{
	return h ? h->n : 0;
}
