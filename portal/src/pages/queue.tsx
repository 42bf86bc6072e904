// Queue: the pending jobs in the scheduler's order, one page at a time (the
// queue can hold tens of thousands), and each team's fair share.
import { useRef, useState } from 'preact/hooks';
import { api } from '../api';
import type { PageProps } from '../app';
import { ErrorNote, JobLink, Pager } from '../components';
import { CursorPager, fmtNumber, fmtTime } from '../format';
import { useFeed, useLoad, useTick } from '../hooks';

const PAGE_SIZE = 100;

export function QueuePage(_: PageProps) {
	const pager = useRef(new CursorPager());
	const [cursor, setCursor] = useState<string | null>(null);
	const [tick, bump] = useTick();
	const q = useLoad(() => api.queue({ limit: PAGE_SIZE, cursor }), [cursor, tick]);
	const teams = useLoad(() => api.teams(), [tick]);
	useFeed(bump);
	const items = q.data?.items ?? [];

	return (
		<>
			<h1>Queue</h1>
			<ErrorNote error={q.error} />
			<table class="data">
				<caption>Pending jobs in the order the scheduler considers them (page {pager.current.page})</caption>
				<thead>
					<tr>
						<th scope="col">Position</th><th scope="col">Job</th><th scope="col">Team</th>
						<th scope="col">Name</th><th scope="col">Priority</th><th scope="col">GPUs</th>
						<th scope="col">Submitted</th><th scope="col">Reason</th>
						<th scope="col">Estimated start</th><th scope="col">Fair share</th>
					</tr>
				</thead>
				<tbody>
					{items.map((e, i) => (
						<tr key={e.job ?? `${cursor}-${i}`} data-job={e.job ?? undefined}>
							<td>{e.position ?? '—'}</td>
							<td><JobLink id={e.job} /></td>
							<td>{e.team}</td>
							<td>{e.name ?? '—'}</td>
							<td>{e.priority_class} {e.priority !== 0 ? `(${e.priority})` : ''}</td>
							<td>{e.gpus} ({e.nodes} × {e.gpus_per_node})</td>
							<td>{fmtTime(e.submitted_at)}</td>
							<td>{e.reason ?? '—'}</td>
							<td>{fmtTime(e.estimated_start ?? e.reserved_until)}</td>
							<td>{fmtNumber(e.fair_share)}</td>
						</tr>
					))}
				</tbody>
			</table>
			{!q.loading && items.length === 0 && !q.error ? <p class="muted">No job is pending.</p> : null}
			<Pager label="Queue pages" page={pager.current.page} hasPrevious={pager.current.hasPrevious}
				hasNext={!!q.data?.next_cursor}
				onPrevious={() => { pager.current.previous(); setCursor(pager.current.current); }}
				onNext={() => { if (pager.current.next(q.data?.next_cursor ?? null)) setCursor(pager.current.current); }} />

			<h2>Fair share</h2>
			<ErrorNote error={teams.error} />
			<table class="data">
				<caption>Fair share and pending jobs per team</caption>
				<thead>
					<tr><th scope="col">Team</th><th scope="col">Fair share</th><th scope="col">Pending jobs</th>
						<th scope="col">GPUs in use</th></tr>
				</thead>
				<tbody>
					{(teams.data?.items ?? []).map((t) => (
						<tr key={t.name} data-team={t.name}>
							<td><a href={`#/teams/${encodeURIComponent(t.name)}`}>{t.name}</a></td>
							<td>{fmtNumber(t.usage.fair_share)}</td>
							<td>{t.usage.pending_jobs}</td>
							<td>{t.usage.gpus_in_use}</td>
						</tr>
					))}
				</tbody>
			</table>
		</>
	);
}
