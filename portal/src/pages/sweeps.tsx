// Sweeps: the list, and a sweep's trials with their objective curves and
// the best trial.
import { useMemo, useRef, useState } from 'preact/hooks';
import { api, type Sweep } from '../api';
import type { PageProps } from '../app';
import { Chart, ErrorNote, JobLink, Pager } from '../components';
import { CursorPager, fmtNumber, fmtTime, parseId } from '../format';
import { useFeed, useLoad, useTick } from '../hooks';

const CURVES_MAX = 20; // objective curves drawn, the first trials'

function states(s: Sweep): string {
	return Object.entries(s.trial_states ?? {}).map(([k, v]) => `${v} ${k}`).join(', ') || '—';
}

export function SweepsPage(_: PageProps) {
	const pager = useRef(new CursorPager());
	const [cursor, setCursor] = useState<string | null>(null);
	const [tick, bump] = useTick();
	const sweeps = useLoad(() => api.sweeps({ limit: 50, cursor }), [cursor, tick]);
	useFeed(bump);
	const items = sweeps.data?.items ?? [];
	return (
		<>
			<h1>Sweeps</h1>
			<ErrorNote error={sweeps.error} />
			<table class="data">
				<caption>Sweeps, newest first</caption>
				<thead>
					<tr><th scope="col">Sweep</th><th scope="col">Name</th><th scope="col">Team</th>
						<th scope="col">State</th><th scope="col">Trials</th><th scope="col">Objective</th>
						<th scope="col">Best</th><th scope="col">Created</th></tr>
				</thead>
				<tbody>
					{items.map((s) => (
						<tr key={s.id} data-sweep={s.id}>
							<td><a href={`#/sweeps/${s.id}`}>{s.id}</a></td>
							<td>{s.name ?? '—'}</td><td>{s.team}</td><td>{s.state}</td>
							<td>{s.trial_count} ({states(s)})</td>
							<td>{s.objective ? `${s.objective.direction} ${s.objective.metric}` : '—'}</td>
							<td>{s.best ? `trial ${s.best.index}: ${fmtNumber(s.best.value, 4)}` : '—'}</td>
							<td>{fmtTime(s.created_at)}</td>
						</tr>
					))}
				</tbody>
			</table>
			{!sweeps.loading && !items.length && !sweeps.error ? <p class="muted">No sweeps.</p> : null}
			<Pager label="Sweep pages" page={pager.current.page} hasPrevious={pager.current.hasPrevious}
				hasNext={!!sweeps.data?.next_cursor}
				onPrevious={() => { pager.current.previous(); setCursor(pager.current.current); }}
				onNext={() => { if (pager.current.next(sweeps.data?.next_cursor ?? null)) setCursor(pager.current.current); }} />
		</>
	);
}

export function SweepPage({ arg }: PageProps) {
	const id = parseId(arg);
	const [tick, bump] = useTick();
	const sweep = useLoad(() => (id === null ? Promise.resolve(null) : api.sweep(id)), [id, tick]);
	useFeed(bump);
	const s = sweep.data;
	const metric = s?.objective?.metric ?? null;
	const trialIds = (s?.trials ?? []).slice(0, CURVES_MAX).map((t) => t.job_id).join(',');
	const curves = useLoad(async () => {
		if (!s || !metric) return null;
		const trials = (s.trials ?? []).slice(0, CURVES_MAX);
		return Promise.all(trials.map((t) => api.metrics(t.job_id, { name: metric, limit: 1000 })
			.then((m) => ({ t, m }), () => ({ t, m: null }))));
	}, [trialIds, metric, tick]);
	const chart = useMemo(() => {
		const list = curves.data ?? [];
		const steps = [...new Set(list.flatMap(({ m }) => (m?.items ?? []).map((i) => i.step)))].sort((a, b) => a - b);
		return {
			x: steps,
			series: list.map(({ t, m }) => {
				const by = new Map((m?.items ?? []).map((i) => [i.step, i.metrics[metric ?? '']]));
				return { label: `trial ${t.index}`, values: steps.map((x) => by.get(x) ?? null) };
			}),
		};
	}, [curves.data]);

	if (id === null || sweep.error?.status === 404) {
		return (<><h1>Sweep {arg}</h1><p class="error">Sweep {arg} not found</p></>);
	}
	return (
		<>
			<h1>Sweep {id}</h1>
			<ErrorNote error={sweep.error} />
			{s ? (
				<>
					<dl class="facts">
						<dt>Name</dt><dd>{s.name ?? '—'}</dd>
						<dt>Team</dt><dd>{s.team}</dd>
						<dt>State</dt><dd>{s.state}</dd>
						<dt>Trials</dt><dd>{s.trial_count} ({states(s)})</dd>
						<dt>Objective</dt><dd>{s.objective ? `${s.objective.direction} ${s.objective.metric}` : 'none'}</dd>
						<dt>Best trial</dt>
						<dd>{s.best ? <>trial {s.best.index} (job <JobLink id={s.best.job_id} />): {s.best.metric} {fmtNumber(s.best.value, 4)} at step {s.best.step}</> : '—'}</dd>
					</dl>
					{metric ? <Chart title={`${metric} by step, per trial`} x={chart.x} series={chart.series} time={false} /> : null}
					<table class="data">
						<caption>Trials</caption>
						<thead>
							<tr><th scope="col">Trial</th><th scope="col">Job</th><th scope="col">State</th>
								<th scope="col">Parameters</th><th scope="col">{metric ?? 'Metrics'}</th></tr>
						</thead>
						<tbody>
							{(s.trials ?? []).map((t) => (
								<tr key={t.index} data-job={t.job_id} class={s.best?.index === t.index ? 'best' : undefined}>
									<td>{t.index}{s.best?.index === t.index ? ' (best)' : ''}</td>
									<td><JobLink id={t.job_id} /></td>
									<td>{t.state}</td>
									<td><code>{JSON.stringify(t.params)}</code></td>
									<td>{metric ? fmtNumber(t.metrics?.[metric], 4)
										: Object.entries(t.metrics ?? {}).map(([k, v]) => `${k} ${fmtNumber(v, 4)}`).join(', ') || '—'}</td>
								</tr>
							))}
						</tbody>
					</table>
				</>
			) : null}
		</>
	);
}
