// Teams: each team's quota and usage now; a team's page adds its usage,
// fair share and preemptions over time (GET /v1/teams/{name}/history).
import { useMemo } from 'preact/hooks';
import { api } from '../api';
import type { PageProps } from '../app';
import { Chart, ErrorNote } from '../components';
import { fmtNumber, fmtTime } from '../format';
import { useFeed, useLoad, useTick } from '../hooks';

export function TeamsPage(_: PageProps) {
	const [tick, bump] = useTick();
	const teams = useLoad(() => api.teams(), [tick]);
	useFeed(bump);
	return (
		<>
			<h1>Teams</h1>
			<ErrorNote error={teams.error} />
			<table class="data">
				<caption>GPUs per team: nominal quota, in use, borrowed from and lent to the cohort</caption>
				<thead>
					<tr><th scope="col">Team</th><th scope="col">Cohort</th><th scope="col">Nominal</th>
						<th scope="col">Used</th><th scope="col">Borrowed</th><th scope="col">Lent</th>
						<th scope="col">Pending jobs</th><th scope="col">Decayed GPU-hours</th><th scope="col">Fair share</th></tr>
				</thead>
				<tbody>
					{(teams.data?.items ?? []).map((t) => (
						<tr key={t.name} data-team={t.name}>
							<td><a href={`#/teams/${encodeURIComponent(t.name)}`}>{t.name}</a></td>
							<td>{t.cohort ?? '—'}</td>
							<td>{t.nominal_gpus}</td>
							<td>{t.usage.gpus_in_use}</td>
							<td>{t.usage.gpus_borrowed}</td>
							<td>{t.usage.gpus_lent}</td>
							<td>{t.usage.pending_jobs}</td>
							<td>{fmtNumber(t.usage.decayed_gpu_hours)}</td>
							<td>{fmtNumber(t.usage.fair_share)}</td>
						</tr>
					))}
				</tbody>
			</table>
		</>
	);
}

export function TeamPage({ arg }: PageProps) {
	const name = arg ?? '';
	const [tick, bump] = useTick();
	const team = useLoad(() => api.team(name), [name, tick]);
	const history = useLoad(() => api.teamHistory(name), [name, tick]);
	useFeed(bump);
	const items = history.data?.items ?? [];
	const x = useMemo(() => items.map((s) => Date.parse(s.at) / 1000), [history.data]);
	const usage = useMemo(() => [{ label: 'decayed GPU-hours', values: items.map((s) => s.decayed_gpu_hours) }], [history.data]);
	const share = useMemo(() => [{ label: 'fair share', values: items.map((s) => s.fair_share) }], [history.data]);
	const gpus = useMemo(() => [
		{ label: 'in use', values: items.map((s) => s.gpus_in_use) },
		{ label: 'borrowed', values: items.map((s) => s.gpus_borrowed) },
		{ label: 'lent', values: items.map((s) => s.gpus_lent) },
	], [history.data]);
	const preemptions = useMemo(() => [
		{ label: 'suffered', values: items.map((s) => s.preemptions_suffered) },
		{ label: 'caused', values: items.map((s) => s.preemptions_caused) },
	], [history.data]);

	if (team.error?.status === 404) {
		return (<><h1>Team {name}</h1><p class="error">Team {name} not found</p></>);
	}
	const t = team.data;
	return (
		<>
			<h1>Team {name}</h1>
			<ErrorNote error={team.error} />
			{t ? (
				<dl class="facts">
					<dt>Nominal GPUs</dt><dd>{t.nominal_gpus}</dd>
					<dt>Borrowing limit</dt><dd>{t.borrowing_limit_gpus ?? 'none'}</dd>
					<dt>Lending limit</dt><dd>{t.lending_limit_gpus ?? 'none'}</dd>
					<dt>Cohort</dt><dd>{t.cohort ?? '—'}</dd>
					<dt>GPUs in use</dt><dd>{t.usage.gpus_in_use} ({t.usage.gpus_borrowed} borrowed, {t.usage.gpus_lent} lent)</dd>
					<dt>Pending jobs</dt><dd>{t.usage.pending_jobs}</dd>
					<dt>Decayed GPU-hours</dt><dd>{fmtNumber(t.usage.decayed_gpu_hours)}</dd>
					<dt>Fair share</dt><dd>{fmtNumber(t.usage.fair_share)}</dd>
				</dl>
			) : null}
			<h2>Over the last 24 hours</h2>
			{history.error && history.error.status !== 404 ? <ErrorNote error={history.error} /> : null}
			{items.length === 0 ? (
				!history.loading ? <p class="muted">No history yet.</p> : null
			) : (
				<>
					<p>Preemptions suffered: <strong>{history.data!.totals.preemptions_suffered}</strong>;
						caused: <strong>{history.data!.totals.preemptions_caused}</strong>.</p>
					<Chart title="Decayed GPU-hours" x={x} series={usage} />
					<Chart title="Fair share" x={x} series={share} />
					<Chart title="GPUs" x={x} series={gpus} />
					<Chart title="Preemptions per sample" x={x} series={preemptions} />
					<table class="data">
						<caption>The {Math.min(items.length, 50)} newest samples, newest first</caption>
						<thead>
							<tr><th scope="col">Time</th><th scope="col">In use</th><th scope="col">Borrowed</th>
								<th scope="col">Lent</th><th scope="col">Pending</th><th scope="col">Fair share</th>
								<th scope="col">Preemptions suffered</th><th scope="col">Preemptions caused</th></tr>
						</thead>
						<tbody>
							{items.slice(-50).reverse().map((s) => (
								<tr key={s.at}>
									<td>{fmtTime(s.at)}</td><td>{s.gpus_in_use}</td><td>{s.gpus_borrowed}</td>
									<td>{s.gpus_lent}</td><td>{s.pending_jobs}</td><td>{fmtNumber(s.fair_share)}</td>
									<td>{s.preemptions_suffered}</td><td>{s.preemptions_caused}</td>
								</tr>
							))}
						</tbody>
					</table>
				</>
			)}
		</>
	);
}
