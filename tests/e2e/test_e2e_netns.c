/*
 * Jobs across network namespaces: each executor runs in a namespace of its
 * own (netns.h) with an address of its own, so a rank can reach a rank of
 * the other node only through MASTER_ADDR over the bridge, never through a
 * shared loopback. The broker's loopback ports are relayed into the
 * namespaces; the API reaches the executors' log servers over the bridge.
 */
#include "e2e.h"
#include "netns.h"
#include "ty_test.h"

#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define PYTHON "/usr/bin/python3" /* the interpreter with the system's packages */

/*
 * The rendezvous probe (standard library only): rank 0 listens on
 * MASTER_ADDR:MASTER_PORT; every other rank connects, says "RANK IP" (the
 * address its connection came from) and waits for "ok". Rank 0 checks that
 * the claimed IP is the one the connection came from, appends "RANK IP" to
 * $OUTDIR/rendezvous-JOB-ATTEMPT as each rank arrives, and exits 0 once it
 * has heard from every rank and at least one came from another address
 * than its own; rank 0 waits for as long as the job may run. argv[1]:
 *   master    as above;
 *   silent    rank 0 never listens;
 *   loopback  rank 0 listens on 0.0.0.0 and the others dial 127.0.0.1.
 * Any other rank that finds nobody to talk to within argv[2] seconds (default
 * 60) exits 3.
 */
static const char probe_py[] =
    "import os, socket, sys, time\n"
    "mode = sys.argv[1]\n"
    "rank, world = int(os.environ['RANK']), int(os.environ['WORLD_SIZE'])\n"
    "addr, port = os.environ['MASTER_ADDR'], int(os.environ['MASTER_PORT'])\n"
    "deadline = time.monotonic() + float(sys.argv[2] if len(sys.argv) > 2 else 60)\n"
    "out = os.path.join(os.environ['OUTDIR'], 'rendezvous-%s-%s' % (\n"
    "    os.environ['TRAINYARD_JOB_ID'], os.environ['TRAINYARD_ATTEMPT']))\n"
    "if rank == 0:\n"
    "    if mode == 'silent':\n"
    "        time.sleep(600)\n"
    "        sys.exit(0)\n"
    "    s = socket.socket()\n"
    "    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
    "    s.bind(('0.0.0.0' if mode == 'loopback' else addr, port))\n"
    "    s.listen(world)\n"
    "    print('rank 0 listening on %s:%d' % s.getsockname(), flush=True)\n"
    "    heard = {}\n"
    "    while len(heard) < world - 1:\n"
    "        c, (ip, _) = s.accept()\n"
    "        c.settimeout(10)\n"
    "        r, claimed = c.makefile().readline().split()\n"
    "        if claimed != ip:\n"
    "            print('rank %s claims %s but came from %s' % (r, claimed, ip), flush=True)\n"
    "            sys.exit(4)\n"
    "        heard[int(r)] = ip\n"
    "        with open(out, 'a') as f:\n"
    "            f.write('%s %s\\n' % (r, ip))\n"
    "        c.sendall(b'ok\\n')\n"
    "        c.close()\n"
    "    ok = set(heard) == set(range(1, world)) and any(ip != addr for ip in heard.values())\n"
    "    print('rank 0 heard', sorted(heard.items()), flush=True)\n"
    "    sys.exit(0 if ok else 5)\n"
    "dial = '127.0.0.1' if mode == 'loopback' else addr\n"
    "while True:\n"
    "    try:\n"
    "        c = socket.create_connection((dial, port), timeout=5)\n"
    "        break\n"
    "    except OSError as e:\n"
    "        if time.monotonic() > deadline:\n"
    "            print('rank %d: no rendezvous at %s:%d: %s' % (rank, dial, port, e), flush=True)\n"
    "            sys.exit(3)\n"
    "        time.sleep(0.1)\n"
    "me = c.getsockname()[0]\n"
    "c.sendall(('%d %s\\n' % (rank, me)).encode())\n"
    "c.settimeout(30)\n"
    "reply = c.makefile().readline()\n"
    "print('rank %d joined %s:%d from %s: %s' % (rank, dial, port, me, reply.strip()), "
    "flush=True)\n"
    "sys.exit(0 if reply == 'ok\\n' else 5)\n";

static const struct netns_plan *net;

/* The relay needs the broker's ports, which exist only once it runs. */
static void broker_up(struct e2e *e)
{
	netns_relay_loopback(e->bootstrap);
}

/* The stack with executor i in namespace i at its address. */
static struct e2e *stack(void)
{
	if (!net) {
		struct e2e_layout l = {.broker_up = broker_up};

		net = netns_up(2);
		for (int i = 0; i < 2; i++) {
			l.address[i] = net->addr[i];
			l.prefix[i] = netns_exec_prefix(i);
		}
		e2e_set_layout(&l);
	}
	return e2e_get();
}

/* text written to NAME in the program's scratch directory (ranks of both nodes see it) */
static const char *script(const char *name, const char *text)
{
	const char *path = ty_test_strf("%s/%s", ty_test_workdir(), name);
	FILE *f = fopen(path, "w");

	REQUIRE(f != NULL);
	REQUIRE(fputs(text, f) >= 0);
	REQUIRE(fclose(f) == 0);
	return path;
}

static const char *probe_path(void)
{
	return script("rendezvous.py", probe_py);
}

/* A JSON array of strings (scratch), escaped by Jansson. */
static const char *argv_json(const char *const *argv)
{
	json_t *a = json_array();
	char *s;
	const char *out;

	for (int i = 0; argv[i]; i++)
		json_array_append_new(a, json_string(argv[i]));
	s = json_dumps(a, JSON_COMPACT);
	out = ty_test_strf("%s", s);
	free(s);
	json_decref(a);
	return out;
}

static const char *address_of(struct e2e *e, const char *node)
{
	for (int i = 0; i < 2; i++)
		if (node && !strcmp(node, e->node[i]))
			return e->address[i];
	return NULL;
}

/* GET /v1/jobs/{id}/logs of a rank: through the API, from the executor in its namespace. */
static const char *rank_log(struct e2e *e, long long id, int rank)
{
	struct ty_resp r = {0};
	const char *body;

	ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld/logs?rank=%d&attempt=1", id, rank), e->token,
		NULL, NULL);
	CHECK_STATUS(&r, 200);
	body = ty_test_strf("%s", r.status == 200 ? r.body : "");
	ty_resp_free(&r);
	return body;
}

TY_TEST(names_addresses_and_lists)
{
	struct netns_plan p;
	static const struct {
		const char *name;
		long owner;
	} owners[] = {
	    {"tyb4242", 4242},
	    {"tyv4242h0", 4242},
	    {"ty4242n1", 4242},
	    {"ty4242n12", 4242},
	    {"tyb", 0},
	    {"tyb0", 0},
	    {"tyb042", 0},
	    {"tyb12x", 0},
	    {"tyv42", 0},
	    {"tyv42h", 0},
	    {"tyv42n0", 0},
	    {"ty42h0", 0},
	    {"ty42n", 0},
	    {"ty42n0x", 0},
	    {"eth0", 0},
	    {"tyx42n0", 0},
	    {"ty12345678901n0", 0},
	    {"", 0},
	};
	static const struct netns_prefix used[] = {
	    {0, 0},		      /* default route: ignored */
	    {0x0a640000, 0xffff0000}, /* 10.100.0.0/16 */
	    {0x0ac80700, 0xffffff00}, /* 10.200.7.0/24 */
	    {0x0ad20304, 0xffffffff}, /* 10.210.3.4/32 */
	    {0xc0000200, 0xffffff00}, /* 192.0.2.0/24 */
	};
	static const struct {
		unsigned x, y;
		bool free;
	} subnets[] = {
	    {100, 0, false}, {100, 255, false}, {200, 7, false}, {200, 8, true},
	    {210, 3, false}, {210, 4, true},	{101, 0, true},
	};
	static const struct {
		const char *list;
		int n, first, last;
	} lists[] = {
	    {"127.0.0.1:9092", 1, 9092, 9092},
	    {"127.0.0.1:1,127.0.0.1:65535,127.0.0.1:40000", 3, 1, 40000},
	    {"localhost:9092", -1, 0, 0},
	    {"127.0.0.2:9092", -1, 0, 0},
	    {"127.0.0.1:0", -1, 0, 0},
	    {"127.0.0.1:65536", -1, 0, 0},
	    {"127.0.0.1:9092,", -1, 0, 0},
	    {"127.0.0.1:9092 ", -1, 0, 0},
	    {"", -1, 0, 0},
	};
	int ports[4];

	REQUIRE_INT_EQ(netns_plan_make(&p, 4242, 2, 123, 45), 0);
	CHECK_STR_EQ(p.bridge, "tyb4242");
	CHECK_STR_EQ(p.gateway, "10.123.45.1");
	CHECK_STR_EQ(p.veth[1], "tyv4242h1");
	CHECK_STR_EQ(p.ns[0], "ty4242n0");
	CHECK_STR_EQ(p.addr[0], "10.123.45.2");
	CHECK_STR_EQ(p.addr[1], "10.123.45.3");
	/* interface names must fit IFNAMSIZ with the largest pid Linux gives */
	REQUIRE_INT_EQ(netns_plan_make(&p, 4194304, NETNS_MAX, 254, 255), 0);
	CHECK(strlen(p.veth[NETNS_MAX - 1]) <= 15);
	CHECK_STR_EQ(p.addr[NETNS_MAX - 1], "10.254.255.9");
	CHECK_INT_EQ(netns_plan_make(&p, 1, 0, 1, 0), -1);
	CHECK_INT_EQ(netns_plan_make(&p, 1, NETNS_MAX + 1, 1, 0), -1);
	CHECK_INT_EQ(netns_plan_make(&p, 1, 1, 0, 0), -1);
	CHECK_INT_EQ(netns_plan_make(&p, 1, 1, 255, 0), -1);
	CHECK_INT_EQ(netns_plan_make(&p, 1, 1, 1, 256), -1);
	for (size_t i = 0; i < sizeof(owners) / sizeof(owners[0]); i++) {
		ty_test_context("owner of '%s'", owners[i].name);
		CHECK_INT_EQ(netns_owner(owners[i].name), owners[i].owner);
	}
	for (size_t i = 0; i < sizeof(subnets) / sizeof(subnets[0]); i++) {
		ty_test_context("10.%u.%u.0/24", subnets[i].x, subnets[i].y);
		CHECK_INT_EQ(netns_subnet_free(subnets[i].x, subnets[i].y, used,
					       sizeof(used) / sizeof(used[0])),
			     subnets[i].free);
	}
	for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
		int n = netns_loopback_ports(lists[i].list, ports, 4);

		ty_test_context("list '%s'", lists[i].list);
		CHECK_INT_EQ(n, lists[i].n);
		if (n > 0) {
			CHECK_INT_EQ(ports[0], lists[i].first);
			CHECK_INT_EQ(ports[n - 1], lists[i].last);
		}
	}
	ty_test_context(NULL);
	CHECK_INT_EQ(netns_loopback_ports("127.0.0.1:1,127.0.0.1:2,127.0.0.1:3", ports, 2), -1);
	CHECK(netns_preflight(0, "/usr/sbin/ip") == NULL);
	CHECK(strstr(netns_preflight(1000, "/usr/sbin/ip"), "must run as root") != NULL);
	CHECK(strstr(netns_preflight(0, NULL), "need iproute2's 'ip'") != NULL);
}

/* Each executor's network namespace is its own and the one named for it. */
TY_TEST(each_executor_runs_in_its_own_namespace)
{
	struct e2e *e = stack();
	struct stat self, ns[2], ex[2];
	struct ty_resp r = {0};

	REQUIRE(stat("/proc/self/ns/net", &self) == 0);
	for (int i = 0; i < 2; i++) {
		ty_test_context("executor %d", i);
		REQUIRE(stat(ty_test_strf("/run/netns/%s", net->ns[i]), &ns[i]) == 0);
		REQUIRE(stat(ty_test_strf("/proc/%d/ns/net", ty_test_daemon_pid(e->exec[i])),
			     &ex[i]) == 0);
		CHECK_INT_EQ(ex[i].st_ino, ns[i].st_ino);
		CHECK(ex[i].st_ino != self.st_ino);
	}
	ty_test_context(NULL);
	CHECK(ex[0].st_ino != ex[1].st_ino);
	ty_http(&r, "GET", "/v1/nodes", ty_stack_get()->admin, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	for (int i = 0; i < 2; i++) {
		json_t *n;
		size_t k;

		json_array_foreach(json_object_get(r.json, "items"), k, n)
		{
			if (!strcmp(ty_jstr(n, "id"), e->node[i]))
				CHECK_JSTR(n, "address", net->addr[i]);
		}
	}
	ty_resp_free(&r);
	/* what is ours exists now, under the names the plan gave out */
	{
		const char *have = ty_test_strf(" %s ", netns_leftovers((long)getpid()));
		const char *want[] = {net->bridge, net->veth[0], net->veth[1], net->ns[0],
				      net->ns[1]};
		size_t len = 1;

		for (size_t i = 0; i < 5; i++) {
			CHECK(strstr(have, ty_test_strf(" %s ", want[i])) != NULL);
			len += strlen(want[i]) + 1;
		}
		CHECK_INT_EQ(strlen(have), len);
	}
}

/*
 * Workloads that must rendezvous across the two namespaces and succeed: a
 * standard-library probe, torch.distributed over gloo, the reference
 * all-reduce worker and the DDP example of worker/. A row's check adds
 * evidence; NULL = the job succeeding with MASTER_ADDR on rank 0's node
 * and every rank exiting 0 is the verdict.
 */
struct workload {
	const char *name;
	const char *(*command)(void);
	const char *extra; /* spec fields after command */
	/* more evidence once it succeeded (NULL: none) */
	void (*check)(struct e2e *e, long long id, const char *master, const char *other);
};

static const char *probe_master(void)
{
	return argv_json((const char *[]){PYTHON, probe_path(), "master", NULL});
}

static void probe_check(struct e2e *e, long long id, const char *master, const char *other)
{
	/* rank 1 shares rank 0's node; ranks 2 and 3 come over the bridge */
	const char *got = e2e_read(e, ty_test_strf("rendezvous-%lld-1", id));
	const char *lines[3] = {ty_test_strf("1 %s\n", master), ty_test_strf("2 %s\n", other),
				ty_test_strf("3 %s\n", other)};

	REQUIRE(got != NULL);
	for (int i = 0; i < 3; i++)
		CHECK(strstr(got, lines[i]) != NULL);
	CHECK_INT_EQ(strlen(got), strlen(lines[0]) + strlen(lines[1]) + strlen(lines[2]));
	/* the API fetched this from the executor inside the other namespace */
	CHECK(strstr(rank_log(e, id, 2), ty_test_strf("rank 2 joined %s:", master)) != NULL);
	CHECK(strstr(rank_log(e, id, 2), ty_test_strf("from %s: ok", other)) != NULL);
}

/*
 * torch.distributed over gloo: every rank adds rank + 1 with all_reduce and
 * checks the sum. Gloo picks its address from GLOO_SOCKET_IFNAME, which the
 * executor sets to the interface of the node's address (eth0 here);
 * without it gloo would take the hostname's address, 127.0.0.1 from
 * /etc/hosts, private to each namespace, and the cross-node pairs would fail
 * with "connect [127.0.0.1]:PORT: Connection refused".
 */
static const char gloo_py[] =
    "import datetime, os, sys, torch, torch.distributed as dist\n"
    "print('ifnames %s %s' % (os.environ.get('NCCL_SOCKET_IFNAME'), "
    "os.environ.get('GLOO_SOCKET_IFNAME')), flush=True)\n"
    "dist.init_process_group('gloo', timeout=datetime.timedelta(seconds=60))\n"
    "rank, world = dist.get_rank(), dist.get_world_size()\n"
    "t = torch.tensor([float(rank + 1)])\n"
    "dist.all_reduce(t)\n"
    "want = world * (world + 1) / 2\n"
    "print('rank %d of %d: all_reduce sum %g (want %g)' % (rank, world, t.item(), want), "
    "flush=True)\n"
    "sys.exit(0 if t.item() == want else 5)\n";

static const char *gloo_command(void)
{
	return argv_json((const char *[]){PYTHON, script("gloo_allreduce.py", gloo_py), NULL});
}

static void gloo_check(struct e2e *e, long long id, const char *master, const char *other)
{
	(void)master;
	(void)other;
	for (int rank = 0; rank < 4; rank++) {
		const char *log = rank_log(e, id, rank);

		ty_test_context("gloo_allreduce rank %d", rank);
		/* the fabric environment the executor derived from the node's address */
		CHECK(strstr(log, "ifnames =" NETNS_IFNAME " " NETNS_IFNAME "\n") != NULL);
		CHECK(strstr(log, ty_test_strf("rank %d of 4: all_reduce sum 10 (want 10)",
					       rank)) != NULL);
	}
}

/* trainyard-allreduce over its TCP ring: each rank checks every element itself */
static const char *allreduce_command(void)
{
	return argv_json((const char *[]){e2e_bin_path("trainyard-allreduce"), "--bytes", "4M",
					  "--timeout", "60", NULL});
}

static void allreduce_check(struct e2e *e, long long id, const char *master, const char *other)
{
	(void)master;
	(void)other;
	for (int rank = 0; rank < 4; rank++) {
		const char *log = rank_log(e, id, rank);

		ty_test_context("allreduce rank %d", rank);
		CHECK(strstr(log, ty_test_strf("{\"rank\":%d,\"world_size\":4,", rank)) != NULL);
		CHECK(strstr(log, "\"backend\":\"tcp\"") != NULL);
		CHECK(strstr(log, "\"ok\":true}") != NULL);
	}
}

/* the DDP example (gloo on CPU) trained to its target loss across the namespaces */
static const char *ddp_command(void)
{
	return argv_json((const char *[]){PYTHON, e2e_source_path("worker/examples/ddp_train.py"),
					  "--steps", "150", "--target-loss", "0.01", NULL});
}

static void ddp_check(struct e2e *e, long long id, const char *master, const char *other)
{
	const char *log = rank_log(e, id, 0);

	(void)master;
	(void)other;
	CHECK(strstr(log, "\"event\": \"done\", \"rank\": 0, \"world_size\": 4, "
			  "\"backend\": \"gloo\"") != NULL);
	CHECK(strstr(log, "\"ok\": true}") != NULL);
}

static const struct workload workloads[] = {
    {"tcp_probe", probe_master, "\"max_runtime_seconds\":120", probe_check},
    {"gloo_allreduce", gloo_command, "\"max_runtime_seconds\":300", gloo_check},
    {"allreduce_tcp", allreduce_command, "\"max_runtime_seconds\":300", allreduce_check},
    {"ddp_train", ddp_command, "\"max_runtime_seconds\":300", ddp_check},
};

TY_TEST(a_two_node_job_rendezvouses_across_namespaces)
{
	struct e2e *e = stack();

	for (size_t w = 0; w < sizeof(workloads) / sizeof(workloads[0]); w++) {
		const struct workload *wl = &workloads[w];
		long long id;
		json_t *job, *att, *a0;
		const char *master, *rank0_node, *other;

		ty_test_context("%s", wl->name);
		id = e2e_submit(e, wl->command(),
				ty_test_strf("\"resources\":{\"nodes\":2,\"gpus_per_node\":2},"
					     "\"retry\":{\"system\":0,\"user\":0},%s",
					     wl->extra));
		job = e2e_wait_state(e, id, "succeeded,failed,cancelled", 180000);
		att = e2e_attempts(e, id);
		a0 = json_array_get(att, 0);
		master = ty_jstr(a0, "master_addr");
		rank0_node = ty_jstr(a0, "ranks[0].node");
		CHECK_STR_EQ(ty_jstr(job, "state"), "succeeded");
		CHECK_INT_EQ(json_array_size(att), 1);
		CHECK_INT_EQ(ty_jint(a0, "world_size"), 4);
		/* MASTER_ADDR is the namespace address of rank 0's node */
		REQUIRE(rank0_node != NULL);
		CHECK_STR_EQ(master, address_of(e, rank0_node));
		other = !strcmp(rank0_node, e->node[0]) ? e->address[1] : e->address[0];
		for (int rank = 0; rank < 4; rank++) {
			CHECK_INT_EQ(ty_jint(a0, ty_test_strf("ranks[%d].exit_code", rank)), 0);
			/* ranks 0, 1 on rank 0's node; 2, 3 on the other */
			CHECK_STR_EQ(
			    ty_jstr(a0, ty_test_strf("ranks[%d].node", rank)),
			    rank < 2 ? rank0_node
				     : (!strcmp(rank0_node, e->node[0]) ? e->node[1] : e->node[0]));
		}
		if (wl->check && master)
			wl->check(e, id, master, other);
		json_decref(job);
		json_decref(att);
	}
}

/*
 * Rendezvous that cannot happen: the job fails (it does not hang until its
 * max runtime): the ranks that find nobody exit 3, a user failure, and the
 * whole gang is stopped.
 */
TY_TEST(a_rendezvous_that_cannot_happen_fails_the_job)
{
	static const struct {
		const char *mode;
		const char *heard;   /* what rank 0 wrote (%s: rank 0's address) or NULL */
		const char *dialled; /* failing ranks' log: where they dialled */
		int first_failing;   /* the lowest rank that gives up */
	} cases[] = {
	    /* rank 0 never listens: nobody connects */
	    {"silent", NULL, "MASTER", 1},
	    /* 127.0.0.1 is each node's own: rank 1 (same node as rank 0) gets
	     * through, ranks 2 and 3 in the other namespace find nobody */
	    {"loopback", "1 127.0.0.1\n", "127.0.0.1", 2},
	};
	struct e2e *e = stack();

	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		const char *cmd =
		    argv_json((const char *[]){PYTHON, probe_path(), cases[c].mode, "5", NULL});
		long long id;
		json_t *job, *att, *a0;
		const char *master, *heard, *dialled;
		int failed_rank = -1;

		ty_test_context("%s", cases[c].mode);
		id = e2e_submit(e, cmd,
				"\"resources\":{\"nodes\":2,\"gpus_per_node\":2},"
				"\"retry\":{\"system\":0,\"user\":0},\"max_runtime_seconds\":120");
		job = e2e_wait_state(e, id, "succeeded,failed,cancelled", 180000);
		att = e2e_attempts(e, id);
		a0 = json_array_get(att, 0);
		master = ty_jstr(a0, "master_addr");
		CHECK_STR_EQ(ty_jstr(job, "state"), "failed");
		/* the ranks gave up: not the runtime limit, not the system */
		CHECK_STR_EQ(ty_jstr(job, "failure_class"), "user");
		CHECK_INT_EQ(json_array_size(att), 1);
		CHECK_INT_EQ(ty_jint(a0, "exit_code"), 3);
		/* rank 0 waits on; whichever of the others gave up first ended the gang */
		for (int rank = 3; rank >= cases[c].first_failing; rank--)
			if (ty_jint(a0, ty_test_strf("ranks[%d].exit_code", rank)) == 3)
				failed_rank = rank;
		REQUIRE(failed_rank >= cases[c].first_failing);
		CHECK(ty_jint(a0, "ranks[0].exit_code") != 0 || ty_jint(a0, "ranks[0].signal") > 0);
		heard = e2e_read(e, ty_test_strf("rendezvous-%lld-1", id));
		if (cases[c].heard)
			CHECK(heard == NULL || !strcmp(heard, cases[c].heard));
		else
			CHECK(heard == NULL);
		dialled = strcmp(cases[c].dialled, "MASTER") ? cases[c].dialled : master;
		REQUIRE(dialled != NULL);
		CHECK(strstr(rank_log(e, id, failed_rank),
			     ty_test_strf("rank %d: no rendezvous at %s:", failed_rank, dialled)) !=
		      NULL);
		json_decref(job);
		json_decref(att);
	}
}

/* A program killed outright leaves its set-up behind: the next one removes it. */
TY_TEST(leftovers_of_a_dead_program_are_removed)
{
	const char *ip = (stack(), netns_exec_prefix(0)[0]);
	pid_t dead = fork(), sleeper;
	int status;

	if (dead == 0)
		_exit(0);
	REQUIRE(dead > 0);
	REQUIRE(waitpid(dead, &status, 0) == dead);
	REQUIRE_INT_EQ(
	    system(ty_test_strf("%s link add tyb%d type bridge && "
				"%s netns add ty%dn0 && "
				"%s link add tyv%dh0 type veth peer name eth0 netns ty%dn0 && "
				"%s link set tyv%dh0 master tyb%d",
				ip, (int)dead, ip, (int)dead, ip, (int)dead, (int)dead, ip,
				(int)dead, (int)dead)),
	    0);
	/* a process left running in the namespace (an orphaned rank) */
	sleeper = fork();
	if (sleeper == 0) {
		execl(ip, ip, "netns", "exec", ty_test_strf("ty%dn0", (int)dead), "/bin/sleep",
		      "300", (char *)NULL);
		_exit(127);
	}
	REQUIRE(sleeper > 0);
	for (int i = 0; i < 100 && !*netns_leftovers(dead); i++)
		usleep(10 * 1000);
	CHECK_STR_EQ(netns_leftovers(dead),
		     ty_test_strf("tyb%d tyv%dh0 ty%dn0", (int)dead, (int)dead, (int)dead));
	/* wait until ip has entered the namespace and become sleep */
	for (int i = 0; i < 1000; i++) {
		char exe[256] = "";
		ssize_t n =
		    readlink(ty_test_strf("/proc/%d/exe", (int)sleeper), exe, sizeof(exe) - 1);

		if (n > 0 && (exe[n] = '\0', strstr(exe, "sleep")))
			break;
		REQUIRE(waitpid(sleeper, &status, WNOHANG) == 0);
		usleep(10 * 1000);
	}
	netns_sweep_dead();
	CHECK_STR_EQ(netns_leftovers(dead), "");
	REQUIRE(waitpid(sleeper, &status, 0) == sleeper);
	CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	/* ours are alive and stay */
	CHECK(strstr(netns_leftovers((long)getpid()), net->bridge) != NULL);
}
