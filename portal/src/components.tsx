// Small pieces several pages use: the confirmation dialog, errors, charts,
// the pager's buttons, CSV downloads.
import type { ComponentChildren } from 'preact';
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import type { ApiError } from './api';

// A problem's detail; the field it names, when the detail does not.
export function ErrorNote({ error }: { error: ApiError | null }) {
	if (!error) return null;
	const field = error.field && !error.detail.includes(error.field) ? ` (field '${error.field}')` : '';
	return <p class="error">{error.detail}{field}</p>;
}

export function Loading({ show }: { show: boolean }) {
	return show ? <p class="muted">Loading…</p> : null;
}

// A modal <dialog>: "Confirm" runs the action, "Close" or Escape closes it.
export function ConfirmDialog(props: {
	open: boolean;
	title: string;
	children?: ComponentChildren;
	onConfirm: () => void;
	onClose: () => void;
}) {
	const ref = useRef<HTMLDialogElement>(null);
	useEffect(() => {
		const d = ref.current;
		if (!d) return;
		if (props.open && !d.open) d.showModal();
		if (!props.open && d.open) d.close();
	}, [props.open]);
	return (
		<dialog ref={ref} aria-labelledby="confirm-title" onClose={props.onClose}>
			<h2 id="confirm-title">{props.title}</h2>
			{props.children}
			<div class="actions">
				<button type="button" class="danger" onClick={() => props.onConfirm()}>Confirm</button>
				<button type="button" onClick={() => props.onClose()}>Close</button>
			</div>
		</dialog>
	);
}

export function Pager(props: { page: number; hasPrevious: boolean; hasNext: boolean;
	onPrevious: () => void; onNext: () => void; label: string }) {
	return (
		<nav class="pager" aria-label={props.label}>
			<button type="button" disabled={!props.hasPrevious} onClick={props.onPrevious}>Previous page</button>
			<span>Page {props.page}</span>
			<button type="button" disabled={!props.hasNext} onClick={props.onNext}>Next page</button>
		</nav>
	);
}

export interface Series { label: string; values: (number | null)[] }

// A uPlot line chart of series over x (seconds since the epoch when `time`).
// `xRange` fixes the x axis (a range of days), else uPlot fits it to the data.
export function Chart(props: { title: string; x: number[]; series: Series[]; time?: boolean; height?: number;
	xRange?: [number, number] }) {
	const box = useRef<HTMLDivElement>(null);
	useEffect(() => {
		const el = box.current;
		if (!el || props.x.length === 0) return;
		const colors = ['#1f5fa8', '#b3411f', '#2f7d32', '#7b3fa0', '#8a6d00', '#00707a'];
		const plot = new uPlot(
			{
				width: Math.max(320, el.clientWidth || 640),
				height: props.height ?? 240,
				scales: { x: props.xRange ? { time: props.time ?? true, range: props.xRange } : { time: props.time ?? true } },
				series: [{ label: props.time === false ? 'step' : 'time' }, ...props.series.map((s, i) => ({
					label: s.label, stroke: colors[i % colors.length], width: 2, spanGaps: true,
				}))],
			},
			[props.x, ...props.series.map((s) => s.values)] as uPlot.AlignedData,
			el,
		);
		return () => plot.destroy();
	}, [props.x, props.series, props.xRange?.[0], props.xRange?.[1]]);
	return (
		<figure class="chart">
			<figcaption>{props.title}</figcaption>
			{props.x.length === 0 ? <p class="muted">No data yet</p> : <div ref={box} />}
		</figure>
	);
}

export function download(blob: Blob, filename: string): void {
	const url = URL.createObjectURL(blob);
	const a = document.createElement('a');
	a.href = url;
	a.download = filename;
	document.body.appendChild(a);
	a.click();
	a.remove();
	setTimeout(() => URL.revokeObjectURL(url), 1000);
}

export function JobLink({ id }: { id: number | null }) {
	return id === null ? <span class="muted">hidden</span> : <a href={`#/jobs/${id}`}>{id}</a>;
}
