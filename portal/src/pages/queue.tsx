// Queue: the pending jobs in the scheduler's order, one page at a time (the
// queue can hold tens of thousands), each team's fair share, and when a job
// of a given shape would start (the what-if, read-only).
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, ApiError, type Team, type WhatIfAnswer, type Whoami } from '../api';
import type { PageProps } from '../app';
import { ErrorNote, JobLink, Pager } from '../components';
import { CursorPager, fmtNumber, fmtTime } from '../format';
import { useFeed, useLoad, useTick } from '../hooks';
import {
	askedText, estimateText, formFieldOf, PRIORITY_CLASSES, runtimeSourceText, TOPOLOGIES,
	waitsForUnlisted, whatIfSpec, type WhatIfForm,
} from '../whatif';

const PAGE_SIZE = 100;

export function QueuePage({ who }: PageProps) {
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

			{who.role !== 'viewer' ? <WhatIf who={who} teams={teams.data?.items ?? []} /> : null}

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

// "When would a job start?": a viewer may not ask (403), so it sees no form;
// a member asks for its own team, an admin for any.
function WhatIf({ who, teams }: { who: Whoami; teams: Team[] }) {
	const choices = who.role === 'admin' ? teams.map((t) => t.name) : who.team ? [who.team] : [];
	const [form, setForm] = useState<WhatIfForm>({
		team: who.team ?? '', nodes: '1', gpusPerNode: '1', maxRuntimeHours: '',
		priorityClass: 'normal', spot: false, topology: '',
	});
	const [asking, setAsking] = useState(false);
	const [error, setError] = useState<ApiError | null>(null);
	const [answer, setAnswer] = useState<{ asked: string; a: WhatIfAnswer } | null>(null);
	const gen = useRef(0);
	useEffect(() => () => { gen.current++; }, []); // an answer after unmount is dropped

	// an admin's team list arrives after the first render
	useEffect(() => {
		if (!form.team && choices.length) setForm((f) => ({ ...f, team: choices[0] }));
	}, [choices.join(',')]);

	const set = (k: keyof WhatIfForm) => (e: Event) => {
		const el = e.target as HTMLInputElement;
		const v = el.type === 'checkbox' ? el.checked : el.value;
		setForm((f) => ({ ...f, [k]: v }));
	};
	const bad = formFieldOf(error?.field);
	const invalid = (k: keyof WhatIfForm) => (bad === k ? true : undefined);

	async function ask(e: Event) {
		e.preventDefault();
		const r = whatIfSpec(form);
		if (r.error !== undefined) {
			setError(new ApiError(422, 'invalid_field', r.error, r.field));
			return;
		}
		const mine = ++gen.current;
		const asked = askedText(form);
		setAsking(true);
		setError(null);
		try {
			const a = await api.whatIf(r.spec);
			if (mine === gen.current) setAnswer({ asked, a });
		} catch (err) {
			if (mine !== gen.current) return;
			const x = err instanceof ApiError ? err : new ApiError(0, 'internal', String(err));
			setAnswer(null);
			setError(x.status === 0 ? null : x); // unreachable: the banner says so
		} finally {
			if (mine === gen.current) setAsking(false);
		}
	}

	return (
		<section aria-labelledby="what-if-title">
			<h2 id="what-if-title">When would a job start?</h2>
			<p class="muted">Asks the scheduler when a job of this shape would start if it were submitted now. Nothing is submitted.</p>
			{/* the API checks the limits and names the field: the browser's own check would hide that */}
			<form class="filters" noValidate onSubmit={ask}>
				<label for="what-if-team">Team</label>
				<select id="what-if-team" value={form.team} onChange={set('team')} aria-invalid={invalid('team')}>
					{choices.map((t) => <option key={t} value={t}>{t}</option>)}
				</select>
				<label for="what-if-nodes">Nodes</label>
				<input id="what-if-nodes" type="number" inputMode="numeric" min={1} max={10000} required class="narrow"
					value={form.nodes} onInput={set('nodes')} aria-invalid={invalid('nodes')} />
				<label for="what-if-gpus">GPUs per node</label>
				<input id="what-if-gpus" type="number" inputMode="numeric" min={0} max={64} required class="narrow"
					value={form.gpusPerNode} onInput={set('gpusPerNode')} aria-invalid={invalid('gpusPerNode')} />
				<label for="what-if-runtime">Max runtime (hours, optional)</label>
				<input id="what-if-runtime" type="number" min={0} step="any" class="narrow" placeholder="24"
					value={form.maxRuntimeHours} onInput={set('maxRuntimeHours')} aria-invalid={invalid('maxRuntimeHours')} />
				<label for="what-if-class">Priority class</label>
				<select id="what-if-class" value={form.priorityClass} onChange={set('priorityClass')}
					aria-invalid={invalid('priorityClass')}>
					{PRIORITY_CLASSES.map((c) => <option key={c} value={c}>{c}</option>)}
				</select>
				<label class="check">
					<input id="what-if-spot" type="checkbox" checked={form.spot} onChange={set('spot')} aria-invalid={invalid('spot')} />
					Spot allowed
				</label>
				<label for="what-if-topology">Required topology</label>
				<select id="what-if-topology" value={form.topology} onChange={set('topology')} aria-invalid={invalid('topology')}>
					<option value="">none</option>
					{TOPOLOGIES.map((t) => <option key={t} value={t}>one {t}</option>)}
				</select>
				<button type="submit" disabled={asking}>Ask</button>
			</form>
			{asking ? <p role="status" class="muted">Asking the scheduler…</p> : null}
			<ErrorNote error={error} />
			{answer && !asking && !error ? <WhatIfResult asked={answer.asked} a={answer.a} /> : null}
		</section>
	);
}

function WhatIfResult({ asked, a }: { asked: string; a: WhatIfAnswer }) {
	const snap = Date.parse(a.snapshot_at);
	const now = Number.isFinite(snap) ? snap : undefined;
	const e = a.estimate;
	const waits = e?.kind === 'estimated' ? e.waits_for ?? [] : [];
	const more = waitsForUnlisted(e);
	const source = runtimeSourceText(e);
	return (
		<div class="what-if" data-testid="what-if-answer">
			<p>{asked}: would start <strong data-testid="what-if-estimate">{estimateText(a, now)}</strong></p>
			{a.reason && e?.kind !== 'never' ? <p data-testid="what-if-reason">Waits because: {a.reason}</p> : null}
			{waits.length || more ? (
				<p data-testid="what-if-waits">
					Waits for {waits.map((id, i) => <span key={i}>{i ? ', ' : ''}<JobLink id={id} /></span>)}
					{more ? `${waits.length ? ' and ' : ''}${more} more` : ''}
					{source ? ` (${source})` : ''}
				</p>
			) : null}
			{a.alternatives.length ? (
				<>
					<h3>Sooner with</h3>
					<ul>
						{a.alternatives.map((alt) => (
							<li key={alt.summary} data-testid="what-if-alternative">
								{alt.summary}: would start <strong>{estimateText(alt, now)}</strong>
								{alt.reason && alt.estimate?.kind !== 'never' ? <span class="muted"> ({alt.reason})</span> : null}
							</li>
						))}
					</ul>
				</>
			) : a.starts_now ? null : <p class="muted">No smaller shape, spot capacity or looser topology would start it sooner.</p>}
			<p class="muted">As of the scheduler's snapshot at {fmtTime(a.snapshot_at)} (UTC).</p>
		</div>
	);
}
