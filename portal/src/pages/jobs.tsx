// Jobs: the token's jobs newest first, filtered by team (admins), state and
// a search, paged with the API's cursor; bulk cancel after a confirmation.
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, ApiError } from '../api';
import type { PageProps } from '../app';
import { ConfirmDialog, ErrorNote, JobLink, Pager } from '../components';
import { CursorPager, fmtTime, isTerminal, JOB_STATES } from '../format';
import { useFeed, useLoad, useTick } from '../hooks';

const PAGE_SIZE = 50;

export function JobsPage({ who }: PageProps) {
	const pager = useRef(new CursorPager());
	const [cursor, setCursor] = useState<string | null>(null);
	const [search, setSearch] = useState('');
	const [q, setQ] = useState('');
	const [state, setState] = useState('');
	const [team, setTeam] = useState('');
	const [selected, setSelected] = useState<Set<number>>(new Set());
	const [confirming, setConfirming] = useState(false);
	const [result, setResult] = useState<string | null>(null);
	const [tick, bump] = useTick();

	// the search is sent once typing pauses
	useEffect(() => {
		const t = setTimeout(() => setQ(search.trim()), 300);
		return () => clearTimeout(t);
	}, [search]);
	// a new filter starts again at the first page
	useEffect(() => {
		pager.current.reset();
		setCursor(null);
		setSelected(new Set());
	}, [q, state, team]);

	const jobs = useLoad(() => api.jobs({ limit: PAGE_SIZE, cursor, q, state, team }), [cursor, q, state, team, tick]);
	const teams = useLoad(() => (who.role === 'admin' ? api.teams() : Promise.resolve(null)), [who.role]);
	useFeed(bump);
	const items = jobs.data?.items ?? [];
	const canCancel = who.role !== 'viewer';

	function toggle(id: number, on: boolean) {
		const s = new Set(selected);
		if (on) s.add(id);
		else s.delete(id);
		setSelected(s);
	}

	async function cancelSelected() {
		setConfirming(false);
		const ids = [...selected];
		const failed: string[] = [];
		for (const id of ids) {
			try {
				await api.cancelJob(id);
			} catch (e) {
				failed.push(`job ${id}: ${e instanceof ApiError ? e.detail : String(e)}`);
			}
		}
		setSelected(new Set());
		setResult(failed.length
			? `Cancelled ${ids.length - failed.length} of ${ids.length}; ${failed.join('; ')}`
			: `Cancelled ${ids.length} job${ids.length === 1 ? '' : 's'}`);
		bump();
	}

	return (
		<>
			<h1>Jobs</h1>
			<form class="filters" role="search" onSubmit={(e) => e.preventDefault()}>
				<label for="jobs-search">Search</label>
				<input id="jobs-search" type="search" value={search} placeholder="name or id"
					onInput={(e) => setSearch((e.target as HTMLInputElement).value)} />
				<label for="jobs-state">State</label>
				<select id="jobs-state" value={state} onChange={(e) => setState((e.target as HTMLSelectElement).value)}>
					<option value="">any</option>
					{JOB_STATES.map((s) => <option key={s} value={s}>{s}</option>)}
				</select>
				{who.role === 'admin' ? (
					<>
					<label for="jobs-team">Team</label>
					<select id="jobs-team" value={team} onChange={(e) => setTeam((e.target as HTMLSelectElement).value)}>
						<option value="">all</option>
						{(teams.data?.items ?? []).map((t) => <option key={t.name} value={t.name}>{t.name}</option>)}
					</select>
					</>
				) : null}
				{canCancel ? (
					<button type="button" class="danger" disabled={selected.size === 0}
						onClick={() => { setResult(null); setConfirming(true); }}>Cancel selected</button>
				) : null}
			</form>
			{result ? <p role="status">{result}</p> : null}
			<ErrorNote error={jobs.error} />
			<table class="data">
				<caption>Jobs, newest first (page {pager.current.page})</caption>
				<thead>
					<tr>
						{canCancel ? <th scope="col"><span class="sr-only">Select</span></th> : null}
						<th scope="col">Job</th><th scope="col">Name</th><th scope="col">Team</th>
						<th scope="col">State</th><th scope="col">GPUs</th><th scope="col">Attempt</th>
						<th scope="col">Submitted</th><th scope="col">Reason or failure</th>
					</tr>
				</thead>
				<tbody>
					{items.map((j) => {
						const r = j.spec?.resources ?? {};
						return (
							<tr key={j.id} data-job={j.id}>
								{canCancel ? (
									<td><input type="checkbox" aria-label={`Select job ${j.id}`} disabled={isTerminal(j.state)}
										checked={selected.has(j.id)}
										onChange={(e) => toggle(j.id, (e.target as HTMLInputElement).checked)} /></td>
								) : null}
								<td><JobLink id={j.id} /></td>
								<td>{j.name ?? '—'}</td>
								<td>{j.team}</td>
								<td><span class={`state state-${j.state}`}>{j.state}</span>{j.cancel_requested && !isTerminal(j.state) ? ' (cancelling)' : ''}</td>
								<td>{(r.nodes ?? 1) * (r.gpus_per_node ?? 0)}</td>
								<td>{j.attempt}</td>
								<td>{fmtTime(j.created_at)}</td>
								<td>{j.pending_reason ?? j.failure_class ?? '—'}</td>
							</tr>
						);
					})}
				</tbody>
			</table>
			{!jobs.loading && items.length === 0 && !jobs.error ? <p class="muted">No jobs match.</p> : null}
			<Pager label="Job pages" page={pager.current.page} hasPrevious={pager.current.hasPrevious}
				hasNext={!!jobs.data?.next_cursor}
				onPrevious={() => { pager.current.previous(); setCursor(pager.current.current); }}
				onNext={() => { if (pager.current.next(jobs.data?.next_cursor ?? null)) setCursor(pager.current.current); }} />
			<ConfirmDialog open={confirming} title="Cancel jobs" onConfirm={cancelSelected} onClose={() => setConfirming(false)}>
				<p>Cancel {selected.size} job{selected.size === 1 ? '' : 's'}: {[...selected].join(', ')}?</p>
			</ConfirmDialog>
		</>
	);
}
