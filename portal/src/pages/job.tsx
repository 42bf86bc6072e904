// Job: state, spec, attempts with their gang, progress and failures, the
// live log of a rank, checkpoints, goodput, trial metrics, and
// cancel/stop/drain.
import { useEffect, useMemo, useState } from 'preact/hooks';
import { api, ApiError, type Attempt, type Job, type RankProgress, type Straggler } from '../api';
import type { PageProps } from '../app';
import { Chart, ConfirmDialog, ErrorNote } from '../components';
import {
	fmtBytes, fmtDuration, fmtNumber, fmtPercent, fmtRate, fmtTime, gangMedian, gangStalledFor, isTerminal,
	parseId, progressText, stragglerText,
} from '../format';
import { useInterval, useLoad, useTick, useVisible } from '../hooks';

// progress makes no job event: an active job's attempts are read this often
// (executors send it at most every --progress-ms, 10 s by default)
const PROGRESS_REFRESH_MS = 5000;

type Action = { kind: 'cancel' | 'stop' } | { kind: 'drain'; node: string };

export function JobPage({ who, arg }: PageProps) {
	const id = parseId(arg);
	if (id === null) {
		return (
			<>
				<h1>Job {arg}</h1>
				<p class="error">Job {arg} not found</p>
			</>
		);
	}
	return <JobView who={who} id={id} />;
}

function JobView({ who, id }: { who: PageProps['who']; id: number }) {
	const [tick, bump] = useTick();
	const [progressTick, bumpProgress] = useTick();
	const job = useLoad(() => api.job(id), [id, tick]);
	const attempts = useLoad(() => api.attempts(id), [id, tick, progressTick]);
	const checkpoints = useLoad(() => api.checkpoints(id), [id, tick]);
	const metrics = useLoad(() => api.metrics(id, { limit: 1000 }), [id, tick]);
	const [events, setEvents] = useState<{ seq: number; type: string; message: string; time: string }[]>([]);
	const [action, setAction] = useState<Action | null>(null);
	const [actionResult, setActionResult] = useState<{ ok: boolean; text: string } | null>(null);
	const visible = useVisible();
	const j = job.data;
	const terminal = j ? isTerminal(j.state) : false;
	useInterval(() => { if (j && !terminal) bumpProgress(); }, PROGRESS_REFRESH_MS);

	// live: the job's events, long-polled; each one reloads the page's data
	useEffect(() => {
		if (!visible || job.error) return;
		const ctl = new AbortController();
		(async () => {
			let after = 0;
			let first = true;
			while (!ctl.signal.aborted) {
				try {
					const r = await api.jobEvents(id, { after, wait: first ? 0 : 25, limit: 1000 }, ctl.signal);
					const had = first;
					if (r.events.length) {
						setEvents((old) => (had ? r.events : [...old, ...r.events]));
						if (!had) bump();
					}
					after = r.next_after ?? after;
					first = false;
				} catch (e) {
					if (ctl.signal.aborted || (e instanceof ApiError && (e.status === 401 || e.status === 404))) return;
					await new Promise((r) => setTimeout(r, 5000));
				}
			}
		})();
		return () => ctl.abort();
	}, [id, visible, !!job.error]);

	if (job.error?.status === 404) {
		return (
			<>
				<h1>Job {id}</h1>
				<p class="error">Job {id} not found</p>
			</>
		);
	}

	async function run(a: Action) {
		setAction(null);
		try {
			if (a.kind === 'drain') {
				await api.drainNode(a.node);
				setActionResult({ ok: true, text: `Node ${a.node} is draining` });
			} else {
				await (a.kind === 'cancel' ? api.cancelJob(id) : api.stopJob(id));
				setActionResult({ ok: true, text: `Job ${id}: ${a.kind} requested` });
			}
		} catch (e) {
			if (e instanceof ApiError && e.status !== 0) setActionResult({ ok: false, text: e.detail });
		}
		bump();
	}

	const atts = attempts.data?.items ?? [];
	const last = atts.length ? atts[atts.length - 1] : null;
	const canAct = who.role !== 'viewer';

	return (
		<>
			<h1>Job {id}</h1>
			<ErrorNote error={job.error} />
			{j ? (
				<>
					<section aria-labelledby="job-summary">
						<h2 id="job-summary">{j.name ?? 'Unnamed job'}</h2>
						<dl class="facts">
							<dt>State</dt>
							<dd><span data-testid="job-state" class={`state state-${j.state}`}>{j.state}</span>
								{j.cancel_requested && !terminal ? ' (stop or cancel requested)' : ''}</dd>
							<dt>Team</dt><dd>{j.team}</dd>
							<dt>Attempt</dt><dd>{j.attempt}</dd>
							<dt>Failure class</dt><dd>{j.failure_class ?? '—'}</dd>
							{j.state === 'pending' ? (
								<>
									<dt>Reason</dt><dd>{j.pending_reason ?? '—'}</dd>
									<dt>Queue position</dt><dd>{j.queue_position ?? '—'}</dd>
									<dt>Estimated start</dt><dd>{fmtTime(j.reserved_until)}</dd>
								</>
							) : null}
							<dt>Preemptions</dt><dd>{j.preemptions} ({j.spot_preemptions} spot)</dd>
							<dt>Submitted</dt><dd>{fmtTime(j.created_at)}</dd>
							<dt>Finished</dt><dd>{fmtTime(j.finished_at)}</dd>
						</dl>
						{canAct ? (
							<div class="actions">
								<button type="button" class="danger" disabled={terminal}
									onClick={() => { setActionResult(null); setAction({ kind: 'cancel' }); }}>Cancel job</button>
								<button type="button" disabled={terminal}
									onClick={() => { setActionResult(null); setAction({ kind: 'stop' }); }}>Stop job</button>
							</div>
						) : null}
						{actionResult ? <p role="status" class={actionResult.ok ? '' : 'error'}>{actionResult.text}</p> : null}
					</section>
					<Spec job={j} />
					<Goodput job={j} />
				</>
			) : null}

			<Gang attempt={last} hangTimeout={j?.spec?.hang_timeout_seconds} admin={who.role === 'admin'} onDrain={(node) => { setActionResult(null); setAction({ kind: 'drain', node }); }} />
			<Log id={id} attempt={last} live={!terminal} />

			<section aria-labelledby="attempts-h">
				<h2 id="attempts-h">Attempts</h2>
				<ErrorNote error={attempts.error} />
				<table class="data">
					<caption>Attempts, oldest first</caption>
					<thead>
						<tr><th scope="col">Attempt</th><th scope="col">State</th><th scope="col">Nodes</th>
							<th scope="col">Started</th><th scope="col">Duration</th><th scope="col">Exit</th>
							<th scope="col">Failure class</th><th scope="col">Message</th><th scope="col">Evidence</th>
							<th scope="col">GPU telemetry</th><th scope="col">Progress</th></tr>
					</thead>
					<tbody>
						{atts.map((a) => (
							<tr key={a.attempt}>
								<td>{a.attempt}</td>
								<td>{a.state}</td>
								<td>{a.nodes.map((n) => n.node).join(', ') || '—'}</td>
								<td>{fmtTime(a.running_at ?? a.created_at)}</td>
								<td>{fmtDuration(a.duration_seconds)}</td>
								<td>{a.exit_code ?? '—'}</td>
								<td>{a.failure_class ?? '—'}{a.blamed_node ? ` (blamed: ${a.blamed_node})` : ''}</td>
								<td>{a.message ?? '—'}</td>
								<td>{a.evidence ? <code>{a.evidence}</code> : '—'}</td>
								<td>{telemetry(a)}</td>
								<td><AttemptProgress attempt={a} /></td>
							</tr>
						))}
					</tbody>
				</table>
				{!attempts.loading && atts.length === 0 ? <p class="muted">Not placed yet.</p> : null}
			</section>

			<section aria-labelledby="ckpt-h">
				<h2 id="ckpt-h">Checkpoints</h2>
				<ErrorNote error={checkpoints.error} />
				{checkpoints.data && checkpoints.data.items.length ? (
					<table class="data">
						<caption>Checkpoints, newest step first (resume step {checkpoints.data.resume_step ?? 'none'})</caption>
						<thead>
							<tr><th scope="col">Step</th><th scope="col">Status</th><th scope="col">Size</th>
								<th scope="col">Node</th><th scope="col">Attempt</th><th scope="col">Verified</th>
								<th scope="col">Reason</th></tr>
						</thead>
						<tbody>
							{checkpoints.data.items.map((c) => (
								<tr key={c.step}>
									<td>{c.step}{c.resume ? ' (resume)' : ''}</td><td>{c.status}</td><td>{fmtBytes(c.bytes)}</td>
									<td>{c.node ?? '—'}</td><td>{c.attempt ?? '—'}</td><td>{fmtTime(c.verified_at)}</td>
									<td>{c.reason ?? '—'}</td>
								</tr>
							))}
						</tbody>
					</table>
				) : <p class="muted">No checkpoints.</p>}
			</section>

			<Metrics data={metrics.data} />

			<section aria-labelledby="events-h">
				<h2 id="events-h">Events</h2>
				<ol class="events">
					{events.map((e) => (
						<li key={e.seq}><time>{fmtTime(e.time)}</time> <strong>{e.type}</strong> {e.message}</li>
					))}
				</ol>
			</section>

			<ConfirmDialog open={action !== null} onClose={() => setAction(null)} onConfirm={() => action && run(action)}
				title={action?.kind === 'drain' ? `Drain node ${action.node}` : action?.kind === 'stop' ? `Stop job ${id}` : `Cancel job ${id}`}>
				<p>{action?.kind === 'drain'
					? `No new work will be placed on ${action.node}; what runs there keeps running.`
					: action?.kind === 'stop' ? 'The job ends as stopped (early stopping).' : 'The job ends as cancelled.'}</p>
			</ConfirmDialog>
		</>
	);
}

// what the executors measured of the attempt's GPUs, once a node reported
function telemetry(a: Attempt): string {
	const t = a.gpu_telemetry;
	if (!t) return '—';
	const parts: string[] = [];
	if (t.util_mean != null) parts.push(`util ${fmtNumber(t.util_mean, 1)}% (peak ${fmtNumber(t.util_peak, 1)}%)`);
	if (t.memory_used_peak_mb != null) parts.push(`memory peak ${fmtNumber(t.memory_used_peak_mb, 0)} MiB`);
	if (t.power_mean_w != null) parts.push(`power ${fmtNumber(t.power_mean_w, 0)} W`);
	if (t.idle_gpu_seconds) parts.push(`idle ${fmtDuration(t.idle_gpu_seconds)} GPU-time`);
	return parts.join(', ') || '—';
}

function Spec({ job }: { job: Job }) {
	const s = job.spec ?? {};
	const r = s.resources ?? {};
	return (
		<section aria-labelledby="spec-h">
			<h2 id="spec-h">Spec</h2>
			<dl class="facts">
				<dt>Command</dt><dd><code>{(s.command ?? []).join(' ')}</code></dd>
				<dt>Resources</dt>
				<dd>{r.nodes} node(s) × {r.gpus_per_node} GPU(s), {r.cpus_per_node} CPU(s), {r.memory_mb_per_node} MiB per node</dd>
				<dt>Priority</dt><dd>{s.priority_class} ({s.priority})</dd>
				<dt>Max runtime</dt><dd>{fmtDuration(s.max_runtime_seconds)}</dd>
				<dt>Preemptible</dt><dd>{s.preemptible ? 'yes' : 'no'}{s.spot?.allowed ? ', spot allowed' : ''}</dd>
				{s.image ? (<><dt>Image</dt><dd><code>{s.image}</code></dd></>) : null}
				{s.labels && Object.keys(s.labels).length ? (
					<><dt>Labels</dt><dd>{Object.entries(s.labels).map(([k, v]) => `${k}=${v}`).join(', ')}</dd></>
				) : null}
			</dl>
		</section>
	);
}

function Goodput({ job }: { job: Job }) {
	const g = job.goodput;
	return (
		<section aria-labelledby="goodput-h">
			<h2 id="goodput-h">Goodput</h2>
			{g ? (
				<>
					<p>Effective training time ratio <strong>{fmtPercent(g.ratio)}</strong>: {fmtDuration(g.useful_seconds)} useful of{' '}
						{fmtDuration(g.wall_seconds)} (as of {fmtTime(g.as_of)}).</p>
					<table class="data">
						<caption>GPU-seconds by category</caption>
						<thead><tr><th scope="col">Category</th><th scope="col">GPU-seconds</th></tr></thead>
						<tbody>
							{Object.entries(g.gpu_seconds).map(([k, v]) => (
								<tr key={k}><td>{k.replace(/_/g, ' ')}</td><td>{fmtNumber(v)}</td></tr>
							))}
						</tbody>
					</table>
				</>
			) : <p class="muted">No attempt has been accounted yet.</p>}
		</section>
	);
}

// The newest verdict per rank and per node: a rank may be judged again
// after it recovered and fell behind once more.
function verdicts(a: Attempt): { byRank: Map<number, Straggler>; byNode: Map<string, Straggler> } {
	const byRank = new Map<number, Straggler>();
	const byNode = new Map<string, Straggler>();
	for (const v of a.stragglers ?? []) {
		byRank.set(v.rank, v);
		byNode.set(v.node, v);
	}
	return { byRank, byNode };
}

// An attempt still going (its ranks may still step): only it can stall.
function active(a: Attempt): boolean {
	return a.ended_at === null && !isTerminal(a.state);
}

// the reference time of "advanced … ago": now, or the attempt's end
function progressRef(a: Attempt): number {
	const end = a.ended_at ? Date.parse(a.ended_at) : NaN;
	return Number.isFinite(end) ? end : Date.now();
}

function Gang({ attempt, hangTimeout, admin, onDrain }: {
	attempt: Attempt | null; hangTimeout: unknown; admin: boolean; onDrain: (node: string) => void;
}) {
	if (!attempt) return null;
	const { byRank, byNode } = verdicts(attempt);
	const progress = new Map<number, RankProgress>((attempt.progress ?? []).map((p) => [p.rank, p]));
	const ended = !active(attempt);
	const ref = progressRef(attempt);
	const median = gangMedian(attempt.progress);
	const stalled = ended ? null : gangStalledFor(attempt.progress, ref,
		attempt.running_at ? Date.parse(attempt.running_at) : null);
	return (
		<section aria-labelledby="gang-h">
			<h2 id="gang-h">Gang of attempt {attempt.attempt}</h2>
			{attempt.progress?.length ? (
				<p data-testid="gang-progress">Gang median step rate: {median === null ? '—' : `${fmtRate(median)} steps/s`}
					{' '}(steps {Math.min(...attempt.progress.map((p) => p.step))}–{Math.max(...attempt.progress.map((p) => p.step))})</p>
			) : <p class="muted">No rank has reported a step yet.</p>}
			{stalled !== null ? (
				<p class="alert" data-testid="gang-stalled"><strong>Stalled</strong>: no rank's step advanced for{' '}
					{fmtDuration(stalled)}{typeof hangTimeout === 'number' && hangTimeout > 0
						? ` (the job's hang timeout is ${fmtDuration(hangTimeout)})` : ''}</p>
			) : null}
			{attempt.stragglers?.length ? (
				<ul class="alert plain" aria-label={`Straggler verdicts of attempt ${attempt.attempt}`}>
					{attempt.stragglers.map((v, i) => (
						<li key={i} data-testid="straggler"><strong>Straggler on {v.node}</strong>: {stragglerText(v)} ({fmtTime(v.at)})</li>
					))}
				</ul>
			) : null}
			<table class="data">
				<caption>Nodes of attempt {attempt.attempt}</caption>
				<thead>
					<tr><th scope="col">Node</th><th scope="col">Node rank</th><th scope="col">GPUs</th>
						<th scope="col">Exit</th><th scope="col">Failure class</th><th scope="col">Straggler</th>
						{admin ? <th scope="col">Actions</th> : null}</tr>
				</thead>
				<tbody>
					{attempt.nodes.map((n) => {
						const v = byNode.get(n.node);
						return (
							<tr key={n.node} data-node={n.node} class={v ? 'straggler' : undefined}>
								<td>{n.node}</td><td>{n.node_rank}</td><td>{n.gpus.join(', ') || '—'}</td>
								<td>{n.exit_code ?? '—'}</td><td>{n.failure_class ?? '—'}</td>
								<td>{v ? <><strong>straggler</strong>: {stragglerText(v)}</> : '—'}</td>
								{admin ? <td><button type="button" onClick={() => onDrain(n.node)}>Drain {n.node}</button></td> : null}
							</tr>
						);
					})}
				</tbody>
			</table>
			<table class="data">
				<caption>Ranks of attempt {attempt.attempt}</caption>
				<thead>
					<tr><th scope="col">Rank</th><th scope="col">Node</th><th scope="col">Local rank</th>
						<th scope="col">PID</th><th scope="col">Exit</th><th scope="col">Signal</th>
						<th scope="col">Progress</th><th scope="col">Straggler</th></tr>
				</thead>
				<tbody>
					{attempt.ranks.map((r) => {
						const p = progress.get(r.rank);
						const v = byRank.get(r.rank);
						return (
							<tr key={r.rank} data-rank={r.rank} class={v ? 'straggler' : undefined}>
								<td>{r.rank}</td><td>{r.node}</td><td>{r.local_rank}</td><td>{r.pid ?? '—'}</td>
								<td>{r.exit_code ?? (attempt.ended_at ? '—' : 'running')}</td><td>{r.signal ?? '—'}</td>
								<td data-testid="rank-progress">{p ? progressText(p, ref, ended) : '—'}</td>
								<td>{v ? <><strong>straggler</strong>: {stragglerText(v)}</> : '—'}</td>
							</tr>
						);
					})}
				</tbody>
			</table>
		</section>
	);
}

// An attempt's progress in the attempts table: the gang's median, each
// rank's last step, and its straggler verdicts.
function AttemptProgress({ attempt }: { attempt: Attempt }) {
	const progress = attempt.progress ?? [];
	const stragglers = attempt.stragglers ?? [];
	if (!progress.length && !stragglers.length) return <>—</>;
	const ended = !active(attempt);
	const ref = progressRef(attempt);
	const median = gangMedian(progress);
	return (
		<ul class="plain">
			{median !== null ? <li>median {fmtRate(median)} steps/s</li> : null}
			{progress.map((p) => <li key={`p${p.rank}`}>rank {p.rank} on {p.node}: {progressText(p, ref, ended)}</li>)}
			{stragglers.map((v, i) => <li key={`s${i}`} class="alert"><strong>straggler on {v.node}</strong>: {stragglerText(v)}</li>)}
		</ul>
	);
}

const LOG_REFRESH_MS = 3000;

function Log({ id, attempt, live }: { id: number; attempt: Attempt | null; live: boolean }) {
	const [rank, setRank] = useState(0);
	const [text, setText] = useState('');
	const [note, setNote] = useState<string | null>(null);
	const visible = useVisible();
	const ranks = useMemo(() => {
		const n = attempt ? Math.max(attempt.world_size || 0, attempt.ranks.length) : 0;
		return Array.from({ length: Math.max(n, 1) }, (_, i) => i);
	}, [attempt?.attempt, attempt?.world_size, attempt?.ranks.length]);
	const attemptNo = attempt?.attempt ?? null;

	useEffect(() => {
		if (attemptNo === null) return;
		const ctl = new AbortController();
		let timer: ReturnType<typeof setTimeout> | undefined;
		const load = async () => {
			try {
				const t = await api.logs(id, { rank, attempt: attemptNo, tail: 200 }, ctl.signal);
				setText(t);
				setNote(null);
			} catch (e) {
				if (ctl.signal.aborted) return;
				setNote(e instanceof ApiError ? e.detail : String(e));
			}
			if (live && visible && !ctl.signal.aborted) timer = setTimeout(load, LOG_REFRESH_MS);
		};
		load();
		return () => {
			ctl.abort();
			clearTimeout(timer);
		};
	}, [id, rank, attemptNo, live, visible]);

	return (
		<section aria-labelledby="log-h">
			<h2 id="log-h">Log</h2>
			<label for="log-rank">Rank</label>{' '}
			<select id="log-rank" value={rank} onChange={(e) => setRank(Number((e.target as HTMLSelectElement).value))}>
				{ranks.map((r) => <option key={r} value={r}>{r}</option>)}
			</select>
			{note ? <p class="muted">{note}</p> : null}
			{/* focusable so the keyboard can scroll it; a <pre> may carry no aria-label */}
			<pre data-testid="log" class="log" tabIndex={0}>
				{attemptNo === null ? 'No attempt yet.' : text}
			</pre>
		</section>
	);
}

function Metrics({ data }: { data: import('../api').MetricsPage | null }) {
	const chart = useMemo(() => {
		if (!data || !data.items.length) return null;
		const names = [...new Set(data.items.flatMap((i) => Object.keys(i.metrics)))].slice(0, 6);
		return {
			x: data.items.map((i) => i.step),
			series: names.map((n) => ({ label: n, values: data.items.map((i) => i.metrics[n] ?? null) })),
		};
	}, [data]);
	if (!data || !chart) return null;
	return (
		<section aria-labelledby="metrics-h">
			<h2 id="metrics-h">Trial metrics</h2>
			<p>Latest: {Object.entries(data.latest ?? {}).map(([k, v]) => `${k} ${fmtNumber(v, 4)}`).join(', ')}</p>
			<Chart title="Metrics by step" x={chart.x} series={chart.series} time={false} />
		</section>
	);
}
