/*
 * executor/nccl.c: the NCCL environment over fabric descriptions, and the
 * interface carrying an address on this machine's real interfaces.
 */
#include "hw.h"
#include "ty_test.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define IB(dev, port, state)                                                                       \
	"{'name':'" dev "','ports':[{'port':" #port ",'state':'" state                             \
	"','link_layer':'InfiniBand','rate_gbps':200,'gid_index':null}]}"
#define ROCE(dev, port, state, gid)                                                                \
	"{'name':'" dev "','ports':[{'port':" #port ",'state':'" state                             \
	"','link_layer':'Ethernet','rate_gbps':100,'gid_index':" #gid "}]}"
#define TAIL "NCCL_DEBUG=WARN;TORCH_NCCL_ASYNC_ERROR_HANDLING=1;"

TY_TEST(nccl_env_from_fabric)
{
	static const struct {
		const char *name;
		const char *hcas; /* inventory.hcas, ' for " */
		const char *iface;
		const char *want; /* "NAME=value;" each, in order */
	} rows[] = {
	    {"no HCA", "[]", "eth0", "NCCL_IB_DISABLE=1;NCCL_SOCKET_IFNAME==eth0;GLOO_SOCKET_IFNAME=eth0;" TAIL},
	    {"IB only", "[" IB("mlx5_0", 1, "ACTIVE") "," IB("mlx5_1", 1, "ACTIVE") "]", "ib0",
	     "NCCL_IB_HCA==mlx5_0:1,mlx5_1:1;NCCL_SOCKET_IFNAME==ib0;GLOO_SOCKET_IFNAME=ib0;" TAIL},
	    {"RoCE only, one GID index",
	     "[" ROCE("mlx5_0", 1, "ACTIVE", 3) "," ROCE("mlx5_1", 1, "ACTIVE", 3) "]", "eth0",
	     "NCCL_IB_HCA==mlx5_0:1,mlx5_1:1;NCCL_IB_GID_INDEX=3;NCCL_SOCKET_IFNAME==eth0;GLOO_SOCKET_IFNAME=eth0;" TAIL},
	    {"RoCE ports disagree on the GID index: NCCL picks per port",
	     "[" ROCE("mlx5_0", 1, "ACTIVE", 3) "," ROCE("mlx5_1", 1, "ACTIVE", 1) "]", "eth0",
	     "NCCL_IB_HCA==mlx5_0:1,mlx5_1:1;NCCL_SOCKET_IFNAME==eth0;GLOO_SOCKET_IFNAME=eth0;" TAIL},
	    {"IB and RoCE mixed: no GID index for the IB port",
	     "[" IB("mlx5_0", 1, "ACTIVE") "," ROCE("mlx5_1", 1, "ACTIVE", 3) "]", "eth0",
	     "NCCL_IB_HCA==mlx5_0:1,mlx5_1:1;NCCL_SOCKET_IFNAME==eth0;GLOO_SOCKET_IFNAME=eth0;" TAIL},
	    {"all ports down", "[" IB("mlx5_0", 1, "DOWN") "," ROCE("mlx5_1", 1, "DOWN", 3) "]",
	     "eth0", "NCCL_IB_DISABLE=1;NCCL_SOCKET_IFNAME==eth0;GLOO_SOCKET_IFNAME=eth0;" TAIL},
	    {"two HCAs, one down", "[" IB("mlx5_0", 1, "DOWN") "," IB("mlx5_1", 1, "ACTIVE") "]",
	     "eth0", "NCCL_IB_HCA==mlx5_1:1;NCCL_SOCKET_IFNAME==eth0;GLOO_SOCKET_IFNAME=eth0;" TAIL},
	    {"not yet ACTIVE (INIT, ARMED) is not usable",
	     "[" IB("mlx5_0", 1, "INIT") "," IB("mlx5_1", 1, "ARMED") "]", "eth0",
	     "NCCL_IB_DISABLE=1;NCCL_SOCKET_IFNAME==eth0;GLOO_SOCKET_IFNAME=eth0;" TAIL},
	    {"RoCE without an IPv4 GID", "[" ROCE("mlx5_0", 1, "ACTIVE", null) "]", "eth0",
	     "NCCL_IB_DISABLE=1;NCCL_SOCKET_IFNAME==eth0;GLOO_SOCKET_IFNAME=eth0;" TAIL},
	    {"RoCE without an IPv4 GID beside IB",
	     "[" ROCE("mlx5_0", 1, "ACTIVE", null) "," IB("mlx5_1", 1, "ACTIVE") "]", "eth0",
	     "NCCL_IB_HCA==mlx5_1:1;NCCL_SOCKET_IFNAME==eth0;GLOO_SOCKET_IFNAME=eth0;" TAIL},
	    {"dual-port HCA, only port 2 up",
	     "[{'name':'mlx5_0','ports':[{'port':1,'state':'DOWN','link_layer':'InfiniBand'},"
	     "{'port':2,'state':'ACTIVE','link_layer':'InfiniBand'}]}]",
	     "eth0", "NCCL_IB_HCA==mlx5_0:2;NCCL_SOCKET_IFNAME==eth0;GLOO_SOCKET_IFNAME=eth0;" TAIL},
	    {"names that are prefixes of others stay exact",
	     "[" IB("mlx5_1", 1, "ACTIVE") "," IB("mlx5_10", 1, "DOWN") "]", "eth0",
	     "NCCL_IB_HCA==mlx5_1:1;NCCL_SOCKET_IFNAME==eth0;GLOO_SOCKET_IFNAME=eth0;" TAIL},
	    {"an HCA without ports", "[{'name':'mlx5_0','ports':[]}]", "eth0",
	     "NCCL_IB_DISABLE=1;NCCL_SOCKET_IFNAME==eth0;GLOO_SOCKET_IFNAME=eth0;" TAIL},
	    {"no interface known", "[" IB("mlx5_0", 1, "ACTIVE") "]", NULL,
	     "NCCL_IB_HCA==mlx5_0:1;" TAIL},
	    {"empty interface name", "[]", "", "NCCL_IB_DISABLE=1;" TAIL},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct hw_inventory inv = {0};
		struct ty_err err = {0};
		char **env = NULL, got[1024] = "";
		json_t *j;

		ty_test_context("%s", rows[i].name);
		j = json_loads(ty_test_jf("{'gpus':[],'hcas':%s}", rows[i].hcas), 0, NULL);
		REQUIRE(j != NULL);
		REQUIRE_INT_EQ(hw_inventory_from_json(&inv, j, &err), 0);
		REQUIRE_INT_EQ(hw_nccl_env(&env, &inv, rows[i].iface, &err), 0);
		for (char **e = env; *e; e++) {
			strncat(got, *e, sizeof(got) - strlen(got) - 1);
			strncat(got, ";", sizeof(got) - strlen(got) - 1);
		}
		CHECK_STR_EQ(got, rows[i].want);
		hw_names_free(env);
		hw_inventory_clear(&inv);
		json_decref(j);
	}
}

TY_TEST(port_usable)
{
	static const struct {
		struct hw_port p;
		bool want;
	} rows[] = {
	    {{1, "ACTIVE", "InfiniBand", 200, -1}, true}, {{1, "ACTIVE", "Ethernet", 100, 0}, true},
	    {{1, "ACTIVE", "Ethernet", 100, -1}, false},  {{1, "DOWN", "InfiniBand", 0, -1}, false},
	    {{1, "active", "InfiniBand", 0, -1}, false},  {{1, "ACTIVE", "Unknown", 0, 3}, false},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		ty_test_context("row %zu", i);
		CHECK(hw_port_usable(&rows[i].p) == rows[i].want);
	}
}

TY_TEST(iface_of_loopback)
{
	struct ty_err err = {0};
	char name[IF_NAMESIZE];

	CHECK_INT_EQ(hw_iface_of(name, sizeof(name), "127.0.0.1", &err), 0);
	CHECK_STR_EQ(name, "lo");
}

/* every IPv4 address of this machine maps to the first interface listing it */
TY_TEST(iface_of_every_local_address)
{
	struct ifaddrs *ifs = NULL;
	int seen = 0;

	REQUIRE_INT_EQ(getifaddrs(&ifs), 0);
	for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
		const struct sockaddr_in *sin = (const struct sockaddr_in *)(void *)i->ifa_addr;
		struct ty_err err = {0};
		char addr[INET_ADDRSTRLEN], name[IF_NAMESIZE];
		const char *first = NULL;

		if (!sin || sin->sin_family != AF_INET)
			continue;
		inet_ntop(AF_INET, &sin->sin_addr, addr, sizeof(addr));
		for (struct ifaddrs *k = ifs; k && !first; k = k->ifa_next) {
			const struct sockaddr_in *s2 =
			    (const struct sockaddr_in *)(void *)k->ifa_addr;

			if (s2 && s2->sin_family == AF_INET &&
			    s2->sin_addr.s_addr == sin->sin_addr.s_addr)
				first = k->ifa_name;
		}
		ty_test_context("%s on %s", addr, i->ifa_name);
		CHECK_INT_EQ(hw_iface_of(name, sizeof(name), addr, &err), 0);
		CHECK_STR_EQ(name, first);
		seen++;
	}
	freeifaddrs(ifs);
	CHECK(seen >= 1); /* loopback at least */
}

TY_TEST(iface_of_failures)
{
	static const struct {
		const char *addr;
		size_t namesz;
		int rc;
		const char *msg;
	} rows[] = {
	    {"198.51.100.77", IF_NAMESIZE, TY_ENOTFOUND, "no interface carries 198.51.100.77"},
	    {"1.2.3", IF_NAMESIZE, TY_EINVAL, "'1.2.3' is not an IPv4 address"},
	    {"::1", IF_NAMESIZE, TY_EINVAL, "'::1' is not an IPv4 address"},
	    {"", IF_NAMESIZE, TY_EINVAL, "'' is not an IPv4 address"},
	    {"localhost", IF_NAMESIZE, TY_EINVAL, "'localhost' is not an IPv4 address"},
	    {NULL, IF_NAMESIZE, TY_EINVAL, "'(null)' is not an IPv4 address"},
	    {"127.0.0.1", 2, TY_EINVAL, "interface name 'lo' is too long"},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct ty_err err = {0};
		char name[IF_NAMESIZE] = "x";

		ty_test_context("%s", rows[i].addr ? rows[i].addr : "(null)");
		CHECK_INT_EQ(hw_iface_of(name, rows[i].namesz, rows[i].addr, &err), rows[i].rc);
		CHECK_STR_EQ(err.msg, rows[i].msg);
		CHECK_STR_EQ(name, "");
	}
}
