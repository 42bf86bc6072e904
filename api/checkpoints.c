/* GET /v1/jobs/{id}/checkpoints: the job's checkpoints and its next resume point. */
#include "api.h"
#include "store.h"

int api_h_jobs_checkpoints(struct api_req *r, struct ty_err *err)
{
	const char *doc;
	int64_t id;
	int rc;

	if (!api_parse_id(&id, r->params[0]))
		return api_fail(r, err, API_P_JOB_NOT_FOUND, NULL, "no job '%s'", r->params[0]);
	if ((rc = api_store_job_checkpoints(&doc, r->pg, r->arena, r->params[0], api_scope(r),
					    err)))
		return rc;
	if (!doc)
		return api_fail(r, err, API_P_JOB_NOT_FOUND, NULL, "no job '%s'", r->params[0]);
	return api_reply_text(r, 200, doc);
}
