/*
 * The NCCL environment a node's fabric calls for (pure), and the interface
 * that carries the node's address (getifaddrs).
 */
#include "hw.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

bool hw_port_usable(const struct hw_port *p)
{
	if (strcmp(p->state, "ACTIVE"))
		return false;
	if (!strcmp(p->link_layer, "InfiniBand"))
		return true;
	/* RoCE without an IPv4 GID would leave NCCL on a link-local GID that does not route */
	return !strcmp(p->link_layer, "Ethernet") && p->gid_index >= 0;
}

/* A growing NULL-terminated array of "NAME=value". */
struct vars {
	char **v;
	size_t n;
};

static int add(struct vars *e, struct ty_err *err, const char *name, const char *value)
{
	char **p = realloc(e->v, (e->n + 2) * sizeof(char *));
	size_t len = strlen(name) + strlen(value) + 2;

	if (!p)
		return ty_err_set(err, TY_ENOMEM, NULL);
	e->v = p;
	if (!(e->v[e->n] = malloc(len)))
		return ty_err_set(err, TY_ENOMEM, NULL);
	snprintf(e->v[e->n], len, "%s=%s", name, value);
	e->v[++e->n] = NULL;
	return 0;
}

int hw_nccl_env(char ***out, const struct hw_inventory *inv, const char *iface, struct ty_err *err)
{
	struct vars e = {0};
	char *hca = NULL, num[16];
	size_t len = 2, o = 0;
	int nusable = 0, nroce = 0, gid = -1, rc = 0;
	bool gid_agrees = true;

	*out = NULL;
	for (size_t i = 0; i < inv->nhcas; i++)
		len += (strlen(inv->hcas[i].name) + 6) * (size_t)inv->hcas[i].nports;
	if (!(hca = malloc(len))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	/* "=" makes NCCL match names exactly: plain "mlx5_1" would also take mlx5_10 */
	hca[o++] = '=';
	hca[o] = '\0';
	for (size_t i = 0; i < inv->nhcas; i++)
		for (int k = 0; k < inv->hcas[i].nports; k++) {
			const struct hw_port *p = &inv->hcas[i].ports[k];

			if (!hw_port_usable(p))
				continue;
			o += (size_t)snprintf(hca + o, len - o, "%s%s:%d", nusable ? "," : "",
					      inv->hcas[i].name, p->port);
			nusable++;
			if (!strcmp(p->link_layer, "Ethernet")) {
				if (nroce++ && p->gid_index != gid)
					gid_agrees = false;
				gid = p->gid_index;
			}
		}
	if (nusable)
		rc = add(&e, err, "NCCL_IB_HCA", hca);
	else
		rc = add(&e, err, "NCCL_IB_DISABLE", "1");
	if (rc)
		goto out;
	/* one value for every port: only when all of them are RoCE and agree */
	if (nroce && nroce == nusable && gid_agrees) {
		snprintf(num, sizeof(num), "%d", gid);
		if ((rc = add(&e, err, "NCCL_IB_GID_INDEX", num)))
			goto out;
	}
	if (iface && *iface) {
		char v[IF_NAMESIZE + 2];

		snprintf(v, sizeof(v), "=%s", iface);
		/* PyTorch's gloo backend (CPU collectives) picks its interface the same way */
		if ((rc = add(&e, err, "NCCL_SOCKET_IFNAME", v)) ||
		    (rc = add(&e, err, "GLOO_SOCKET_IFNAME", iface)))
			goto out;
	}
	if ((rc = add(&e, err, "NCCL_DEBUG", "WARN")) ||
	    (rc = add(&e, err, "TORCH_NCCL_ASYNC_ERROR_HANDLING", "1")))
		goto out;
	*out = e.v;
	e.v = NULL;
out:
	hw_names_free(e.v);
	free(hca);
	return rc;
}

int hw_iface_of(char *name, size_t namesz, const char *addr, struct ty_err *err)
{
	struct ifaddrs *ifs = NULL;
	struct in_addr want;
	int rc;

	name[0] = '\0';
	if (!addr || inet_pton(AF_INET, addr, &want) != 1)
		return ty_err_set(err, TY_EINVAL, "'%s' is not an IPv4 address",
				  addr ? addr : "(null)");
	if (getifaddrs(&ifs))
		return ty_err_set(err, TY_EIO, "getifaddrs: %s", strerror(errno));
	rc = TY_ENOTFOUND;
	for (struct ifaddrs *i = ifs; i && rc == TY_ENOTFOUND; i = i->ifa_next) {
		const struct sockaddr_in *sin = (const struct sockaddr_in *)(void *)i->ifa_addr;

		if (!sin || sin->sin_family != AF_INET || sin->sin_addr.s_addr != want.s_addr)
			continue;
		if (strlen(i->ifa_name) >= namesz)
			rc = ty_err_set(err, TY_EINVAL, "interface name '%s' is too long",
					i->ifa_name);
		else {
			snprintf(name, namesz, "%s", i->ifa_name);
			rc = 0;
		}
	}
	if (rc == TY_ENOTFOUND)
		ty_err_set(err, TY_ENOTFOUND, "no interface carries %s", addr);
	freeifaddrs(ifs);
	return rc;
}
