/*
 * executor/inventory.c: the inventory as JSON (register message and
 * --inventory-file), simulated inventories.
 */
#include "hw.h"
#include "ty_json.h"
#include "ty_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GPU0                                                                                       \
	"{'index':0,'memory_mb':81559,'mig_devices':[],'mig_mode':null,"                           \
	"'name':'NVIDIA H100 80GB HBM3','numa_node':null,'pci_bus_id':'0000:18:00.0',"             \
	"'uuid':'GPU-00010203-0405-0607-0809-0a0b0c0d0e0f'}"
#define GPU1_MIG                                                                                   \
	"{'index':1,'memory_mb':81559,'mig_devices':['MIG-01234567-89ab-cdef-0123-456789abcdef',"  \
	"'MIG-GPU-10111213-1415-1617-1819-1a1b1c1d1e1f/1/0'],'mig_mode':'enabled',"                \
	"'name':'NVIDIA H100 80GB HBM3','numa_node':1,'pci_bus_id':'0000:3b:00.0',"                \
	"'uuid':'GPU-10111213-1415-1617-1819-1a1b1c1d1e1f'}"
/* what a simulated inventory carries at node level */
#define NODE_SIM                                                                                   \
	"'cuda_version':null,'driver_version':null,'gpu_fault':null,'gpu_source':'simulated'"
#define PORT_IB                                                                                    \
	"{'gid_index':null,'link_layer':'InfiniBand','port':1,'rate_gbps':400,'state':'ACTIVE'}"
#define PORT_ROCE "{'gid_index':3,'link_layer':'Ethernet','port':2,'rate_gbps':2.5,'state':'DOWN'}"

TY_TEST(inventory_json_round_trip)
{
	static const char *const docs[] = {
	    "{" NODE_SIM ",'gpus':[],'hcas':[]}",
	    "{" NODE_SIM ",'gpus':[" GPU0 "],'hcas':[{'name':'mlx5_0','ports':[" PORT_IB
	    "," PORT_ROCE "]}]}",
	    "{" NODE_SIM ",'gpus':[" GPU0
	    "],'hcas':[{'name':'mlx5_0','ports':[]},{'name':'mlx5_1','ports':[" PORT_IB "]}]}",
	    "{'cuda_version':'12.8','driver_version':'570.86.15','gpu_fault':'GPU 2: "
	    "nvmlDeviceGetHandleByIndex_v2: GPU is lost (error 15)','gpu_source':'simulated',"
	    "'gpus':[" GPU0 "," GPU1_MIG "],'hcas':[]}",
	};

	for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
		const char *want = ty_test_jf("%s", docs[i]);
		struct hw_inventory inv = {0};
		struct ty_err err = {0};
		json_t *in = json_loads(want, 0, NULL), *out;
		char *got;

		ty_test_context("%s", docs[i]);
		REQUIRE(in != NULL);
		REQUIRE_INT_EQ(hw_inventory_from_json(&inv, in, &err), 0);
		CHECK(inv.simulated);
		REQUIRE((out = hw_inventory_json(&inv)) != NULL);
		got = ty_json_canonical(out);
		CHECK_STR_EQ(got, want);
		free(got);
		json_decref(out);
		json_decref(in);
		hw_inventory_clear(&inv);
	}
}

TY_TEST(inventory_json_optional_fields)
{
	struct hw_inventory inv = {0};
	struct ty_err err = {0};
	json_t *in = json_loads(ty_test_jf("{'gpus':[{'index':3,'name':'A100','memory_mb':40960}],"
					   "'hcas':[{'name':'mlx5_0','ports':[{'port':1,'state':"
					   "'ACTIVE','link_layer':'Ethernet'}]}]}"),
				0, NULL);

	REQUIRE_INT_EQ(hw_inventory_from_json(&inv, in, &err), 0);
	CHECK_INT_EQ(inv.gpus[0].index, 3);
	CHECK_STR_EQ(inv.gpus[0].uuid, "");
	CHECK_STR_EQ(inv.gpus[0].pci_bus_id, "");
	CHECK(inv.hcas[0].ports[0].rate_gbps == 0);
	CHECK_INT_EQ(inv.hcas[0].ports[0].gid_index, -1);
	CHECK_INT_EQ(inv.gpus[0].numa_node, -1);
	CHECK_INT_EQ(inv.gpus[0].mig_mode, HW_MIG_UNKNOWN);
	CHECK_INT_EQ(inv.gpus[0].nmig, 0);
	CHECK_STR_EQ(inv.driver_version, "");
	CHECK_STR_EQ(inv.cuda_version, "");
	CHECK_STR_EQ(inv.gpu_fault, "");
	/* a file's inventory is simulated, whatever gpu_source it says */
	CHECK_STR_EQ(inv.gpu_source, "simulated");
	hw_inventory_clear(&inv);
	json_decref(in);
}

TY_TEST(inventory_json_errors)
{
	static const struct {
		const char *json;
		const char *msg;
	} rows[] = {
	    {"[]", "inventory must be an object"},
	    {"{'gpus':[]}", "'hcas' must be an array"},
	    {"{'hcas':[]}", "'gpus' must be an array"},
	    {"{'gpus':[],'hcas':[],'x':1}", "unknown key 'x'"},
	    {"{'gpus':[1],'hcas':[]}", "gpus[0] must be an object"},
	    {"{'gpus':[{'index':0,'name':'a','memory_mb':1,'extra':1}],'hcas':[]}",
	     "gpus[0]: unknown key 'extra'"},
	    {"{'gpus':[{'index':-1,'name':'a','memory_mb':1}],'hcas':[]}",
	     "gpus[0]: 'index' must be an integer in 0..1023"},
	    {"{'gpus':[{'index':0,'name':'a','memory_mb':'1'}],'hcas':[]}",
	     "gpus[0]: 'memory_mb' must be an integer"},
	    {"{'gpus':[{'index':0,'name':'','memory_mb':1}],'hcas':[]}",
	     "gpus[0]: 'name' must be 1-255 characters"},
	    {"{'gpus':[{'index':0,'memory_mb':1}],'hcas':[]}", "gpus[0]: 'name' must be a string"},
	    {"{'gpus':[{'index':0,'name':'a','memory_mb':1,'uuid':7}],'hcas':[]}",
	     "gpus[0]: 'uuid' must be a string"},
	    {"{'gpus':[{'index':0,'name':'a','memory_mb':1,'numa_node':-1}],'hcas':[]}",
	     "gpus[0]: 'numa_node' must be an integer in 0..65535"},
	    {"{'gpus':[{'index':0,'name':'a','memory_mb':1,'mig_mode':true}],'hcas':[]}",
	     "gpus[0]: 'mig_mode' must be \"enabled\", \"disabled\" or null"},
	    {"{'gpus':[{'index':0,'name':'a','memory_mb':1,'mig_mode':'on'}],'hcas':[]}",
	     "'mig_mode' must be"},
	    {"{'gpus':[{'index':0,'name':'a','memory_mb':1,'mig_devices':'MIG-1'}],'hcas':[]}",
	     "gpus[0]: 'mig_devices' must be an array of at most 8"},
	    {"{'gpus':[{'index':0,'name':'a','memory_mb':1,'mig_devices':['']}],'hcas':[]}",
	     "gpus[0]: 'mig_devices[0]' must be 1-95 characters"},
	    {"{'gpus':[],'hcas':[],'driver_version':570}",
	     "inventory: 'driver_version' must be a string"},
	    {"{'gpus':[],'hcas':[],'gpu_source':1}", "inventory: 'gpu_source' must be a string"},
	    {"{'gpus':[{'index':1,'name':'a','memory_mb':1},{'index':1,'name':'b','memory_mb':1}],"
	     "'hcas':[]}",
	     "gpus[1]: index 1 is given twice"},
	    {"{'gpus':[],'hcas':[{'name':'mlx5_0'}]}", "hcas[0]: 'ports' must be an array"},
	    {"{'gpus':[],'hcas':[{'name':'a,b','ports':[]}]}", "may not hold ',', ':' or '/'"},
	    {"{'gpus':[],'hcas':[{'name':'a','ports':[]},{'name':'a','ports':[]}]}",
	     "hcas[1]: 'a' is given twice"},
	    {"{'gpus':[],'hcas':[{'name':'a','ports':[{'port':0,'state':'ACTIVE',"
	     "'link_layer':'InfiniBand'}]}]}",
	     "hcas[0].ports[0]: 'port' must be an integer in 1..255"},
	    {"{'gpus':[],'hcas':[{'name':'a','ports':[{'port':1,'state':'ACTIVE',"
	     "'link_layer':'Fibre'}]}]}",
	     "link_layer must be InfiniBand or Ethernet"},
	    {"{'gpus':[],'hcas':[{'name':'a','ports':[{'port':1,'state':'ACTIVE',"
	     "'link_layer':'Ethernet','rate_gbps':-1}]}]}",
	     "'rate_gbps' must be a number"},
	    {"{'gpus':[],'hcas':[{'name':'a','ports':[{'port':1,'state':'ACTIVE',"
	     "'link_layer':'Ethernet','gid_index':'3'}]}]}",
	     "'gid_index' must be an integer"},
	    {"{'gpus':[],'hcas':[{'name':'a','ports':[{'port':1,'state':'ACTIVE',"
	     "'link_layer':'Ethernet'},{'port':1,'state':'DOWN','link_layer':'Ethernet'}]}]}",
	     "hcas[0].ports[1]: port 1 is given twice"},
	    {"{'gpus':[],'hcas':[{'name':'a','ports':[{'port':1,'state':'ACTIVE',"
	     "'link_layer':'Ethernet','speed':1}]}]}",
	     "hcas[0].ports[0]: unknown key 'speed'"},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct hw_inventory inv = {0};
		struct ty_err err = {0};
		json_t *in = json_loads(ty_test_jf("%s", rows[i].json), 0, NULL);

		ty_test_context("%s", rows[i].json);
		REQUIRE(in != NULL);
		CHECK_INT_EQ(hw_inventory_from_json(&inv, in, &err), TY_EINVAL);
		if (!strstr(err.msg, rows[i].msg))
			FAIL("message '%s' lacks '%s'", err.msg, rows[i].msg);
		CHECK(inv.gpus == NULL && inv.hcas == NULL && !inv.ngpus && !inv.nhcas);
		json_decref(in);
	}
}

static char *write_tmp(const char *text)
{
	char *path = ty_test_strf("/tmp/ty-hw-inventory-XXXXXX");
	int fd = mkstemp(path);
	FILE *f;

	REQUIRE(fd >= 0);
	REQUIRE((f = fdopen(fd, "w")) != NULL);
	fputs(text, f);
	fclose(f);
	return path;
}

TY_TEST(inventory_file)
{
	struct hw_inventory inv = {0};
	struct ty_err err = {0};
	char *good = write_tmp(ty_test_jf("{'gpus':[" GPU0 "],'hcas':[]}"));
	char *bad = write_tmp("{\"gpus\": [\n");
	char *dup = write_tmp(ty_test_jf("{'gpus':[],'gpus':[],'hcas':[]}"));
	char *invalid = write_tmp(ty_test_jf("{'gpus':[],'hcas':{}}"));

	CHECK_INT_EQ(hw_inventory_load(&inv, good, &err), 0);
	CHECK_INT_EQ((long long)inv.ngpus, 1);
	CHECK_STR_EQ(inv.gpus[0].name, "NVIDIA H100 80GB HBM3");
	CHECK(inv.simulated);
	hw_inventory_clear(&inv);

	CHECK_INT_EQ(hw_inventory_load(&inv, "/nonexistent/inv.json", &err), TY_EIO);
	if (!strstr(err.msg, "cannot read inventory file '/nonexistent/inv.json'"))
		FAIL("message '%s'", err.msg);
	ty_err_clear(&err);
	CHECK_INT_EQ(hw_inventory_load(&inv, bad, &err), TY_EPARSE);
	if (!strstr(err.msg, ty_test_strf("inventory file '%s' line ", bad)))
		FAIL("message '%s'", err.msg);
	ty_err_clear(&err);
	CHECK_INT_EQ(hw_inventory_load(&inv, dup, &err), TY_EPARSE);
	ty_err_clear(&err);
	CHECK_INT_EQ(hw_inventory_load(&inv, invalid, &err), TY_EINVAL);
	CHECK_STR_EQ(err.msg,
		     ty_test_strf("inventory file '%s': inventory: 'hcas' must be an array of at "
				  "most 64",
				  invalid));
	CHECK(inv.ngpus == 0 && inv.nhcas == 0);
	unlink(good);
	unlink(bad);
	unlink(dup);
	unlink(invalid);
}

TY_TEST(inventory_fake)
{
	struct hw_inventory inv = {0};
	struct ty_err err = {0};
	json_t *j;
	char *got;

	REQUIRE_INT_EQ(hw_inventory_fake(&inv, 2, &err), 0);
	CHECK(inv.simulated);
	REQUIRE((j = hw_inventory_json(&inv)) != NULL);
	got = ty_json_canonical(j);
	CHECK_STR_EQ(
	    got, ty_test_jf("{" NODE_SIM ",'gpus':[{'index':0,'memory_mb':81920,'mig_devices':[],"
			    "'mig_mode':null,'name':'simulated GPU','numa_node':null,"
			    "'pci_bus_id':'0000:00:00.0','uuid':"
			    "'GPU-00000000-0000-0000-0000-000000000000'},{'index':1,"
			    "'memory_mb':81920,'mig_devices':[],'mig_mode':null,"
			    "'name':'simulated GPU','numa_node':null,'pci_bus_id':"
			    "'0000:01:00.0','uuid':'GPU-00000000-0000-0000-0000-000000000001'}],"
			    "'hcas':[]}"));
	free(got);
	json_decref(j);
	REQUIRE_INT_EQ(hw_inventory_fake(&inv, 0, &err), 0);
	CHECK(inv.simulated && inv.ngpus == 0);
	CHECK_INT_EQ(hw_inventory_fake(&inv, 1025, &err), TY_EINVAL);
	hw_inventory_clear(&inv);
}
