// The what-if form's pure part: the form into a spec, an answer in words.
import { describe, expect, it } from 'vitest';
import {
	askedText, estimateText, formFieldOf, runtimeSourceText, waitsForUnlisted, WHAT_IF_COMMAND, whatIfSpec,
	type WhatIfForm,
} from '../src/whatif';

const form = (o: Partial<WhatIfForm> = {}): WhatIfForm => ({
	team: 'ml', nodes: '2', gpusPerNode: '8', maxRuntimeHours: '', priorityClass: 'normal',
	spot: false, topology: '', ...o,
});

describe('whatIfSpec', () => {
	it('turns the form into a job spec with only the fields it sets', () => {
		expect(whatIfSpec(form())).toEqual({
			spec: {
				team: 'ml', command: WHAT_IF_COMMAND, resources: { nodes: 2, gpus_per_node: 8 },
				priority_class: 'normal', spot: { allowed: false },
			},
		});
	});
	it('adds the max runtime in whole seconds, spot and the topology when set', () => {
		const r = whatIfSpec(form({ maxRuntimeHours: ' 1.5 ', spot: true, topology: 'rack', priorityClass: 'high' }));
		expect(r.spec).toMatchObject({
			max_runtime_seconds: 5400, spot: { allowed: true }, topology: { required: 'rack' }, priority_class: 'high',
		});
		expect(whatIfSpec(form({ maxRuntimeHours: '0.0001' })).spec?.max_runtime_seconds).toBe(0); // the API's 422
	});
	it('leaves the limits to the API: 0 nodes is sent as 0', () => {
		expect(whatIfSpec(form({ nodes: '0' })).spec?.resources).toEqual({ nodes: 0, gpus_per_node: 8 });
		expect(whatIfSpec(form({ gpusPerNode: '65' })).spec?.resources).toEqual({ nodes: 2, gpus_per_node: 65 });
	});
	it('refuses what is not a number, naming the field', () => {
		expect(whatIfSpec(form({ nodes: '' }))).toEqual({
			error: "Nodes must be a whole number, not ''", field: 'resources.nodes',
		});
		expect(whatIfSpec(form({ nodes: '1.5' })).field).toBe('resources.nodes');
		expect(whatIfSpec(form({ gpusPerNode: 'x' })).field).toBe('resources.gpus_per_node');
		expect(whatIfSpec(form({ maxRuntimeHours: '-1' })).field).toBe('max_runtime_seconds');
		expect(whatIfSpec(form({ maxRuntimeHours: '1e3' })).field).toBe('max_runtime_seconds');
		expect(whatIfSpec(form({ team: '' }))).toEqual({ error: 'Choose a team', field: 'team' });
	});
	it('maps the API problem\'s field to the form\'s input', () => {
		expect(formFieldOf('resources.nodes')).toBe('nodes');
		expect(formFieldOf('max_runtime_seconds')).toBe('maxRuntimeHours');
		expect(formFieldOf('command')).toBe(null);
		expect(formFieldOf(undefined)).toBe(null);
	});
	it('says what was asked', () => {
		expect(askedText(form())).toBe('2 nodes × 8 GPUs for team ml, normal');
		expect(askedText(form({ nodes: '1', gpusPerNode: '1', spot: true, topology: 'block', maxRuntimeHours: '2' })))
			.toBe('1 node × 1 GPU for team ml, normal, at most 2 h, spot allowed, one block');
	});
});

describe('estimateText', () => {
	const base = { estimated_start: null, starts_now: false, reason: null };
	it('now', () => {
		expect(estimateText({ ...base, starts_now: true, estimate: { kind: 'now' } })).toBe('now');
	});
	it('a time, and how far from the scheduler\'s clock', () => {
		const a = { ...base, estimated_start: '2026-11-27T15:00:00.000Z', estimate: { kind: 'estimated' as const } };
		expect(estimateText(a)).toBe('2026-11-27 15:00:00');
		expect(estimateText(a, Date.parse('2026-11-27T14:00:00Z'))).toBe('2026-11-27 15:00:00 (in 1h 0m)');
		expect(estimateText(a, Date.parse('2026-11-27T16:00:00Z'))).toBe('2026-11-27 15:00:00 (in 0s)');
		expect(estimateText({ ...a, estimated_start: null })).toBe('estimated, without a time');
	});
	it('never, with its reason', () => {
		expect(estimateText({ ...base, reason: 'cannot run: no node has 3 GPUs', estimate: { kind: 'never' } }))
			.toBe('never: cannot run: no node has 3 GPUs');
		expect(estimateText({ ...base, estimate: { kind: 'never' } })).toBe('never');
	});
	it('beyond the horizon and not estimated, in words', () => {
		expect(estimateText({ ...base, estimate: { kind: 'beyond_horizon', horizon: '2026-12-04T00:00:00Z' } }))
			.toBe("not before 2026-12-04 00:00:00 (beyond the scheduler's horizon)");
		expect(estimateText({ ...base, estimate: { kind: 'beyond_horizon' } })).toBe("beyond the scheduler's horizon");
		expect(estimateText({ ...base, estimate: { kind: 'not_estimated' } })).toBe('not estimated (too far back in the queue)');
		expect(estimateText({ ...base, estimate: null })).toBe('not estimated');
	});
	it('counts the jobs it waits for beyond those listed, and where their ends came from', () => {
		expect(waitsForUnlisted({ kind: 'estimated', waits_for: [1, null], waits_for_count: 11 })).toBe(9);
		expect(waitsForUnlisted({ kind: 'estimated', waits_for: [1], waits_for_count: 1 })).toBe(0);
		expect(waitsForUnlisted({ kind: 'never' })).toBe(0);
		expect(waitsForUnlisted(null)).toBe(0);
		expect(runtimeSourceText({ kind: 'estimated', runtime_source: 'max_runtime' })).toBe("ends from the jobs' max runtime");
		expect(runtimeSourceText({ kind: 'estimated', runtime_source: 'history' })).toContain('earlier runs');
		expect(runtimeSourceText({ kind: 'now' })).toBe(null);
	});
});
