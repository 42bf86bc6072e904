/*
 * The fabric watch (docs/operations.md, "The fabric watch"): every
 * --fabric-check-ms the ports of the HCAs the start probe found are read
 * again from sysfs, on the thread pool. When one changed (a port went down,
 * came up, or changed its rate), the inventory register reports is updated
 * and later launches get the NCCL environment of the fabric as it is now;
 * running attempts keep theirs. Warm containers, which hold the RDMA
 * devices or not, are made again. Every reading also gives the node's port
 * conditions (health.c): port_down, port_rate_low (--expect-port-gbps).
 */
#include "exec.h"
#include "ty_log.h"
#include "ty_time.h"

#include <stdlib.h>
#include <string.h>

struct exec_fabric {
	uv_timer_t timer;
	struct exec *x;
	bool busy;   /* a re-read on the thread pool */
	bool closed; /* the timer closed while busy: the re-read frees us */
	char **env;  /* owned: the NCCL variables now; NULL: the options' */
};

struct fabric_work {
	uv_work_t req;
	struct exec_fabric *f;
	struct hw_hca *hcas; /* owned: a copy, read again */
	size_t n;
	const char *root;
	bool changed;
};

static void fabric_free(struct exec_fabric *f)
{
	hw_names_free(f->env);
	free(f);
}

/* Log each port that changed, then take the new reading into the inventory. */
static void take(struct exec_fabric *f, struct hw_inventory *inv, const struct hw_hca *now)
{
	const struct exec_opts *o = exec__opts(f->x);
	struct ty_err err = {0};
	char **env = NULL;

	for (size_t i = 0; i < inv->nhcas; i++)
		for (int k = 0; k < now[i].nports || k < inv->hcas[i].nports; k++) {
			const struct hw_port *a = k < inv->hcas[i].nports ? &inv->hcas[i].ports[k] : NULL;
			const struct hw_port *b = k < now[i].nports ? &now[i].ports[k] : NULL;

			if (a && b && hw_port_same(a, b))
				continue;
			ty_warn("fabric: %s port %d: %s %g Gb/s -> %s %g Gb/s", inv->hcas[i].name,
				(a ? a : b)->port, a ? a->state : "absent", a ? a->rate_gbps : 0,
				b ? b->state : "absent", b ? b->rate_gbps : 0);
		}
	for (size_t i = 0; i < inv->nhcas; i++)
		inv->hcas[i] = now[i];
	if (hw_nccl_env(&env, inv, o->nccl_iface, &err)) {
		ty_error("fabric: cannot make the NCCL environment: %s", err.msg);
		return;
	}
	hw_names_free(f->env);
	f->env = env;
	ty_warn("fabric changed: later launches get %s (running attempts keep theirs)", env[0]);
	exec__register_soon(f->x); /* the scheduler and `jobctl nodes` see the ports now */
	exec__warm_stop(f->x); /* made with the old fabric's devices */
	exec__warm_fill(f->x);
}

#define PORT_KINDS ((1u << PROTO_CONDITION_PORT_DOWN) | (1u << PROTO_CONDITION_PORT_RATE_LOW))

/* The port conditions of the inventory's ports as they are now (degraded ones clear). */
static void ports_check(struct exec_fabric *f)
{
	const struct exec_opts *o = exec__opts(f->x);
	const struct hw_inventory *inv = o->inventory;
	struct hw_conditions *l = exec__conditions(f->x);
	struct hw_condition *found;
	size_t total = 0, k;
	int64_t now = ty_wall_ms();

	for (size_t i = 0; i < inv->nhcas; i++)
		total += (size_t)inv->hcas[i].nports;
	if (!(found = calloc(total ? total : 1, sizeof(*found)))) {
		ty_error("fabric: cannot judge the ports: out of memory");
		return;
	}
	k = hw_port_conditions(found, total, inv->hcas, inv->nhcas, o->expect_port_gbps);
	for (size_t i = 0; i < k; i++)
		hw_conditions_note(l, &found[i], now, NULL);
	hw_conditions_expire(l, -1, PORT_KINDS, found, k, now);
	free(found);
}

static void refresh_work(uv_work_t *req)
{
	struct fabric_work *w = req->data;

	w->changed = hw_ports_refresh(w->hcas, w->n, w->root);
}

static void refresh_done(uv_work_t *req, int status)
{
	struct fabric_work *w = req->data;
	struct exec_fabric *f = w->f;

	f->busy = false;
	if (f->closed)
		fabric_free(f);
	else if (!status && !exec__stopping(f->x)) {
		if (w->changed)
			take(f, exec__opts(f->x)->inventory, w->hcas);
		ports_check(f);
	}
	free(w->hcas);
	free(w);
}

static void on_tick(uv_timer_t *t)
{
	struct exec_fabric *f = t->data;
	const struct exec_opts *o = exec__opts(f->x);
	struct hw_inventory *inv = o->inventory;
	struct fabric_work *w;

	if (f->busy || exec__stopping(f->x) || !(w = calloc(1, sizeof(*w))))
		return;
	if (!(w->hcas = malloc(inv->nhcas * sizeof(*w->hcas)))) {
		free(w);
		return;
	}
	memcpy(w->hcas, inv->hcas, inv->nhcas * sizeof(*w->hcas));
	w->n = inv->nhcas;
	w->root = o->sysfs_root;
	w->f = f;
	w->req.data = w;
	if (uv_queue_work(exec__loop(f->x), &w->req, refresh_work, refresh_done)) {
		free(w->hcas);
		free(w);
		return;
	}
	f->busy = true;
}

int exec__fabric_start(struct exec_fabric **out, struct exec *x)
{
	const struct exec_opts *o = exec__opts(x);
	struct exec_fabric *f;

	*out = NULL;
	/* a simulated inventory's HCAs are read only from a given tree (tests) */
	if (o->fabric_check_ms <= 0 || !o->inventory || !o->inventory->nhcas ||
	    (o->inventory->simulated && !o->sysfs_root))
		return 0;
	if (!(f = calloc(1, sizeof(*f))))
		return TY_ENOMEM;
	f->x = x;
	uv_timer_init(exec__loop(x), &f->timer);
	f->timer.data = f;
	uv_timer_start(&f->timer, on_tick, (uint64_t)o->fabric_check_ms,
		       (uint64_t)o->fabric_check_ms);
	*out = f;
	ports_check(f); /* as the start probe found them */
	return 0;
}

char *const *exec__fabric_env_of(const struct exec_fabric *f, const struct exec_opts *o)
{
	return f && f->env ? f->env : o->fabric_env;
}

static void timer_closed(uv_handle_t *h)
{
	struct exec_fabric *f = h->data;

	if (f->busy)
		f->closed = true; /* refresh_done frees it */
	else
		fabric_free(f);
}

void exec__fabric_close(struct exec_fabric *f)
{
	if (f)
		uv_close((uv_handle_t *)&f->timer, timer_closed);
}
