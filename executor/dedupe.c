/* The window of recent dispatch keys and the replay guard that make redelivery harmless (pure). */
#include "exec.h"

bool exec_dedupe_seen(struct exec_dedupe *d, int64_t job, int64_t attempt, int type, int64_t seq)
{
	/* a linear scan: a node sees a few dispatch messages a minute */
	for (size_t i = 0; i < d->n; i++) {
		const struct exec_dedupe_key *k = &d->keys[i];

		if (k->seq == seq && k->job == job && k->attempt == attempt && k->type == type)
			return true;
	}
	d->keys[d->next] = (struct exec_dedupe_key){job, attempt, seq, type};
	d->next = (d->next + 1) % EXEC_DEDUPE_WINDOW;
	if (d->n < EXEC_DEDUPE_WINDOW)
		d->n++;
	return false;
}

enum exec_order exec_dispatch_order(int64_t epoch, int64_t seq, int64_t last_epoch,
				    int64_t last_seq)
{
	if (epoch < last_epoch)
		return EXEC_STALE;
	if (epoch == last_epoch && seq <= last_seq)
		return EXEC_REPLAYED;
	return EXEC_NEWER;
}
