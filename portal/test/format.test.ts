// The pure helpers: formatting, CSV, the cursor pager, routes, throttling.
import { describe, expect, it, vi } from 'vitest';
import {
	csvField, CursorPager, fmtBytes, fmtDuration, fmtNumber, fmtPercent, fmtTime, isTerminal,
	parseId, parseRoute, throttle, toCsv,
} from '../src/format';
import { buildUrl, problemFrom } from '../src/api';

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
