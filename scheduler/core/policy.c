/*
 * The policy core (policy.h): queue order, quota admission, topology-aware
 * all-or-nothing gang fit, reclaim and class preemption, the head job's
 * reservation and backfill around it. Pure; docs/scheduling.md is the policy.
 * Here: the names and the defaults; the rest is in policy_*.c by concern.
 */
#include "policy_internal.h"

/* ---- names ------------------------------------------------------------------------------- */

static const char *const class_names[SCHED_CLASS_COUNT] = {"high", "normal", "low", "scavenger"};
static const char *const topo_names[SCHED_TOPO_COUNT] = {"none", "block", "rack", "zone"};

const char *sched_class_name(enum sched_class c)
{
	return (unsigned)c < SCHED_CLASS_COUNT ? class_names[c] : "unknown";
}

const char *sched_topo_name(enum sched_topo t)
{
	return (unsigned)t < SCHED_TOPO_COUNT ? topo_names[t] : "unknown";
}

int sched_class_parse(const char *name)
{
	for (int i = 0; name && i < SCHED_CLASS_COUNT; i++)
		if (!strcmp(name, class_names[i]))
			return i;
	return -1;
}

int sched_topo_parse(const char *name)
{
	if (!name)
		return SCHED_TOPO_NONE;
	for (int i = 1; i < SCHED_TOPO_COUNT; i++)
		if (!strcmp(name, topo_names[i]))
			return i;
	return -1;
}

void sched_config_default(struct sched_config *c)
{
	memset(c, 0, sizeof(*c));
	c->half_life_s = QUOTA_DEFAULT_HALF_LIFE_S;
	/* the daemon's --min-runtime-seconds defaults */
	c->class_min_runtime_s[SCHED_CLASS_HIGH] = 600;
	c->class_min_runtime_s[SCHED_CLASS_NORMAL] = 600;
	c->class_min_runtime_s[SCHED_CLASS_LOW] = 300;
	c->reclaim_delay_s = 60;
	c->grace_margin_pct = 50;
	for (int k = 0; k < SCHED_CLASS_COUNT; k++)
		c->grace_min_s[k] = k == SCHED_CLASS_SCAVENGER ? 10 : 30;
	c->grace_max_s[SCHED_CLASS_HIGH] = 1800;
	c->grace_max_s[SCHED_CLASS_NORMAL] = 900;
	c->grace_max_s[SCHED_CLASS_LOW] = 600;
	c->grace_max_s[SCHED_CLASS_SCAVENGER] = 300;
	c->port_lo = 29500;
	c->port_hi = 29999;
	c->backfill = true;
	c->preemption = true;
}

int sched_grace_seconds(int64_t measured_ms, int margin_pct, int64_t min_s, int64_t max_s)
{
	int64_t g = measured_ms > 0 ? (measured_ms * (100 + margin_pct) + 99999) / 100000 : 0;

	if (g > max_s)
		g = max_s;
	if (g < min_s)
		g = min_s;
	return (int)g;
}
