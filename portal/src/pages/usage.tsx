// Usage: GPU-hours and cost by team, pool and day, and the goodput split,
// over a chosen range; CSV exports (the API's for the split, built here
// from the JSON for the others).
import { useMemo, useState } from 'preact/hooks';
import { api, ApiError, type Usage } from '../api';
import type { PageProps } from '../app';
import { Chart, download, ErrorNote } from '../components';
import { fmtNumber, toCsv } from '../format';
import { useLoad } from '../hooks';

const RANGES = [7, 30, 90];
const COLUMNS = ['gpu_hours', 'idle_gpu_hours', 'cost', 'lost_gpu_seconds', 'attempts', 'running_attempts'];
// the goodput categories in proto/goodput.h's order (the API's `<category>_gpu_hours` members)
const SPLIT = ['useful', 'checkpoint', 'idle', 'lost_preemption', 'lost_user', 'lost_infra', 'hang', 'straggler'];

export function UsagePage(_: PageProps) {
	const [days, setDays] = useState(30);
	const [exportError, setExportError] = useState<string | null>(null);
	const range = useMemo(() => {
		const to = new Date();
		return { from: new Date(to.getTime() - days * 86400e3).toISOString(), to: to.toISOString() };
	}, [days]);
	const byTeam = useLoad(() => api.usage({ ...range, group_by: 'team' }), [range]);
	const byPool = useLoad(() => api.usage({ ...range, group_by: 'pool' }), [range]);
	const byDay = useLoad(() => api.usage({ ...range, group_by: 'day' }), [range]);
	const split = useLoad(() => api.usage({ ...range, split: 'goodput' }), [range]);

	const dayChart = useMemo(() => {
		const items = byDay.data?.items ?? [];
		return {
			range: [Date.parse(range.from) / 1000, Date.parse(range.to) / 1000] as [number, number],
			x: items.map((i) => Date.parse(`${i.day}T00:00:00Z`) / 1000),
			hours: [{ label: 'GPU-hours', values: items.map((i) => Number(i.gpu_hours)) },
				{ label: 'idle GPU-hours', values: items.map((i) => Number(i.idle_gpu_hours)) }],
			cost: [{ label: 'cost', values: items.map((i) => Number(i.cost)) }],
		};
	}, [byDay.data]);

	async function exportSplit() {
		setExportError(null);
		try {
			download(await api.usageCsv({ ...range, split: 'goodput' }), `trainyard-goodput-${days}d.csv`);
		} catch (e) {
			if (e instanceof ApiError && e.status !== 0) setExportError(e.detail);
		}
	}

	return (
		<>
			<h1>Usage</h1>
			<form class="filters" onSubmit={(e) => e.preventDefault()}>
				<label for="usage-range">Range</label>
				<select id="usage-range" value={days} onChange={(e) => setDays(Number((e.target as HTMLSelectElement).value))}>
					{RANGES.map((d) => <option key={d} value={d}>last {d} days</option>)}
				</select>
				<button type="button" onClick={exportSplit}>Export CSV</button>
			</form>
			{exportError ? <p class="error">{exportError}</p> : null}

			<h2>By day</h2>
			<ErrorNote error={byDay.error} />
			<Chart title="GPU-hours per day" x={dayChart.x} series={dayChart.hours} xRange={dayChart.range} />
			<Chart title="Cost per day" x={dayChart.x} series={dayChart.cost} xRange={dayChart.range} />
			<UsageTable title="Usage per day" keyName="day" data={byDay.data} />

			<h2>By team</h2>
			<ErrorNote error={byTeam.error} />
			<UsageTable title="Usage per team" keyName="team" data={byTeam.data} />

			<h2>By pool</h2>
			<ErrorNote error={byPool.error} />
			<UsageTable title="Usage per pool" keyName="pool" data={byPool.data} />

			<h2>Goodput split</h2>
			<ErrorNote error={split.error} />
			<table class="data">
				<caption>GPU-hours per goodput category, by team and pool, of attempts that ended in the range</caption>
				<thead>
					<tr><th scope="col">Team</th><th scope="col">Pool</th><th scope="col">GPU-hours</th>
						{SPLIT.map((c) => <th scope="col" key={c}>{c.replace(/_/g, ' ')}</th>)}
						<th scope="col">Cost</th></tr>
				</thead>
				<tbody>
					{(split.data?.items ?? []).map((i) => (
						<tr key={`${i.team}/${i.pool}`}>
							<td>{i.team}</td><td>{i.pool}</td><td>{fmtNumber(Number(i.gpu_hours))}</td>
							{SPLIT.map((c) => <td key={c}>{fmtNumber(Number(i[`${c}_gpu_hours`]))}</td>)}
							<td>{fmtNumber(Number(i.cost))}</td>
						</tr>
					))}
				</tbody>
			</table>
		</>
	);
}

function UsageTable({ title, keyName, data }: { title: string; keyName: string; data: Usage | null }) {
	const items = data?.items ?? [];
	return (
		<>
			<table class="data">
				<caption>{title}</caption>
				<thead>
					<tr><th scope="col">{keyName}</th>{COLUMNS.map((c) => <th scope="col" key={c}>{c.replace(/_/g, ' ')}</th>)}</tr>
				</thead>
				<tbody>
					{items.map((i) => (
						<tr key={String(i[keyName])}>
							<td>{i[keyName]}</td>
							{COLUMNS.map((c) => <td key={c}>{fmtNumber(Number(i[c]))}</td>)}
						</tr>
					))}
				</tbody>
				{data ? (
					<tfoot>
						<tr><th scope="row">total</th>{COLUMNS.map((c) => <td key={c}>{fmtNumber(data.totals[c])}</td>)}</tr>
					</tfoot>
				) : null}
			</table>
			<button type="button" disabled={!items.length}
				onClick={() => download(new Blob([toCsv([keyName, ...COLUMNS], items)], { type: 'text/csv' }),
					`trainyard-usage-by-${keyName}.csv`)}>
				Export {keyName} table
			</button>
		</>
	);
}
