// Nodes: state, fault and conditions, GPUs free per pool, running jobs;
// drain and undrain for admins. Nodes change without job events: polled.
import { useState } from 'preact/hooks';
import { api, ApiError } from '../api';
import type { PageProps } from '../app';
import { ConfirmDialog, ErrorNote, JobLink } from '../components';
import { fmtTime } from '../format';
import { useInterval, useLoad, useTick } from '../hooks';

const NODES_POLL_MS = 5000;

export function NodesPage({ who }: PageProps) {
	const [tick, bump] = useTick();
	const nodes = useLoad(() => api.nodes(), [tick]);
	useInterval(bump, NODES_POLL_MS);
	const [action, setAction] = useState<{ kind: 'drain' | 'undrain'; node: string } | null>(null);
	const [result, setResult] = useState<{ ok: boolean; text: string } | null>(null);
	const admin = who.role === 'admin';
	const items = nodes.data?.items ?? [];

	const pools = new Map<string, { free: number; total: number; nodes: number }>();
	for (const n of items) {
		const pool = n.labels?.pool ?? 'on-demand';
		const p = pools.get(pool) ?? { free: 0, total: 0, nodes: 0 };
		p.free += n.gpus_free;
		p.total += n.gpus_total;
		p.nodes++;
		pools.set(pool, p);
	}

	async function run(a: { kind: 'drain' | 'undrain'; node: string }) {
		setAction(null);
		try {
			const n = a.kind === 'drain' ? await api.drainNode(a.node) : await api.undrainNode(a.node);
			setResult({ ok: true, text: `Node ${a.node} is ${n.state}` });
		} catch (e) {
			if (e instanceof ApiError && e.status !== 0) setResult({ ok: false, text: e.detail });
		}
		bump();
	}

	return (
		<>
			<h1>Nodes</h1>
			<ErrorNote error={nodes.error} />
			{result ? <p role="status" class={result.ok ? '' : 'error'}>{result.text}</p> : null}
			<table class="data">
				<caption>GPUs free per pool</caption>
				<thead><tr><th scope="col">Pool</th><th scope="col">Nodes</th><th scope="col">GPUs free / total</th></tr></thead>
				<tbody>
					{[...pools.entries()].sort().map(([pool, p]) => (
						<tr key={pool}><td>{pool}</td><td>{p.nodes}</td><td>{p.free} / {p.total}</td></tr>
					))}
				</tbody>
			</table>
			<table class="data">
				<caption>Nodes</caption>
				<thead>
					<tr><th scope="col">Node</th><th scope="col">Pool</th><th scope="col">State</th>
						<th scope="col">Fault and conditions</th><th scope="col">GPUs free / total</th>
						<th scope="col">Running jobs</th><th scope="col">Last heartbeat</th>
						{admin ? <th scope="col">Actions</th> : null}</tr>
				</thead>
				<tbody>
					{items.map((n) => {
						const drained = n.state === 'draining' || n.state === 'drained' || n.drain_reason !== null;
						return (
							<tr key={n.id} data-node={n.id}>
								<td>{n.id}<br /><span class="muted">{n.address}</span></td>
								<td>{n.labels?.pool ?? 'on-demand'}</td>
								<td><span data-testid="node-state" class={`state state-${n.state}`}>{n.state}</span>
									{n.drain_reason ? <><br /><span class="muted">{n.drain_reason}</span></> : null}</td>
								<td>
									{n.fault ? <p class="error">{n.fault}</p> : null}
									{n.conditions?.length ? (
										<ul class="plain">
											{n.conditions.map((c, i) => <li key={i}>{c.severity} {c.kind}{c.evidence ? `: ${c.evidence}` : ''}</li>)}
										</ul>
									) : (n.fault ? null : '—')}
								</td>
								<td>{n.gpus_free} / {n.gpus_total}</td>
								<td>{n.running?.length ? n.running.map((r, i) => <span key={r.job}>{i ? ', ' : ''}<JobLink id={r.job} /></span>) : '—'}</td>
								<td>{fmtTime(n.last_heartbeat)}</td>
								{admin ? (
									<td>
										{drained
											? <button type="button" onClick={() => { setResult(null); setAction({ kind: 'undrain', node: n.id }); }}>Undrain {n.id}</button>
											: <button type="button" onClick={() => { setResult(null); setAction({ kind: 'drain', node: n.id }); }}>Drain {n.id}</button>}
									</td>
								) : null}
							</tr>
						);
					})}
				</tbody>
			</table>
			<ConfirmDialog open={action !== null} onClose={() => setAction(null)} onConfirm={() => action && run(action)}
				title={action ? `${action.kind === 'drain' ? 'Drain' : 'Undrain'} node ${action.node}` : ''}>
				<p>{action?.kind === 'drain'
					? 'No new work will be placed on it; jobs running there keep running.'
					: 'It takes new work again, and its failure count starts over.'}</p>
			</ConfirmDialog>
		</>
	);
}
