// Pure helpers: how numbers, times and CSV look, and the cursor pager.
// No DOM here, so the unit tests run them under node.

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
