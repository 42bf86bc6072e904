/* Unauthenticated routes: liveness, readiness and the API description. */
#include "api.h"
#include "migrations.h"

#include <string.h>

extern const char ty_openapi_json[];

int api_h_healthz(struct api_req *r, struct ty_err *err)
{
	return api_reply_text(r, 200, "{\"status\":\"ok\"}");
}

int api_h_readyz(struct api_req *r, struct ty_err *err)
{
	int rc = ty_schema_check(r->pg, "API", err);

	if (rc == TY_ESTATE) { /* not the schema this build needs: no traffic yet */
		char msg[sizeof(err->msg)];

		memcpy(msg, err->msg, sizeof(msg)); /* api_fail rewrites err */
		return api_fail(r, err, API_P_UNAVAILABLE, NULL, "%s", msg);
	}
	return rc ? rc : api_reply_text(r, 200, "{\"status\":\"ready\"}");
}

int api_h_openapi(struct api_req *r, struct ty_err *err)
{
	return api_reply_text(r, 200, ty_openapi_json);
}
