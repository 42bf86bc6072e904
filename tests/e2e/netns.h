/*
 * Network namespaces for end-to-end tests: per test program one Linux bridge
 * "tyb<pid>" in the root namespace holding 10.x.y.1/24 (a /24 no route or
 * address of this machine overlaps), and n namespaces "ty<pid>n<i>", each with
 * `lo` up and an interface "eth0" at 10.x.y.(i+2)/24, the far end of the veth
 * pair "tyv<pid>h<i>" whose near end is a port of the bridge. So every node
 * has an address of its own, nodes reach each other and the root namespace
 * (the API fetching rank logs) over the bridge, and 127.0.0.1 is private to
 * each node.
 *
 * The embedded broker (librdkafka's mock cluster) listens on and advertises
 * 127.0.0.1 only, which a namespace cannot reach; netns_relay_loopback()
 * relays those ports into every namespace (see tests/README.md, "e2e/").
 *
 * Everything is removed at exit, after the last case (a leftover then fails
 * the run), on SIGTERM, SIGINT and SIGHUP, and, for a program that was
 * killed outright, by the next netns_up() on this machine: it removes any
 * bridge, veth or namespace named after a process that no longer exists.
 */
#ifndef TY_NETNS_H
#define TY_NETNS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NETNS_MAX 8
#define NETNS_IFNAME "eth0" /* the node's interface inside its namespace */

struct netns_plan {
	int n;
	char bridge[16];	  /* "tyb<pid>" */
	char gateway[16];	  /* "10.x.y.1": the bridge's address (root namespace) */
	char veth[NETNS_MAX][16]; /* "tyv<pid>h<i>": the root-namespace end */
	char ns[NETNS_MAX][32];	  /* "ty<pid>n<i>" */
	char addr[NETNS_MAX][16]; /* "10.x.y.(i+2)" */
};

/* ---- pure ---- */

/*
 * Names and addresses for n namespaces of process pid in 10.x.y.0/24.
 * Returns 0, or -1 when n is not 1..NETNS_MAX, x not 1..254 or y above 255.
 */
int netns_plan_make(struct netns_plan *p, long pid, int n, unsigned x, unsigned y);

/*
 * The pid in a name netns_plan_make gives out ("tyb<pid>", "tyv<pid>h<i>",
 * "ty<pid>n<i>"), or 0 for any other name.
 */
long netns_owner(const char *name);

/* One IPv4 prefix in host byte order. */
struct netns_prefix {
	uint32_t net;
	uint32_t mask;
};

/*
 * Whether 10.x.y.0/24 is free: it overlaps none of used[0..n) (routes and
 * interface addresses). Default routes (mask 0) do not count.
 */
bool netns_subnet_free(unsigned x, unsigned y, const struct netns_prefix *used, size_t n);

/*
 * The ports of a bootstrap list "127.0.0.1:P,127.0.0.1:P,..." into
 * ports[0..max). Returns how many, or -1 when an entry is not 127.0.0.1
 * with a port 1..65535 or there are more than max (the relay can only
 * carry loopback addresses into a namespace).
 */
int netns_loopback_ports(const char *list, int *ports, int max);

/*
 * Why the namespaces cannot be set up by a process of this effective uid
 * with `ip` at ip_path (NULL: not found), or NULL when they can.
 */
const char *netns_preflight(unsigned euid, const char *ip_path);

/* ---- the machine ---- */

/*
 * Sets up n namespaces (once per program; later calls return the same
 * plan, n must not change). Not root, no `ip`, or any step failing fails
 * the case with the reason and ends it: these tests never skip.
 */
const struct netns_plan *netns_up(int n);

/*
 * Tear everything down now: the relay, the veth pairs, the bridge, the
 * namespaces. Idempotent; also runs at exit, after the last case and on
 * SIGTERM/SIGINT/SIGHUP.
 */
void netns_down(void);

/*
 * The names of interfaces and namespaces owned by pid that exist now,
 * space separated (scratch string, "" for none).
 */
const char *netns_leftovers(long pid);

/*
 * Remove every bridge, veth and namespace named after a process that no
 * longer exists, SIGKILLing what still runs in such a namespace (netns_up
 * does this first). Needs root and `ip` like netns_up.
 */
void netns_sweep_dead(void);

/* {"<ip>", "netns", "exec", "ty<pid>n<i>", NULL}: run a command in namespace i. */
const char *const *netns_exec_prefix(int i);

/*
 * Relay, in every namespace, each 127.0.0.1:P of the bootstrap list (the
 * text, or "@FILE" holding it) to 127.0.0.1:P of the root namespace, where
 * the broker listens. The relay is a child process that listens inside the
 * namespaces and connects from the root one; it runs until netns_down().
 * Fails and ends the case when the list is not loopback-only or a port
 * cannot be bound.
 */
void netns_relay_loopback(const char *bootstrap);

/*
 * A network partition of namespace i (cut) or its end: its veth goes down
 * (up) and the loopback relay stops (resumes) moving bytes for it, so the
 * node reaches neither its peers nor the broker; its open connections stall
 * rather than break, as over a dead link, and what they queued flows once
 * it is back. Ends the case on failure.
 */
void netns_partition(int i, bool cut);

#endif
