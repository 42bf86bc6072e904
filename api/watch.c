/*
 * Long-poll wake-ups. One thread LISTENs on PostgreSQL for job event
 * notifications (sent by a trigger, so events written by any API replica or
 * the scheduler wake watchers here) and resumes the requests parked on that
 * job, or whose wait has run out; a what-if request's answer (proto/notify.h)
 * resumes the request parked on its id negated. On the same connection it hears token
 * revocations (trainyard_tokens) and keeps the token cache (auth.c) live
 * only while it listens.
 *
 * A request arms its waiter before it queries for events and parks only if
 * nothing woke it meanwhile, so an event committed between the query and the
 * park is never missed. Suspend and resume both happen under the watcher's
 * mutex, which orders them.
 */
#include "api.h"
#include "notify.h"
#include "ty_log.h"
#include "ty_time.h"

#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct api_watch {
	pthread_t thread;
	pthread_mutex_t mu;
	struct api_waiter *head;
	bool stop;
	char *url;
	struct api_tokens *tokens;
};

struct api_watch **api__watch_slot(struct api_server *s);

static void unlink_waiter(struct api_watch *w, struct api_waiter *x)
{
	for (struct api_waiter **pp = &w->head; *pp; pp = &(*pp)->next)
		if (*pp == x) {
			*pp = x->next;
			x->next = NULL;
			return;
		}
}

/*
 * Wake every waiter on job_id (the feed's, job 0, on any job's), or whose
 * deadline passed; all wakes every one.
 */
static void wake(struct api_watch *w, int64_t job_id, bool all)
{
	int64_t now = ty_mono_ms();

	pthread_mutex_lock(&w->mu);
	for (struct api_waiter **pp = &w->head; *pp;) {
		struct api_waiter *x = *pp;

		if (all || x->job_id == job_id || (x->job_id == 0 && job_id > 0) ||
		    now >= x->deadline_ms) {
			*pp = x->next;
			x->next = NULL;
			x->woken = true;
			if (x->conn)
				MHD_resume_connection(x->conn);
			continue;
		}
		pp = &x->next;
	}
	pthread_mutex_unlock(&w->mu);
}

static void *watch_main(void *arg)
{
	struct api_watch *w = arg;
	struct ty_pg *pg = NULL;
	struct ty_err err = {0};

	while (!w->stop) {
		if (!pg) {
			ty_err_clear(&err);
			if (ty_pg_connect(&pg, w->url, &err) ||
			    ty_pg_exec(NULL, pg, "SET application_name = 'trainyard-api watch'", 0,
				       NULL, &err) ||
			    ty_pg_exec(NULL, pg, "LISTEN " PROTO_NOTIFY_CHANNEL, 0, NULL, &err) ||
			    ty_pg_exec(NULL, pg, "LISTEN trainyard_tokens", 0, NULL, &err)) {
				ty_pg_close(pg);
				pg = NULL;
				wake(w, -1, false); /* deadlines */
				usleep(200 * 1000);
				continue;
			}
			/* notifications may have been missed while disconnected */
			api__tokens_live(w->tokens, true);
			wake(w, 0, true);
		}
		struct pollfd pfd = {.fd = PQsocket(ty_pg_conn(pg)), .events = POLLIN};
		int n = poll(&pfd, 1, 100);
		if (n > 0) {
			PGnotify *nt;

			if (!PQconsumeInput(ty_pg_conn(pg)) ||
			    PQstatus(ty_pg_conn(pg)) != CONNECTION_OK) {
				ty_warn("watch connection lost, reconnecting");
				/* a revocation now would go unheard: serve no cached token */
				api__tokens_live(w->tokens, false);
				ty_pg_close(pg);
				pg = NULL;
				continue;
			}
			while ((nt = PQnotifies(ty_pg_conn(pg)))) {
				static const char answer[] = PROTO_NOTIFY_WHAT_IF_ANSWER;
				int64_t id = strtoll(nt->extra, NULL, 10);
				bool token = !strcmp(nt->relname, "trainyard_tokens");
				/* a what-if request's waiter is parked on its id negated */
				int64_t what_if = strncmp(nt->extra, answer, sizeof(answer) - 1)
						      ? 0
						      : strtoll(nt->extra + sizeof(answer) - 1, NULL, 10);

				PQfreemem(nt);
				if (token)
					api__tokens_forget(w->tokens, id ? id : -1);
				else if (what_if > 0)
					wake(w, -what_if, false);
				else
					wake(w, id, false);
			}
		}
		wake(w, -1, false); /* deadlines */
	}
	ty_pg_close(pg);
	return NULL;
}

int api__watch_start(struct api_server *s, const char *database_url, struct ty_err *err)
{
	struct api_watch *w = calloc(1, sizeof(*w));

	if (!w || !(w->url = strdup(database_url))) {
		free(w);
		return ty_err_set(err, TY_ENOMEM, NULL);
	}
	w->tokens = api__tokens(s);
	pthread_mutex_init(&w->mu, NULL);
	if (pthread_create(&w->thread, NULL, watch_main, w)) {
		pthread_mutex_destroy(&w->mu);
		free(w->url);
		free(w);
		return ty_err_set(err, TY_EIO, "cannot start the watch thread");
	}
	*api__watch_slot(s) = w;
	return 0;
}

void api__watch_stop(struct api_server *s)
{
	struct api_watch *w = *api__watch_slot(s);

	if (!w)
		return;
	w->stop = true;
	pthread_join(w->thread, NULL);
	wake(w, 0, true);
	pthread_mutex_destroy(&w->mu);
	free(w->url);
	free(w);
	*api__watch_slot(s) = NULL;
}

void api__watch_arm(struct api_req *r, int64_t job_id, int64_t deadline_ms)
{
	struct api_watch *w = *api__watch_slot(r->srv);
	struct api_waiter *x = &r->waiter;

	pthread_mutex_lock(&w->mu);
	unlink_waiter(w, x);
	x->job_id = job_id;
	x->deadline_ms = deadline_ms;
	x->woken = false;
	x->conn = NULL;
	x->next = w->head;
	w->head = x;
	pthread_mutex_unlock(&w->mu);
}

void api__watch_disarm(struct api_req *r)
{
	struct api_watch *w = *api__watch_slot(r->srv);

	pthread_mutex_lock(&w->mu);
	unlink_waiter(w, &r->waiter);
	pthread_mutex_unlock(&w->mu);
}

bool api__watch_park(struct api_req *r)
{
	struct api_watch *w = *api__watch_slot(r->srv);
	bool parked = false;

	pthread_mutex_lock(&w->mu);
	if (!r->waiter.woken && !w->stop) {
		r->waiter.conn = r->conn;
		MHD_suspend_connection(r->conn);
		parked = true;
	} else {
		unlink_waiter(w, &r->waiter);
	}
	pthread_mutex_unlock(&w->mu);
	r->parked = parked;
	return parked;
}
