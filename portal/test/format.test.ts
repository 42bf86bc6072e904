// The pure helpers: formatting, CSV, the cursor pager, routes, throttling,
// training progress.
import { describe, expect, it, vi } from 'vitest';
import {
	csvField, CursorPager, fmtBytes, fmtDuration, fmtNumber, fmtPercent, fmtRate, fmtTime, gangMedian,
	gangStalledFor, isTerminal, parseId, parseRoute, progressText, STALL_SECONDS, stragglerText, throttle, toCsv,
} from '../src/format';
import { buildUrl, problemFrom, type RankProgress } from '../src/api';

describe('format', () => {
	it('numbers, percentages and missing values', () => {
		expect(fmtNumber(3)).toBe('3');
		expect(fmtNumber(0.71234)).toBe('0.71');
		expect(fmtNumber(null)).toBe('—');
		expect(fmtNumber(Number.NaN)).toBe('—');
		expect(fmtPercent(0.3889)).toBe('38.9%');
		expect(fmtPercent(undefined)).toBe('—');
	});
	it('times as the API writes them, in UTC', () => {
		expect(fmtTime('2026-11-22T12:00:00.123Z')).toBe('2026-11-22 12:00:00');
		expect(fmtTime(null)).toBe('—');
		expect(fmtTime('not a time')).toBe('not a time');
	});
	it('durations and sizes', () => {
		expect(fmtDuration(42)).toBe('42s');
		expect(fmtDuration(125)).toBe('2m 5s');
		expect(fmtDuration(3 * 3600 + 60)).toBe('3h 1m');
		expect(fmtDuration(50 * 3600)).toBe('2d 2h');
		expect(fmtDuration(-1)).toBe('—');
		expect(fmtBytes(512)).toBe('512 B');
		expect(fmtBytes(1536)).toBe('1.5 KiB');
	});
	it('terminal states', () => {
		expect(isTerminal('stopped')).toBe(true);
		expect(isTerminal('preempting')).toBe(false);
	});
});

describe('csv', () => {
	it('quotes only what needs it, doubling quotes', () => {
		expect(csvField('plain')).toBe('plain');
		expect(csvField('a,b')).toBe('"a,b"');
		expect(csvField('say "hi"')).toBe('"say ""hi"""');
		expect(csvField('two\nlines')).toBe('"two\nlines"');
		expect(csvField(null)).toBe('');
		expect(csvField(0)).toBe('0');
	});
	it('builds a header and one CRLF line per row, in column order', () => {
		const csv = toCsv(['team', 'gpu_hours'], [{ gpu_hours: 1.5, team: 'ml' }, { team: 'a,b' }]);
		expect(csv).toBe('team,gpu_hours\r\nml,1.5\r\n"a,b",\r\n');
	});
});

describe('CursorPager', () => {
	it('goes forward with the API cursor and back to the cursor before', () => {
		const p = new CursorPager();
		expect(p.page).toBe(1);
		expect(p.hasPrevious).toBe(false);
		expect(p.next(null)).toBe(false); // the last page
		expect(p.next('c2')).toBe(true);
		expect(p.next('c3')).toBe(true);
		expect([p.page, p.current]).toEqual([3, 'c3']);
		expect(p.previous()).toBe(true);
		expect([p.page, p.current]).toEqual([2, 'c2']);
		expect(p.previous()).toBe(true);
		expect([p.page, p.current]).toEqual([1, null]);
		expect(p.previous()).toBe(false);
		p.next('x');
		p.reset();
		expect([p.page, p.current, p.hasPrevious]).toEqual([1, null, false]);
	});
});

describe('routes', () => {
	it('parses the contract routes', () => {
		expect(parseRoute('')).toEqual({ page: 'queue', arg: null });
		expect(parseRoute('#/')).toEqual({ page: 'queue', arg: null });
		expect(parseRoute('#/login')).toEqual({ page: 'login', arg: null });
		expect(parseRoute('#/jobs/42')).toEqual({ page: 'jobs', arg: '42' });
		expect(parseRoute('#/teams/ml-research')).toEqual({ page: 'teams', arg: 'ml-research' });
		expect(parseRoute('#/sweeps/7')).toEqual({ page: 'sweeps', arg: '7' });
	});
	it('refuses what no page has', () => {
		expect(parseRoute('#/nope').page).toBe('notfound');
		expect(parseRoute('#/nodes/node-a').page).toBe('notfound');
		expect(parseRoute('#/jobs/%E0%A4%A').page).toBe('notfound');
	});
	it('ids are positive integers', () => {
		expect(parseId('42')).toBe(42);
		expect(parseId('0')).toBeNull();
		expect(parseId('-1')).toBeNull();
		expect(parseId('4x')).toBeNull();
		expect(parseId(null)).toBeNull();
	});
});

describe('api helpers', () => {
	it('leaves empty query parameters out and encodes the rest', () => {
		expect(buildUrl('/v1/jobs', { q: '', state: undefined, limit: 50 })).toBe('/v1/jobs?limit=50');
		expect(buildUrl('/v1/jobs', { q: 'a b&c' })).toBe('/v1/jobs?q=a%20b%26c');
		expect(buildUrl('/v1/nodes')).toBe('/v1/nodes');
	});
	it('reads a problem document, and survives one that is not', () => {
		const e = problemFrom(422, 'Unprocessable', JSON.stringify({
			code: 'invalid_field', detail: "'limit' must be 1 to 500", field: 'limit' }));
		expect([e.status, e.code, e.detail, e.field]).toEqual([422, 'invalid_field', "'limit' must be 1 to 500", 'limit']);
		const h = problemFrom(502, 'Bad Gateway', '<html>');
		expect([h.status, h.code, h.detail]).toEqual([502, 'http_error', '502 Bad Gateway']);
	});
});

describe('throttle', () => {
	it('runs at once, then at most once per interval however often asked', () => {
		vi.useFakeTimers();
		let now = 0;
		let runs = 0;
		const t = throttle(() => runs++, 1000, () => now);
		t();
		expect(runs).toBe(1);
		t();
		t();
		expect(runs).toBe(1);
		now = 1000;
		vi.advanceTimersByTime(1000);
		expect(runs).toBe(2);
		t.cancel();
		vi.useRealTimers();
	});
});

describe('progress', () => {
	const T = 1_764_000_000_000;
	const rank = (r: number, step: number, sps: number | null | undefined, at = T, samples?: number | null): RankProgress =>
		({ rank: r, node: `n${r}`, step, steps_per_second: sps, samples_per_second: samples, step_at: at });

	it('rates as the scheduler writes them', () => {
		expect(fmtRate(2.1)).toBe('2.1');
		expect(fmtRate(0.83333)).toBe('0.833');
		expect(fmtRate(10)).toBe('10');
		expect(fmtRate(0)).toBe('0');
		expect(fmtRate(null)).toBe('—');
	});
	it('a rank\'s step, its rates when given, and how long ago it advanced', () => {
		expect(progressText(rank(0, 1200, 2.1, T - 3000, 512.5), T)).toBe('step 1200, 2.1 steps/s, 513 samples/s, advanced 3s ago');
		// an unknown rate (null or absent) and no samples figure are left out
		expect(progressText(rank(1, 7, null), T)).toBe('step 7, advanced 0s ago');
		expect(progressText(rank(1, 7, undefined, T - 125_000), T)).toBe('step 7, advanced 2m 5s ago');
		// a node clock ahead of the browser's is not a step in the future
		expect(progressText(rank(1, 7, 0.5, T + 5000), T)).toBe('step 7, 0.5 steps/s, advanced 0s ago');
		expect(progressText(rank(1, 7, 0, T - 12_000), T, true)).toBe('step 7, 0 steps/s, advanced 12s before the attempt ended');
	});
	it('the gang\'s median is the upper median of the known rates, none with fewer than two', () => {
		expect(gangMedian(null)).toBe(null);
		expect(gangMedian([rank(0, 1, 2)])).toBe(null);
		expect(gangMedian([rank(0, 1, 2), rank(1, 1, null)])).toBe(null);
		expect(gangMedian([rank(0, 1, 0.8), rank(1, 1, 2.1)])).toBe(2.1);
		expect(gangMedian([rank(0, 1, 3), rank(1, 1, 1), rank(2, 1, 2)])).toBe(2);
		expect(gangMedian([rank(0, 1, 4), rank(1, 1, 1), rank(2, 1, 2), rank(3, 1, 3)])).toBe(3);
	});
	it('a gang is stalled when no rank\'s step advanced for STALL_SECONDS', () => {
		const S = STALL_SECONDS * 1000;
		expect(gangStalledFor(null, T)).toBe(null);
		expect(gangStalledFor([], T)).toBe(null);
		expect(gangStalledFor([rank(0, 5, 0, T - S + 1)], T)).toBe(null);
		expect(gangStalledFor([rank(0, 5, 0, T - S)], T)).toBe(STALL_SECONDS);
		// one rank still stepping is no stall of the gang
		expect(gangStalledFor([rank(0, 5, 0, T - 10 * S), rank(1, 9, 1, T - 1000)], T)).toBe(null);
		expect(gangStalledFor([rank(0, 5, 0, T - 3 * S), rank(1, 9, 0, T - 2 * S)], T)).toBe(2 * STALL_SECONDS);
	});
	it('a gang whose steps take minutes is stalled only after STALL_STEPS of them', () => {
		const M = 60_000;
		// 4 steps in the 20 minutes since it started running: 5 minutes a step
		const slow = [rank(0, 4, 0, T - 2 * M), rank(1, 4, 0, T - 2 * M)];
		expect(gangStalledFor(slow, T, T - 22 * M)).toBe(null);
		expect(gangStalledFor(slow, T + 12 * M, T - 22 * M)).toBe(null);
		expect(gangStalledFor(slow, T + 13 * M, T - 22 * M)).toBe(15 * 60);
		// fast steps: the minute still holds; no running time known: the minute
		expect(gangStalledFor([rank(0, 600, 0, T - M)], T, T - 11 * M)).toBe(60);
		expect(gangStalledFor(slow, T, null)).toBe(120);
		// no step yet, or a start after the newest step (clocks apart): the minute
		expect(gangStalledFor([rank(0, 0, 0, T - M)], T, T - 30 * M)).toBe(60);
		expect(gangStalledFor(slow, T, T)).toBe(120);
	});
	it('a straggler verdict\'s evidence, as the scheduler words it', () => {
		expect(stragglerText({ rank: 3, node: 'n3', steps_per_second: 0.8, median: 2.1, attempt: 1, at: '2026-11-22T12:00:00Z' }))
			.toBe("rank 3 at 0.8 steps/s against the gang's median 2.1");
	});
});
