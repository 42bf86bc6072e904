// The dashboard's one API client: the token, problem documents, and the
// 401 and network-failure paths every page shares.
//
// Operations it calls (docs/openapi.json): GET /v1/whoami, GET /v1/teams,
// GET /v1/teams/{name}, GET /v1/teams/{name}/history, GET /v1/jobs,
// GET /v1/jobs/{id}, POST /v1/jobs/{id}/cancel, POST /v1/jobs/{id}/stop,
// GET /v1/jobs/{id}/events, GET /v1/jobs/{id}/attempts,
// GET /v1/jobs/{id}/checkpoints, GET /v1/jobs/{id}/logs,
// GET /v1/jobs/{id}/metrics, GET /v1/events, GET /v1/queue, GET /v1/usage,
// POST /v1/queue/what-if, GET /v1/nodes, POST /v1/nodes/{id}/drain,
// POST /v1/nodes/{id}/undrain, GET /v1/sweeps, GET /v1/sweeps/{id}.

export const TOKEN_KEY = 'trainyard.token';

export class ApiError extends Error {
	constructor(
		readonly status: number, // 0: the API could not be reached
		readonly code: string,
		readonly detail: string,
		readonly field?: string,
	) {
		super(detail);
	}
}

export function getToken(): string | null {
	return sessionStorage.getItem(TOKEN_KEY);
}
export function setToken(token: string): void {
	sessionStorage.setItem(TOKEN_KEY, token);
}
export function clearToken(): void {
	sessionStorage.removeItem(TOKEN_KEY);
}

interface Handlers {
	unauthorized(detail: string): void;
	unreachable(): void;
	reachable(): void;
}
let handlers: Handlers = { unauthorized() {}, unreachable() {}, reachable() {} };
// The shell decides what a 401 and a network failure look like.
export function setHandlers(h: Handlers): void {
	handlers = h;
}

export type Query = Record<string, string | number | undefined | null>;

export function buildUrl(path: string, query?: Query): string {
	const parts: string[] = [];
	for (const [k, v] of Object.entries(query ?? {})) {
		if (v === undefined || v === null || v === '') continue;
		parts.push(`${encodeURIComponent(k)}=${encodeURIComponent(String(v))}`);
	}
	return parts.length ? `${path}?${parts.join('&')}` : path;
}

// A problem document (RFC 9457) into an ApiError; anything else still gives
// one, with the status line as its detail.
export function problemFrom(status: number, statusText: string, body: string): ApiError {
	try {
		const p = JSON.parse(body);
		if (p && typeof p === 'object' && typeof p.detail === 'string')
			return new ApiError(status, String(p.code ?? 'error'), p.detail,
				typeof p.field === 'string' ? p.field : undefined);
	} catch {
		/* not JSON */
	}
	return new ApiError(status, 'http_error', `${status} ${statusText}`.trim());
}

interface Options {
	query?: Query;
	body?: unknown;
	signal?: AbortSignal;
	token?: string; // a token being tried at login: its 401 is the caller's
	quiet?: boolean; // a failure (network included) is the caller's alone
}

async function request(method: string, path: string, o: Options = {}): Promise<Response> {
	const token = o.token ?? getToken();
	const headers: Record<string, string> = {};
	if (token) headers.Authorization = `Bearer ${token}`;
	if (o.body !== undefined) headers['Content-Type'] = 'application/json';
	let res: Response;
	try {
		res = await fetch(buildUrl(path, o.query), {
			method,
			headers,
			body: o.body !== undefined ? JSON.stringify(o.body) : undefined,
			signal: o.signal,
		});
	} catch (e) {
		if (o.signal?.aborted) throw e;
		if (!o.quiet) handlers.unreachable();
		throw new ApiError(0, 'unreachable', 'Cannot reach the API');
	}
	handlers.reachable();
	if (res.ok) return res;
	const err = problemFrom(res.status, res.statusText, await res.text().catch(() => ''));
	if (res.status === 401 && o.token === undefined) {
		clearToken();
		handlers.unauthorized(err.detail);
	}
	throw err;
}

async function json<T>(method: string, path: string, o?: Options): Promise<T> {
	const res = await request(method, path, o);
	return (await res.json()) as T;
}

const seg = encodeURIComponent;

/* the documents, as far as the dashboard reads them */
export type Role = 'admin' | 'member' | 'viewer';
export interface Whoami { token: string; role: Role; team: string | null }
export interface Page<T> { items: T[]; next_cursor: string | null }
export interface TeamUsage {
	gpus_in_use: number; gpus_borrowed: number; gpus_lent: number;
	pending_jobs: number; decayed_gpu_hours: number; fair_share: number;
	updated_at: string | null;
}
export interface Team {
	name: string; nominal_gpus: number; borrowing_limit_gpus: number | null;
	lending_limit_gpus: number | null; cohort: string | null; weight: number;
	usage: TeamUsage;
}
export interface TeamSample {
	at: string; gpus_in_use: number; gpus_borrowed: number; gpus_lent: number;
	decayed_gpu_hours: number; fair_share: number; pending_jobs: number;
	preemptions_suffered: number; preemptions_caused: number;
}
export interface TeamHistory {
	items: TeamSample[];
	totals: { preemptions_suffered: number; preemptions_caused: number };
}
export interface Goodput {
	ratio: number; useful_seconds: number; wall_seconds: number; as_of: string;
	gpu_seconds: Record<string, number>;
}
export interface Job {
	id: number; team: string; name: string | null; state: string;
	spec: Record<string, any>; cancel_requested: boolean; attempt: number;
	failure_class: string | null; pending_reason: string | null;
	queue_position: number | null; reserved_until: string | null;
	preemptions: number; spot_preemptions: number;
	created_at: string; updated_at: string; finished_at: string | null;
	goodput?: Goodput | null;
}
export interface JobEvent {
	seq: number; type: string; state: string; message: string;
	data: Record<string, unknown>; time: string;
	job?: number; team?: string;
}
export interface AttemptNode {
	node: string; node_rank: number; gpus: number[]; exit_code: number | null;
	failure_class: string | null;
}
export interface AttemptRank {
	rank: number; node: string; local_rank: number; pid: number | null;
	exit_code: number | null; signal: number | null;
}
export interface Telemetry {
	util_mean: number | null; util_peak: number | null; memory_used_peak_mb: number | null;
	power_mean_w: number | null; power_peak_w: number | null; idle_gpu_seconds: number | null;
}
// a rank's training progress, as its node's latest heartbeat reported it
export interface RankProgress {
	rank: number; node: string; step: number;
	steps_per_second?: number | null; // over the last minute; null or absent while unknown
	samples_per_second?: number | null; // the rank's own figure
	step_at: number; // ms since the epoch, on the node's clock
}
// a rank far below its gang's median step rate, when it was judged
export interface Straggler {
	rank: number; node: string; steps_per_second: number; median: number;
	attempt: number; at: string;
}
export interface Attempt {
	attempt: number; state: string; nnodes: number; world_size: number;
	exit_code: number | null; failure_class: string | null; message: string | null;
	evidence: string | null; blamed_node: string | null; created_at: string;
	running_at: string | null; ended_at: string | null; duration_seconds: number | null;
	nodes: AttemptNode[]; ranks: AttemptRank[]; gpu_telemetry: Telemetry | null;
	progress: RankProgress[] | null; // null until a rank wrote a step
	stragglers: Straggler[] | null; // oldest first; null when none
}
export interface Checkpoint {
	step: number; status: string; path: string | null; bytes: number | null;
	node: string | null; attempt: number | null; verified_at: string | null;
	reason: string | null; resume: boolean;
}
export interface MetricsPage {
	job_id: number;
	items: { step: number; attempt: number | null; metrics: Record<string, number>; reported_at: string }[];
	next_after_step: number | null;
	latest: Record<string, number> | null;
}
export interface QueueEntry {
	position: number | null; job: number | null; team: string; name: string | null;
	priority_class: string; priority: number; gpus: number; nodes: number;
	gpus_per_node: number; submitted_at: string; fair_share: number;
	reason: string | null; reserved_until: string | null; estimated_start?: string | null;
}
// what an estimated start rests on (schema Estimate)
export interface Estimate {
	kind: 'now' | 'estimated' | 'never' | 'beyond_horizon' | 'not_estimated';
	waits_for?: (number | null)[]; // null: another team's job
	waits_for_count?: number;
	runtime_source?: 'history' | 'max_runtime';
	horizon?: string;
}
// a change to the spec that would start it sooner (schema WhatIfAlternative)
export interface WhatIfAlternative {
	summary: string; spec_patch: Record<string, unknown>;
	estimated_start: string | null; starts_now: boolean; estimate: Estimate | null;
	reason: string | null;
}
// the answer of POST /v1/queue/what-if (schema WhatIf)
export interface WhatIfAnswer {
	estimated_start: string | null; starts_now: boolean; estimate: Estimate | null;
	reason: string | null; alternatives: WhatIfAlternative[]; snapshot_at: string;
}
export interface NodeCondition { kind: string; severity: string; evidence: string | null }
export interface Node {
	id: string; address: string; labels: Record<string, string>; state: string;
	fault: string | null; gpus_total: number; gpus_free: number;
	running: { job: number; attempt: number }[]; conditions: NodeCondition[];
	drain_reason: string | null; last_heartbeat: string | null;
}
export interface Trial {
	index: number; job_id: number; state: string; cancel_requested: boolean;
	params: Record<string, unknown>; metrics: Record<string, number> | null;
}
export interface Sweep {
	id: number; team: string; name: string | null; state: string;
	objective: { metric: string; direction: 'minimize' | 'maximize' } | null;
	trial_count: number; trial_states: Record<string, number>;
	best: { index: number; job_id: number; metric: string; value: number; step: number } | null;
	created_at: string; trials?: Trial[];
}
export type UsageItem = Record<string, number | string>;
export interface Usage {
	from: string; to: string; as_of: string; items: UsageItem[];
	totals: Record<string, number>;
}
export interface Feed { events: JobEvent[]; next_after: string }

export const api = {
	whoami: (token?: string) => json<Whoami>('GET', '/v1/whoami', { token }),
	teams: () => json<{ items: Team[] }>('GET', '/v1/teams'),
	team: (name: string) => json<Team>('GET', `/v1/teams/${seg(name)}`),
	teamHistory: (name: string, query?: Query) =>
		json<TeamHistory>('GET', `/v1/teams/${seg(name)}/history`, { query, quiet: true }),
	jobs: (query: Query) => json<Page<Job>>('GET', '/v1/jobs', { query }),
	job: (id: number) => json<Job>('GET', `/v1/jobs/${id}`),
	cancelJob: (id: number) => json<Job>('POST', `/v1/jobs/${id}/cancel`),
	stopJob: (id: number) => json<Job>('POST', `/v1/jobs/${id}/stop`),
	jobEvents: (id: number, query: Query, signal?: AbortSignal) =>
		json<{ events: JobEvent[]; next_after: number; state: string }>(
			'GET', `/v1/jobs/${id}/events`, { query, signal }),
	attempts: (id: number) => json<{ items: Attempt[] }>('GET', `/v1/jobs/${id}/attempts`),
	checkpoints: (id: number) =>
		json<{ resume_step: number | null; items: Checkpoint[] }>('GET', `/v1/jobs/${id}/checkpoints`),
	// a log the node cannot give is the log pane's business, not a banner's
	logs: async (id: number, query: Query, signal?: AbortSignal) =>
		(await request('GET', `/v1/jobs/${id}/logs`, { query, signal, quiet: true })).text(),
	metrics: (id: number, query?: Query) => json<MetricsPage>('GET', `/v1/jobs/${id}/metrics`, { query }),
	feed: (query: Query, signal?: AbortSignal) => json<Feed>('GET', '/v1/events', { query, signal }),
	queue: (query: Query) => json<Page<QueueEntry>>('GET', '/v1/queue', { query }),
	// the spec is checked as a submission's; nothing is submitted
	whatIf: (spec: Record<string, unknown>) =>
		json<WhatIfAnswer>('POST', '/v1/queue/what-if', { body: spec }),
	usage: (query: Query) => json<Usage>('GET', '/v1/usage', { query }),
	usageCsv: async (query: Query) =>
		(await request('GET', '/v1/usage', { query: { ...query, format: 'csv' } })).blob(),
	nodes: () => json<{ items: Node[] }>('GET', '/v1/nodes'),
	drainNode: (id: string) => json<Node>('POST', `/v1/nodes/${seg(id)}/drain`),
	undrainNode: (id: string) => json<Node>('POST', `/v1/nodes/${seg(id)}/undrain`),
	sweeps: (query: Query) => json<Page<Sweep>>('GET', '/v1/sweeps', { query }),
	sweep: (id: number) => json<Sweep>('GET', `/v1/sweeps/${id}`),
};
