/*
 * Group commit of job submissions: concurrent POST /v1/jobs requests share
 * one multi-row INSERT and one COMMIT (one WAL flush) on the submitter's
 * own connection, and each is answered only after that commit.
 *
 * A handler queues its submission and suspends its connection under the
 * submitter's mutex; the submitter resumes it under the same mutex once the
 * batch is over, so a resume never comes before its suspend. There is no
 * fixed delay: the thread takes whatever queued while the last batch ran.
 */
#include "api.h"
#include "store.h"
#include "ty_log.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The most submissions one batch carries (one jsonb parameter). */
#define BATCH_MAX 512

struct api_submitter {
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct api_submission *head, *tail;
	bool stop;
	char *url;
};

struct api_submitter **api__submit_slot(struct api_server *s);

static void fail(struct api_submission *x, int rc, const struct ty_err *err)
{
	x->result = API_SUB_FAILED;
	x->rc = rc;
	if (err)
		x->err = *err;
	else
		ty_err_set(&x->err, rc, NULL);
}

/* After the team locks: the limited keyed submissions whose key has a job by now are REPLAY. */
static int replays(struct ty_pg *pg, struct api_submission **x, int n, struct ty_err *err)
{
	struct api_job_key *k = calloc((size_t)n, sizeof(*k));
	int *of = calloc((size_t)n, sizeof(*of));
	int nk = 0, rc = 0;

	if (!k || !of) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	for (int i = 0; i < n; i++)
		if (x[i]->limited && x[i]->key && x[i]->result == API_SUB_QUEUED) {
			k[nk].team_id = x[i]->team_id;
			k[nk].key = x[i]->key;
			of[nk++] = i;
		}
	if (nk == 0 || (rc = api_store_jobs_keyed(k, nk, pg, err)))
		goto out;
	for (int j = 0; j < nk; j++)
		if (k[j].taken)
			x[of[j]]->result = API_SUB_REPLAY;
out:
	free(k);
	free(of);
	return rc;
}

static int admit(struct ty_pg *pg, struct api_submission **x, int n, struct ty_err *err)
{
	struct api_team_pending *t = NULL;
	const char **ids = calloc((size_t)n + 1, sizeof(*ids));
	int nids = 0, nt = 0, rc = 0;

	if (!ids)
		return ty_err_set(err, TY_ENOMEM, NULL);
	for (int i = 0; i < n; i++)
		if (x[i]->limited && x[i]->result == API_SUB_QUEUED)
			ids[nids++] = x[i]->team_id;
	if (nids == 0)
		goto out; /* no limited team in this batch */
	if ((rc = api_store_teams_pending(&t, &nt, pg, ids, nids, err)))
		goto out;
	/* a key whose job committed while this one waited replays it: it takes no slot */
	if ((rc = replays(pg, x, n, err)))
		goto out;
	for (int i = 0; i < n; i++) {
		struct api_team_pending *c = NULL;

		if (!x[i]->limited || x[i]->result != API_SUB_QUEUED)
			continue;
		for (int k = 0; k < nt; k++)
			if (t[k].id == atoll(x[i]->team_id))
				c = &t[k];
		if (!c || c->max < 0) /* no team (the insert fails) or no limit any more */
			continue;
		if (c->pending + 1 <= c->max) {
			c->pending++;
			continue;
		}
		x[i]->result = API_SUB_REFUSED;
		x[i]->doc = ty_arena_printf(x[i]->arena,
					    "team '%s' has %lld pending job(s) and a limit of %lld "
					    "(max_pending_jobs): 1 more do not fit; submit again when "
					    "some have started or were cancelled",
					    x[i]->team, c->pending, c->max);
	}
out:
	free(t);
	free(ids);
	return rc;
}

/* Insert the queued ones of x[0..n) in one statement; their results are set. */
static int insert(struct ty_pg *pg, struct api_submission **x, int n, struct ty_err *err)
{
	json_t *rows = json_array();
	char *text = NULL;
	int rc = 0;

	if (!rows) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	for (int i = 0; i < n; i++) {
		if (x[i]->result != API_SUB_QUEUED)
			continue;
		if (json_object_set_new(x[i]->row, "ord", json_integer(i)) ||
		    json_array_append(rows, x[i]->row)) {
			rc = ty_err_set(err, TY_ENOMEM, NULL);
			goto out;
		}
	}
	if (json_array_size(rows) == 0)
		goto out;
	if (!(text = json_dumps(rows, JSON_COMPACT))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	rc = api_store_jobs_insert(x, pg, text, err);
out:
	free(text);
	json_decref(rows);
	return rc;
}

/* Forget what a rolled-back attempt decided. */
static void reset(struct api_submission **x, int n, const bool *dup)
{
	for (int i = 0; i < n; i++)
		if (!dup[i]) {
			x[i]->result = API_SUB_QUEUED;
			x[i]->doc = NULL;
		}
}

/* One transaction for the whole batch; per_row: each insert under its own savepoint. */
static int attempt(struct ty_pg *pg, struct api_submission **x, int n, bool per_row,
		   struct ty_err *err)
{
	int rc;

	if ((rc = ty_pg_begin(pg, err)) || (rc = admit(pg, x, n, err)))
		goto fail;
	if (!per_row) {
		if ((rc = insert(pg, x, n, err)))
			goto fail;
	} else {
		for (int i = 0; i < n; i++) {
			struct ty_err e = {0};
			int r;

			if (x[i]->result != API_SUB_QUEUED)
				continue;
			if ((rc = ty_pg_exec(NULL, pg, "SAVEPOINT one", 0, NULL, err)))
				goto fail;
			if (!(r = insert(pg, x + i, 1, &e))) {
				rc = ty_pg_exec(NULL, pg, "RELEASE SAVEPOINT one", 0, NULL, err);
			} else {
				x[i]->doc = NULL;
				fail(x[i], r, &e);
				rc = ty_pg_exec(NULL, pg, "ROLLBACK TO SAVEPOINT one", 0, NULL, err);
			}
			if (rc)
				goto fail;
		}
	}
	if ((rc = ty_pg_commit(pg, err)))
		return rc;
	return 0;
fail:
	ty_pg_rollback(pg);
	return rc;
}

int api__submit_batch(struct ty_pg *pg, struct api_submission **x, int n)
{
	struct ty_err err = {0};
	bool dup[BATCH_MAX] = {false};
	int rc;

	if (n > BATCH_MAX)
		return TY_EINVAL;
	/* a key twice in the batch: the later ones replay the first one's job */
	for (int i = 0; i < n; i++) {
		x[i]->result = API_SUB_QUEUED;
		for (int j = 0; x[i]->key && j < i && !dup[i]; j++)
			if (!dup[j] && x[j]->key && !strcmp(x[i]->key, x[j]->key) &&
			    !strcmp(x[i]->team_id, x[j]->team_id)) {
				dup[i] = true;
				x[i]->result = API_SUB_REPLAY;
			}
	}
	rc = attempt(pg, x, n, false, &err);
	if (rc && rc != TY_EUNAVAIL && rc != TY_ENOMEM && ty_pg_ok(pg)) {
		/* a row failed: each one again under its own savepoint, so it fails alone */
		ty_debug("submission batch of %d failed (%s): one savepoint per row", n, err.msg);
		reset(x, n, dup);
		ty_err_clear(&err);
		rc = attempt(pg, x, n, true, &err);
	}
	if (rc) {
		/* nothing of this batch is known to be committed: nobody is told otherwise */
		for (int i = 0; i < n; i++)
			fail(x[i], rc, &err);
		return rc;
	}
	/* a replayed key whose first request did not create its job shares its answer */
	for (int i = 0; i < n; i++)
		for (int j = 0; dup[i] && j < i; j++)
			if (!dup[j] && x[j]->key && !strcmp(x[i]->key, x[j]->key) &&
			    !strcmp(x[i]->team_id, x[j]->team_id) &&
			    (x[j]->result == API_SUB_REFUSED || x[j]->result == API_SUB_FAILED)) {
				x[i]->result = x[j]->result;
				x[i]->doc = x[j]->doc ? ty_arena_strdup(x[i]->arena, x[j]->doc)
						      : NULL;
				x[i]->rc = x[j]->rc;
				x[i]->err = x[j]->err;
			}
	return 0;
}

static void answer(struct api_submitter *sb, struct api_submission **x, int n)
{
	for (int i = 0; i < n; i++) {
		json_decref(x[i]->row);
		x[i]->row = NULL;
	}
	pthread_mutex_lock(&sb->mu);
	for (int i = 0; i < n; i++)
		MHD_resume_connection(x[i]->conn); /* x[i] may be gone after this */
	pthread_mutex_unlock(&sb->mu);
}

static void *submit_main(void *arg)
{
	struct api_submitter *sb = arg;
	struct api_submission *batch[BATCH_MAX];
	struct ty_pg *pg = NULL;
	struct ty_err err = {0};

	for (;;) {
		int n = 0, rc;

		pthread_mutex_lock(&sb->mu);
		while (!sb->head && !sb->stop)
			pthread_cond_wait(&sb->cv, &sb->mu);
		while (sb->head && n < BATCH_MAX) {
			batch[n++] = sb->head;
			sb->head = sb->head->next;
		}
		if (!sb->head)
			sb->tail = NULL;
		pthread_mutex_unlock(&sb->mu);
		if (n == 0)
			break; /* stopping, nothing queued */
		ty_err_clear(&err);
		if (!pg && (rc = ty_pg_connect(&pg, sb->url, &err)) == 0 &&
		    (rc = ty_pg_exec(NULL, pg, "SET application_name = 'trainyard-api submit'", 0,
				     NULL, &err))) {
			ty_pg_close(pg);
			pg = NULL;
		}
		if (!pg) {
			for (int i = 0; i < n; i++)
				fail(batch[i], TY_EUNAVAIL, &err);
		} else {
			rc = api__submit_batch(pg, batch, n);
			if (rc == TY_EUNAVAIL) {
				/* a fresh connection for the next batch */
				ty_pg_close(pg);
				pg = NULL;
			}
		}
		answer(sb, batch, n);
	}
	ty_pg_close(pg);
	return NULL;
}

bool api__submit_park(struct api_req *r, struct api_submission *x)
{
	struct api_submitter *sb = *api__submit_slot(r->srv);
	bool parked = false;

	x->next = NULL;
	x->conn = r->conn;
	x->arena = r->arena;
	x->result = API_SUB_QUEUED;
	pthread_mutex_lock(&sb->mu);
	if (!sb->stop) {
		if (sb->tail)
			sb->tail->next = x;
		else
			sb->head = x;
		sb->tail = x;
		MHD_suspend_connection(r->conn);
		pthread_cond_signal(&sb->cv);
		parked = true;
	}
	pthread_mutex_unlock(&sb->mu);
	if (!parked) {
		json_decref(x->row);
		x->row = NULL;
		fail(x, TY_EUNAVAIL, NULL);
		ty_err_set(&x->err, TY_EUNAVAIL, "the server is stopping");
	}
	r->sub = x;
	r->parked = parked;
	return parked;
}

int api__submit_start(struct api_server *s, const char *database_url, struct ty_err *err)
{
	struct api_submitter *sb = calloc(1, sizeof(*sb));

	if (!sb || !(sb->url = strdup(database_url))) {
		free(sb);
		return ty_err_set(err, TY_ENOMEM, NULL);
	}
	pthread_mutex_init(&sb->mu, NULL);
	pthread_cond_init(&sb->cv, NULL);
	if (pthread_create(&sb->thread, NULL, submit_main, sb)) {
		pthread_cond_destroy(&sb->cv);
		pthread_mutex_destroy(&sb->mu);
		free(sb->url);
		free(sb);
		return ty_err_set(err, TY_EIO, "cannot start the submission thread");
	}
	*api__submit_slot(s) = sb;
	return 0;
}

void api__submit_stop(struct api_server *s)
{
	struct api_submitter *sb = *api__submit_slot(s);

	if (!sb)
		return;
	pthread_mutex_lock(&sb->mu);
	sb->stop = true;
	pthread_cond_signal(&sb->cv);
	pthread_mutex_unlock(&sb->mu);
	/* it writes what is queued before it ends: those clients are answered */
	pthread_join(sb->thread, NULL);
	pthread_cond_destroy(&sb->cv);
	pthread_mutex_destroy(&sb->mu);
	free(sb->url);
	free(sb);
	*api__submit_slot(s) = NULL;
}
