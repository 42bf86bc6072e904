// Pure helpers: how numbers, times and CSV look, and the cursor pager.
// No DOM here, so the unit tests run them under node.
import type { RankProgress, Straggler } from './api';

export const TERMINAL_STATES = ['succeeded', 'failed', 'cancelled', 'stopped'];
export const JOB_STATES = ['pending', 'scheduled', 'starting', 'running', 'preempting', ...TERMINAL_STATES];

export function isTerminal(state: string): boolean {
	return TERMINAL_STATES.includes(state);
}

export function fmtNumber(v: number | null | undefined, digits = 2): string {
	if (v === null || v === undefined || !Number.isFinite(v)) return '—';
	return Number.isInteger(v) ? String(v) : v.toFixed(digits);
}

export function fmtPercent(ratio: number | null | undefined): string {
	if (ratio === null || ratio === undefined || !Number.isFinite(ratio)) return '—';
	return `${(ratio * 100).toFixed(1)}%`;
}

// "2026-11-22T12:00:00.123Z" → "2026-11-22 12:00:00" (UTC, as the API writes it)
export function fmtTime(t: string | null | undefined): string {
	if (!t) return '—';
	const m = /^(\d{4}-\d\d-\d\d)T(\d\d:\d\d:\d\d)/.exec(t);
	return m ? `${m[1]} ${m[2]}` : t;
}

export function fmtDuration(seconds: number | null | undefined): string {
	if (seconds === null || seconds === undefined || !Number.isFinite(seconds) || seconds < 0) return '—';
	const s = Math.round(seconds);
	if (s < 60) return `${s}s`;
	const m = Math.floor(s / 60);
	if (m < 60) return `${m}m ${s % 60}s`;
	const h = Math.floor(m / 60);
	if (h < 48) return `${h}h ${m % 60}m`;
	return `${Math.floor(h / 24)}d ${h % 24}h`;
}

export function fmtBytes(b: number | null | undefined): string {
	if (b === null || b === undefined || !Number.isFinite(b)) return '—';
	const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
	let v = b;
	let i = 0;
	while (v >= 1024 && i < units.length - 1) {
		v /= 1024;
		i++;
	}
	return i === 0 ? `${v} B` : `${v.toFixed(1)} ${units[i]}`;
}

// RFC 4180: a field with a comma, quote, CR or LF is quoted, quotes doubled;
// CRLF line ends, as the API's own CSV.
export function csvField(v: unknown): string {
	const s = v === null || v === undefined ? '' : String(v);
	return /[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

export function toCsv(columns: string[], rows: Record<string, unknown>[]): string {
	const lines = [columns.map(csvField).join(',')];
	for (const r of rows) lines.push(columns.map((c) => csvField(r[c])).join(','));
	return lines.join('\r\n') + '\r\n';
}

// The cursors of the pages before the current one: the API's cursors only go
// forward, so going back replays the cursor that led to the previous page.
export class CursorPager {
	private stack: (string | null)[] = [];
	current: string | null = null;

	get page(): number {
		return this.stack.length + 1;
	}
	get hasPrevious(): boolean {
		return this.stack.length > 0;
	}
	next(nextCursor: string | null): boolean {
		if (!nextCursor) return false;
		this.stack.push(this.current);
		this.current = nextCursor;
		return true;
	}
	previous(): boolean {
		if (!this.stack.length) return false;
		this.current = this.stack.pop() ?? null;
		return true;
	}
	reset(): void {
		this.stack = [];
		this.current = null;
	}
}

// Hash routes: "#/jobs/42" → {page: "jobs", arg: "42"}.
export interface Route { page: string; arg: string | null }
export const PAGES = ['login', 'queue', 'jobs', 'teams', 'nodes', 'usage', 'sweeps'];

export function parseRoute(hash: string): Route {
	const parts = hash.replace(/^#\/?/, '').split('/').filter((p) => p !== '');
	const page = parts[0] ?? 'queue';
	if (!PAGES.includes(page)) return { page: 'notfound', arg: null };
	let arg: string | null = null;
	if (parts.length > 1) {
		try {
			arg = decodeURIComponent(parts.slice(1).join('/'));
		} catch {
			return { page: 'notfound', arg: null };
		}
	}
	if (arg !== null && !['jobs', 'teams', 'sweeps'].includes(page)) return { page: 'notfound', arg: null };
	return { page, arg };
}

// A positive integer id from a route, or null.
export function parseId(s: string | null): number | null {
	if (s === null || !/^[1-9][0-9]{0,15}$/.test(s)) return null;
	return Number(s);
}

// Wait at least `minMs` between two runs of `fn`, however often it is asked
// for: list pages refresh on every event of the feed, at most this often.
export function throttle(fn: () => void, minMs: number, now: () => number = Date.now): {
	(): void; cancel(): void;
} {
	let last = -Infinity;
	let timer: ReturnType<typeof setTimeout> | null = null;
	const run = () => {
		timer = null;
		last = now();
		fn();
	};
	const t = () => {
		if (timer !== null) return;
		const wait = last + minMs - now();
		if (wait <= 0) run();
		else timer = setTimeout(run, wait);
	};
	t.cancel = () => {
		if (timer !== null) clearTimeout(timer);
		timer = null;
	};
	return t;
}

// A rate as the scheduler's messages write it (%.3g): 2.1, 0.833, 1230.
export function fmtRate(v: number | null | undefined): string {
	if (v === null || v === undefined || !Number.isFinite(v)) return '—';
	return String(Number(v.toPrecision(3)));
}

// The gang's median step rate as the scheduler judges stragglers against it
// (docs/dispatch.md, "Stragglers"): the upper median of the ranks with a
// known rate, none with fewer than two.
export function gangMedian(progress: RankProgress[] | null | undefined): number | null {
	const rates = (progress ?? [])
		.map((p) => p.steps_per_second)
		.filter((r): r is number => typeof r === 'number' && Number.isFinite(r))
		.sort((a, b) => a - b);
	return rates.length < 2 ? null : rates[Math.floor(rates.length / 2)];
}

// A running gang none of whose ranks' steps advanced for this long is shown
// as stalled: a minute is the executor's rate window, after which every
// rank's rate reads 0. The hang timeout, not the page, decides what is done.
export const STALL_SECONDS = 60;
// ...or for this many of its usual steps, when a step takes longer than
// STALL_SECONDS / STALL_STEPS: its mean step time since it started running.
export const STALL_STEPS = 3;

// Seconds since the gang's newest step change at `nowMs` when that is at
// least STALL_SECONDS and STALL_STEPS of its mean step time (from
// `runningAtMs`, when known), else null (no progress yet is not a stall).
export function gangStalledFor(progress: RankProgress[] | null | undefined, nowMs: number,
	runningAtMs: number | null = null): number | null {
	if (!progress || !progress.length) return null;
	const newest = Math.max(...progress.map((p) => p.step_at));
	const steps = Math.max(...progress.map((p) => p.step));
	const idle = (nowMs - newest) / 1000;
	let bound = STALL_SECONDS;
	if (runningAtMs !== null && Number.isFinite(runningAtMs) && steps > 0 && newest > runningAtMs)
		bound = Math.max(bound, STALL_STEPS * (newest - runningAtMs) / 1000 / steps);
	return idle >= bound ? idle : null;
}

// "step 1200, 2.1 steps/s, 512 samples/s, advanced 3s ago": the rates when
// known; for an attempt that ended, how long before its end the step last
// advanced. The node's clock and the browser's may differ: never below 0.
export function progressText(p: RankProgress, refMs: number, ended = false): string {
	const parts = [`step ${p.step}`];
	if (p.steps_per_second != null) parts.push(`${fmtRate(p.steps_per_second)} steps/s`);
	if (p.samples_per_second != null) parts.push(`${fmtRate(p.samples_per_second)} samples/s`);
	const ago = fmtDuration(Math.max(0, (refMs - p.step_at) / 1000));
	parts.push(ended ? `advanced ${ago} before the attempt ended` : `advanced ${ago} ago`);
	return parts.join(', ');
}

// A straggler verdict's evidence, as the scheduler's event and node
// condition word it.
export function stragglerText(v: Straggler): string {
	return `rank ${v.rank} at ${fmtRate(v.steps_per_second)} steps/s against the gang's median ${fmtRate(v.median)}`;
}
