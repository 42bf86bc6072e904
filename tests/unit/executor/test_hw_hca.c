/*
 * executor/inventory.c: the HCA probe over fake sysfs trees and a fake
 * device list, the RoCE GID choice, and the real libibverbs of this
 * machine (no RDMA device).
 */
#include "exec.h"
#include "hw.h"
#include "ty_json.h"
#include "ty_test.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct file {
	const char *path; /* under <root>/class/infiniband/ */
	const char *text; /* NULL: a directory */
};

static char *make_tree(const struct file *files)
{
	char *root = ty_test_strf("/tmp/ty-hw-sysfs-XXXXXX");
	struct ty_err err = {0};

	if (!mkdtemp(root))
		FAIL("mkdtemp: %s", strerror(errno));
	for (const struct file *f = files; f && f->path; f++) {
		char *path = ty_test_strf("%s/class/infiniband/%s", root, f->path), *slash;
		FILE *fp;

		if (!f->text) {
			REQUIRE_INT_EQ(exec_mkdirs(path, &err), 0);
			continue;
		}
		slash = strrchr(path, '/');
		*slash = '\0';
		REQUIRE_INT_EQ(exec_mkdirs(path, &err), 0);
		*slash = '/';
		REQUIRE((fp = fopen(path, "w")) != NULL);
		fputs(f->text, fp);
		fclose(fp);
	}
	return root;
}

static void remove_tree(const char *root)
{
	char *cmd = ty_test_strf("rm -rf '%s'", root);

	CHECK_INT_EQ(system(cmd), 0);
}

/* ctx: a NULL-terminated array of names, or NULL to fail like a missing library */
static char **fake_list(void *ctx, struct ty_err *err)
{
	const char *const *names = ctx;
	size_t n = 0;
	char **out;

	if (!names) {
		ty_err_set(err, TY_EUNAVAIL, "no libibverbs: fake");
		return NULL;
	}
	while (names[n])
		n++;
	REQUIRE((out = calloc(n + 1, sizeof(char *))) != NULL);
	for (size_t i = 0; i < n; i++)
		REQUIRE((out[i] = strdup(names[i])) != NULL);
	return out;
}

#define IB_PORT(dev, p, state, rate)                                                               \
	{dev "/ports/" p "/state", state "\n"}, {dev "/ports/" p "/link_layer", "InfiniBand\n"},   \
	{                                                                                          \
		dev "/ports/" p "/rate", rate "\n"                                                 \
	}
#define ETH_PORT(dev, p, state, rate)                                                              \
	{dev "/ports/" p "/state", state "\n"}, {dev "/ports/" p "/link_layer", "Ethernet\n"},     \
	{                                                                                          \
		dev "/ports/" p "/rate", rate "\n"                                                 \
	}
#define GID(dev, p, i, gid, type)                                                                  \
	{dev "/ports/" p "/gids/" i, gid "\n"},                                                    \
	{                                                                                          \
		dev "/ports/" p "/gid_attrs/types/" i, type "\n"                                   \
	}
#define LINKLOCAL "fe80:0000:0000:0000:0ac0:ebff:fe3d:ca54"
#define V4(x) "0000:0000:0000:0000:0000:ffff:" x

TY_TEST(hcas_probe)
{
	static const struct {
		const char *name;
		const char *devices[4];
		struct file files[24];
		int rc;
		const char *hcas; /* canonical JSON of inventory.hcas, ' for " */
		const char *msg;
	} rows[] = {
	    {"one IB port",
	     {"mlx5_0"},
	     {IB_PORT("mlx5_0", "1", "4: ACTIVE", "200 Gb/sec (4X HDR)")},
	     0,
	     "[{'name':'mlx5_0','ports':[{'gid_index':null,'link_layer':'InfiniBand','port':1,"
	     "'rate_gbps':200,'state':'ACTIVE'}]}]",
	     NULL},
	    {"RoCE: the first IPv4 RoCE v2 GID",
	     {"mlx5_2"},
	     {ETH_PORT("mlx5_2", "1", "4: ACTIVE", "100 Gb/sec (4X EDR)"),
	      GID("mlx5_2", "1", "0", LINKLOCAL, "IB/RoCE v1"),
	      GID("mlx5_2", "1", "1", LINKLOCAL, "RoCE v2"),
	      GID("mlx5_2", "1", "2", V4("0a6e:0021"), "IB/RoCE v1"),
	      GID("mlx5_2", "1", "3", V4("0a6e:0021"), "RoCE v2"),
	      GID("mlx5_2", "1", "5", V4("0a6f:0021"), "RoCE v2")},
	     0,
	     "[{'name':'mlx5_2','ports':[{'gid_index':3,'link_layer':'Ethernet','port':1,"
	     "'rate_gbps':100,'state':'ACTIVE'}]}]",
	     NULL},
	    {"RoCE: an IPv4 v1 GID when there is no v2 one",
	     {"mlx5_2"},
	     {ETH_PORT("mlx5_2", "1", "4: ACTIVE", "25 Gb/sec (1X EDR)"),
	      GID("mlx5_2", "1", "0", LINKLOCAL, "IB/RoCE v1"),
	      GID("mlx5_2", "1", "1", V4("c0a8:0102"), "IB/RoCE v1")},
	     0,
	     "[{'name':'mlx5_2','ports':[{'gid_index':1,'link_layer':'Ethernet','port':1,"
	     "'rate_gbps':25,'state':'ACTIVE'}]}]",
	     NULL},
	    {"RoCE without an IPv4 GID",
	     {"mlx5_2"},
	     {ETH_PORT("mlx5_2", "1", "4: ACTIVE", "100 Gb/sec (4X EDR)"),
	      GID("mlx5_2", "1", "0", LINKLOCAL, "IB/RoCE v1"),
	      GID("mlx5_2", "1", "1", LINKLOCAL, "RoCE v2"),
	      /* unset entries read as zeros; ::ffff:0.0.0.0 is no address */
	      GID("mlx5_2", "1", "2", V4("0000:0000"), "RoCE v2"),
	      GID("mlx5_2", "1", "3", "0000:0000:0000:0000:0000:0000:0000:0000", "RoCE v2"),
	      /* an IPv4 GID whose type cannot be read is skipped */
	      {"mlx5_2/ports/1/gids/4", V4("0a00:0001") "\n"},
	      /* and one of another kind of type */
	      GID("mlx5_2", "1", "6", V4("0a00:0001"), "RoCE v3")},
	     0,
	     "[{'name':'mlx5_2','ports':[{'gid_index':null,'link_layer':'Ethernet','port':1,"
	     "'rate_gbps':100,'state':'ACTIVE'}]}]",
	     NULL},
	    {"down port, SDR rate",
	     {"mlx4_0"},
	     {IB_PORT("mlx4_0", "1", "1: DOWN", "2.5 Gb/sec (1X SDR)")},
	     0,
	     "[{'name':'mlx4_0','ports':[{'gid_index':null,'link_layer':'InfiniBand','port':1,"
	     "'rate_gbps':2.5,'state':'DOWN'}]}]",
	     NULL},
	    {"two ports in order, missing files",
	     {"mlx5_0"},
	     {IB_PORT("mlx5_0", "2", "2: INIT", "400 Gb/sec (4X NDR)"),
	      {"mlx5_0/ports/1/rate", "garbage\n"},
	      {"mlx5_0/ports/x", NULL}},
	     0,
	     "[{'name':'mlx5_0','ports':[{'gid_index':null,'link_layer':'InfiniBand','port':1,"
	     "'rate_gbps':0,'state':'UNKNOWN'},{'gid_index':null,'link_layer':'InfiniBand',"
	     "'port':2,'rate_gbps':400,'state':'INIT'}]}]",
	     NULL},
	    {"a device without ports, devices sorted, a bad name skipped",
	     {"mlx5_1", "../x", "mlx5_0"},
	     {IB_PORT("mlx5_0", "1", "4: ACTIVE", "200 Gb/sec (4X HDR)")},
	     0,
	     "[{'name':'mlx5_0','ports':[{'gid_index':null,'link_layer':'InfiniBand','port':1,"
	     "'rate_gbps':200,'state':'ACTIVE'}]},{'name':'mlx5_1','ports':[]}]",
	     NULL},
	    {"IB and RoCE devices",
	     {"mlx5_0", "mlx5_1"},
	     {IB_PORT("mlx5_0", "1", "4: ACTIVE", "200 Gb/sec (4X HDR)"),
	      ETH_PORT("mlx5_1", "1", "4: ACTIVE", "100 Gb/sec (4X EDR)"),
	      GID("mlx5_1", "1", "0", LINKLOCAL, "IB/RoCE v1"),
	      GID("mlx5_1", "1", "1", V4("0a00:0001"), "RoCE v2")},
	     0,
	     "[{'name':'mlx5_0','ports':[{'gid_index':null,'link_layer':'InfiniBand','port':1,"
	     "'rate_gbps':200,'state':'ACTIVE'}]},{'name':'mlx5_1','ports':[{'gid_index':1,"
	     "'link_layer':'Ethernet','port':1,'rate_gbps':100,'state':'ACTIVE'}]}]",
	     NULL},
	    {"no device", {NULL}, {{NULL, NULL}}, TY_ENOTFOUND, "[]", "no RDMA device"},
	    {"only bad names", {"..", ""}, {{NULL, NULL}}, TY_ENOTFOUND, "[]", "valid name"},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const struct hw_ib_ops ops = {fake_list, (void *)rows[i].devices};
		struct hw_inventory inv = {0};
		struct ty_err err = {0};
		char *root, *got;
		json_t *j;

		ty_test_context("%s", rows[i].name);
		root = make_tree(rows[i].files);
		CHECK_INT_EQ(hw_hcas_probe(&inv, &ops, root, &err), rows[i].rc);
		if (rows[i].msg && !strstr(err.msg, rows[i].msg))
			FAIL("message '%s' lacks '%s'", err.msg, rows[i].msg);
		REQUIRE((j = hw_inventory_json(&inv)) != NULL);
		got = ty_json_canonical(json_object_get(j, "hcas"));
		CHECK_STR_EQ(got, ty_test_jf("%s", rows[i].hcas));
		free(got);
		json_decref(j);
		hw_inventory_clear(&inv);
		remove_tree(root);
	}
}

TY_TEST(hcas_list_fails)
{
	const struct hw_ib_ops ops = {fake_list, NULL};
	struct hw_inventory inv = {0};
	struct ty_err err = {0};

	CHECK_INT_EQ(hw_hcas_probe(&inv, &ops, "/nonexistent", &err), TY_EUNAVAIL);
	CHECK_STR_EQ(err.msg, "no libibverbs: fake");
	CHECK_INT_EQ((long long)inv.nhcas, 0);
}

TY_TEST(roce_gid_index_without_table)
{
	CHECK_INT_EQ(hw_roce_gid_index("/nonexistent/port"), -1);
}

TY_TEST(verbs_real_library_without_device)
{
	struct ty_err err = {0};
	char **names = hw_ib_list_verbs(NULL, &err);

	/* libibverbs is installed here, no RDMA device is */
	REQUIRE(names != NULL);
	CHECK(names[0] == NULL);
	hw_names_free(names);
}

TY_TEST(verbs_missing_library)
{
	struct ty_err err = {0};

	CHECK(hw_ib_list_verbs((void *)"libibverbs-no-such.so.1", &err) == NULL);
	CHECK_INT_EQ(err.code, TY_EUNAVAIL);
	if (!strstr(err.msg, "no libibverbs: cannot load 'libibverbs-no-such.so.1'"))
		FAIL("message '%s'", err.msg);
	/* a library without the symbols: the CUDA runtime is not libibverbs */
	ty_err_clear(&err);
	CHECK(hw_ib_list_verbs((void *)getenv("TY_FAKE_CUDART"), &err) == NULL);
	CHECK_INT_EQ(err.code, TY_EUNAVAIL);
	if (!strstr(err.msg, "lacks ibv_get_device_list"))
		FAIL("message '%s'", err.msg);
}

/* The fabric watch's re-read: a port that goes down, changes its rate or goes away. */
TY_TEST(ports_refresh_sees_a_port_change)
{
	static const struct file files[] = {IB_PORT("mlx5_0", "1", "4: ACTIVE", "200 Gb/sec (4X HDR)"),
					    IB_PORT("mlx5_1", "1", "4: ACTIVE", "200 Gb/sec (4X HDR)"),
					    {NULL, NULL}};
	static const char *const names[] = {"mlx5_0", "mlx5_1", NULL};
	struct hw_ib_ops ops = {fake_list, (void *)names};
	struct hw_inventory inv = {0};
	struct ty_err err = {0};
	char *root = make_tree(files);
	FILE *f;

	REQUIRE_INT_EQ(hw_hcas_probe(&inv, &ops, root, &err), 0);
	REQUIRE_INT_EQ((long long)inv.nhcas, 2);
	CHECK(!hw_ports_refresh(inv.hcas, inv.nhcas, root)); /* nothing changed */
	CHECK_STR_EQ(inv.hcas[0].ports[0].state, "ACTIVE");

	/* mlx5_0 port 1 goes down */
	REQUIRE((f = fopen(ty_test_strf("%s/class/infiniband/mlx5_0/ports/1/state", root), "w")));
	fputs("1: DOWN\n", f);
	fclose(f);
	CHECK(hw_ports_refresh(inv.hcas, inv.nhcas, root));
	CHECK_STR_EQ(inv.hcas[0].ports[0].state, "DOWN");
	CHECK_STR_EQ(inv.hcas[1].ports[0].state, "ACTIVE");
	CHECK(!hw_ports_refresh(inv.hcas, inv.nhcas, root)); /* and stays so */

	/* mlx5_1 trains down to a lower rate */
	REQUIRE((f = fopen(ty_test_strf("%s/class/infiniband/mlx5_1/ports/1/rate", root), "w")));
	fputs("100 Gb/sec (4X EDR)\n", f);
	fclose(f);
	CHECK(hw_ports_refresh(inv.hcas, inv.nhcas, root));
	CHECK(inv.hcas[1].ports[0].rate_gbps == 100);

	/* its ports directory goes away (the device was unbound) */
	remove_tree(ty_test_strf("%s/class/infiniband/mlx5_1", root));
	CHECK(hw_ports_refresh(inv.hcas, inv.nhcas, root));
	CHECK_INT_EQ(inv.hcas[1].nports, 0);
	CHECK_STR_EQ(inv.hcas[1].name, "mlx5_1");
	hw_inventory_clear(&inv);
	remove_tree(root);
}
