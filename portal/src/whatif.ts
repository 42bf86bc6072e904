// The queue page's "When would a job start?": the form into a job spec for
// POST /v1/queue/what-if, and an answer's estimate in words. No DOM here.
import type { Estimate, WhatIfAnswer } from './api';
import { fmtDuration, fmtTime } from './format';

// The form as typed: numbers stay text until they are turned into a spec.
export interface WhatIfForm {
	team: string;
	nodes: string;
	gpusPerNode: string;
	maxRuntimeHours: string; // empty: the spec's default
	priorityClass: string;
	spot: boolean;
	topology: string; // empty: none required
}

export const PRIORITY_CLASSES = ['high', 'normal', 'low', 'scavenger'];
export const TOPOLOGIES = ['block', 'rack', 'zone'];

// The API wants a command; a what-if runs nothing, so any will do.
export const WHAT_IF_COMMAND = ['true'];

export type SpecResult =
	| { spec: Record<string, unknown>; error?: undefined; field?: undefined }
	| { spec?: undefined; error: string; field: string };

function whole(s: string): number | null {
	const t = s.trim();
	return /^-?[0-9]{1,9}$/.test(t) ? Number(t) : null;
}

// The form as a job spec. Only what cannot be sent as a number is refused
// here; the API checks the limits (0 nodes is its 422, naming the field).
export function whatIfSpec(f: WhatIfForm): SpecResult {
	if (!f.team) return { error: 'Choose a team', field: 'team' };
	const nodes = whole(f.nodes);
	if (nodes === null) return { error: `Nodes must be a whole number, not '${f.nodes.trim()}'`, field: 'resources.nodes' };
	const gpus = whole(f.gpusPerNode);
	if (gpus === null)
		return { error: `GPUs per node must be a whole number, not '${f.gpusPerNode.trim()}'`, field: 'resources.gpus_per_node' };
	const spec: Record<string, unknown> = {
		team: f.team,
		command: WHAT_IF_COMMAND,
		resources: { nodes, gpus_per_node: gpus },
		priority_class: f.priorityClass,
		spot: { allowed: f.spot },
	};
	const h = f.maxRuntimeHours.trim();
	if (h !== '') {
		const v = /^[0-9]+(\.[0-9]+)?$/.test(h) ? Number(h) : NaN;
		if (!Number.isFinite(v))
			return { error: `Max runtime must be a number of hours, not '${h}'`, field: 'max_runtime_seconds' };
		spec.max_runtime_seconds = Math.round(v * 3600);
	}
	if (f.topology) spec.topology = { required: f.topology };
	return { spec };
}

// The form field an API problem's `field` names, for aria-invalid.
export function formFieldOf(field: string | undefined): keyof WhatIfForm | null {
	switch (field) {
	case 'team': return 'team';
	case 'resources.nodes': return 'nodes';
	case 'resources.gpus_per_node': return 'gpusPerNode';
	case 'max_runtime_seconds': return 'maxRuntimeHours';
	case 'priority_class': return 'priorityClass';
	case 'spot.allowed': return 'spot';
	case 'topology.required': return 'topology';
	default: return null;
	}
}

type Answer = Pick<WhatIfAnswer, 'estimated_start' | 'starts_now' | 'estimate' | 'reason'>;

// When it would start, in words: "now", "2026-11-27 15:00:00 (in 1h 0m)",
// "never: cannot run: …", "not before …" or "not estimated …". `nowMs` is
// the scheduler's clock (snapshot_at) where known, so that "in" is its own.
export function estimateText(a: Answer, nowMs?: number): string {
	const e: Estimate | null = a.estimate ?? null;
	if (a.starts_now || e?.kind === 'now') return 'now';
	switch (e?.kind) {
	case 'estimated': {
		if (!a.estimated_start) return 'estimated, without a time';
		const at = Date.parse(a.estimated_start);
		const rel = nowMs !== undefined && Number.isFinite(at) ? ` (in ${fmtDuration(Math.max(0, (at - nowMs) / 1000))})` : '';
		return `${fmtTime(a.estimated_start)}${rel}`;
	}
	case 'never':
		return a.reason ? `never: ${a.reason}` : 'never';
	case 'beyond_horizon':
		return e.horizon ? `not before ${fmtTime(e.horizon)} (beyond the scheduler's horizon)`
			: "beyond the scheduler's horizon";
	case 'not_estimated':
		return 'not estimated (too far back in the queue)';
	default:
		return 'not estimated';
	}
}

// How many of the jobs it waits for are not listed (the API lists at most 8).
export function waitsForUnlisted(e: Estimate | null | undefined): number {
	if (!e || e.kind !== 'estimated') return 0;
	return Math.max(0, (e.waits_for_count ?? 0) - (e.waits_for?.length ?? 0));
}

// Where the ends it waits for came from, in words, or null.
export function runtimeSourceText(e: Estimate | null | undefined): string | null {
	if (!e || e.kind !== 'estimated' || !e.runtime_source) return null;
	return e.runtime_source === 'history' ? "an end from earlier runs of that job's name" : "ends from the jobs' max runtime";
}

// What was asked, in a line: "2 nodes × 8 GPUs for team ml, normal, spot allowed".
export function askedText(f: WhatIfForm): string {
	const n = f.nodes.trim();
	const g = f.gpusPerNode.trim();
	const parts = [`${n} node${n === '1' ? '' : 's'} × ${g} GPU${g === '1' ? '' : 's'} for team ${f.team}`, f.priorityClass];
	if (f.maxRuntimeHours.trim() !== '') parts.push(`at most ${f.maxRuntimeHours.trim()} h`);
	if (f.spot) parts.push('spot allowed');
	if (f.topology) parts.push(`one ${f.topology}`);
	return parts.join(', ');
}
