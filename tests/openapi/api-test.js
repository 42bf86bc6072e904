// The API against docs/openapi.json, on the e2e stack that api-test.sh
// started (TY_API_URL, TY_ADMIN_TOKEN, TY_TEAM, TY_TOKEN, TY_NODES): makes
// teams, tokens, jobs that finish, are cancelled and stopped, a sweep, a
// webhook, metrics and usage, calls every operation of the document
// (and the error answers worth checking), and validates each response.
// Fails naming the operation, the status and the first schema errors, and
// when an operation of the document was never called and is not in SKIP.
'use strict';

const { operations, findOperation, validateResponse } = require('./operations');

// operations not called, each with why
const SKIP = {};

const env = (k) => {
	const v = process.env[k];
	if (!v) {
		console.error(`api-test: ${k} is not set: run it through api-test.sh (ctest api_openapi)`);
		process.exit(1);
	}
	return v;
};
const API = env('TY_API_URL').replace(/\/$/, '');
const ADMIN = env('TY_ADMIN_TOKEN');
const TEAM = env('TY_TEAM');
const MEMBER = env('TY_TOKEN');
const NODES = env('TY_NODES').split(',');

const exercised = new Set();
const failures = [];
let calls = 0;

function fail(msg) {
	failures.push(msg);
	console.log(`FAIL: ${msg}`);
}

// One request; the response is validated against its operation, and
// `expect` (a status) checked when given. Returns {status, json, text}.
async function call(method, url, { token = ADMIN, body, headers = {}, expect, raw } = {}) {
	const h = { ...headers };
	if (token)
		h.Authorization = `Bearer ${token}`;
	let payload;
	if (raw !== undefined) {
		payload = raw;
	} else if (body !== undefined) {
		payload = JSON.stringify(body);
		h['Content-Type'] = h['Content-Type'] || 'application/json';
	}
	const res = await fetch(API + url, { method, headers: h, body: payload, redirect: 'manual' });
	const text = await res.text();
	const ct = res.headers.get('content-type') || '';
	calls++;
	const what = `${method} ${url} -> ${res.status}`;
	const op = findOperation(method, url);
	if (!op) {
		fail(`${what}: no operation of docs/openapi.json matches the request`);
	} else {
		exercised.add(op.operationId);
		const errors = validateResponse(op, res.status, ct, text);
		if (errors.length)
			fail(`${op.operationId} (${what}): ${errors.slice(0, 5).join('; ')}` +
				`\n    body: ${text.slice(0, 400)}`);
	}
	if (expect !== undefined && res.status !== expect)
		fail(`${what}: expected ${expect}; body: ${text.slice(0, 300)}`);
	let json = null;
	if (/json/.test(ct)) {
		try {
			json = JSON.parse(text);
		} catch {
			// validateResponse said so
		}
	}
	return { status: res.status, json, text };
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// polls a job until `pred` holds for it (120 s at most)
async function waitJob(id, pred, what) {
	for (let i = 0; i < 600; i++) {
		const r = await call('GET', `/v1/jobs/${id}`, { expect: 200 });
		if (r.json && pred(r.json))
			return r.json;
		await sleep(200);
	}
	throw new Error(`job ${id} was not ${what} within 120 s`);
}

const TERMINAL = ['succeeded', 'failed', 'cancelled', 'stopped'];
const job = (name, command, extra = {}) => ({
	team: TEAM, name, command, resources: { nodes: 1, gpus_per_node: 1 }, ...extra,
});

async function main() {
	// System
	await call('GET', '/healthz', { token: null, expect: 200 });
	await call('GET', '/readyz', { token: null, expect: 200 });
	await call('GET', '/openapi.json', { token: null, expect: 200 });
	await call('GET', '/metrics', { token: null, expect: 200 });
	// the dashboard's files (api-test.sh serves two)
	await call('GET', '/', { token: null, expect: 302 });
	await call('GET', '/ui/', { token: null, expect: 200 });
	await call('GET', '/ui/assets/app.js', { token: null, expect: 200 });
	await call('HEAD', '/ui/assets/app.js', { token: null, expect: 200 });
	await call('HEAD', '/ui/index.html', { token: null, expect: 200 });
	await call('GET', '/ui/nosuch.js', { token: null, expect: 404 });

	// teams
	const t2 = 'oa-second';
	await call('POST', '/v1/teams', { body: { name: t2, nominal_gpus: 2 }, expect: 201 });
	await call('POST', '/v1/teams', { body: { name: t2, nominal_gpus: 2 }, expect: 409 });
	await call('POST', '/v1/teams', { body: { name: 'oa-bad', nominal_gpus: -1 }, expect: 422 });
	await call('POST', '/v1/teams', { raw: '{"name":', headers: { 'Content-Type': 'application/json' }, expect: 400 });
	await call('POST', '/v1/teams', { raw: 'name=x', headers: { 'Content-Type': 'text/plain' }, expect: 415 });
	await call('POST', '/v1/teams', { token: MEMBER, body: { name: 'oa-x', nominal_gpus: 1 }, expect: 403 });
	await call('GET', '/v1/teams', { expect: 200 });
	await call('GET', '/v1/teams', { token: null, expect: 401 });
	await call('GET', '/v1/teams', { token: 'not-a-token', expect: 401 });
	await call('GET', `/v1/teams/${TEAM}`, { token: MEMBER, expect: 200 });
	await call('GET', '/v1/teams/oa-nosuch', { expect: 404 });
	await call('PATCH', `/v1/teams/${t2}`, { body: { weight: 2, borrowing_limit_gpus: null }, expect: 200 });
	await call('PATCH', `/v1/teams/${t2}`, { body: { weight: 'x' }, expect: 422 });
	await call('PATCH', '/v1/teams/oa-nosuch', { body: { weight: 2 }, expect: 404 });

	// tokens
	const viewer = await call('POST', '/v1/tokens', { body: { name: 'oa-viewer', role: 'viewer', team: TEAM }, expect: 201 });
	const doomed = await call('POST', '/v1/tokens', { body: { name: 'oa-doomed', role: 'member', team: t2 }, expect: 201 });
	await call('POST', '/v1/tokens', { body: { name: 'oa-x', role: 'member' }, expect: 422 });
	await call('GET', '/v1/tokens', { expect: 200 });
	await call('GET', '/v1/tokens', { token: MEMBER, expect: 403 });
	await call('DELETE', `/v1/tokens/${doomed.json.id}`, { expect: 204 });
	await call('DELETE', '/v1/tokens/999999', { expect: 404 });
	await call('GET', '/v1/jobs', { token: doomed.json.token, expect: 401 });
	const VIEWER = viewer.json.token;

	// jobs: one that succeeds, one cancelled while pending or running, one stopped
	const ok = await call('POST', '/v1/jobs', {
		token: MEMBER, body: job('oa-ok', ['/bin/sh', '-c', 'echo hi; echo oops >&2']),
		headers: { 'Idempotency-Key': 'oa-ok-1' }, expect: 201,
	});
	await call('POST', '/v1/jobs', {
		token: MEMBER, body: job('oa-ok', ['/bin/sh', '-c', 'echo hi; echo oops >&2']),
		headers: { 'Idempotency-Key': 'oa-ok-1' }, expect: 200,
	});
	const long = ['/bin/sh', '-c', 'echo long; sleep 60'];
	const cancelled = await call('POST', '/v1/jobs', { token: MEMBER, body: job('oa-cancel', long), expect: 201 });
	const stopped = await call('POST', '/v1/jobs', { token: MEMBER, body: job('oa-stop', long), expect: 201 });
	await call('POST', '/v1/jobs', { token: MEMBER, body: { team: TEAM, command: [] }, expect: 422 });
	await call('POST', '/v1/jobs', { token: VIEWER, body: job('oa-v', long), expect: 403 });
	await call('POST', '/v1/jobs', { token: MEMBER, body: { ...job('oa-env', long), env: { TRAINYARD_PARAMS: '{}' } }, expect: 422 });
	const okId = ok.json.id;

	await call('GET', '/v1/jobs', { token: MEMBER, expect: 200 });
	await call('GET', `/v1/jobs?team=${TEAM}&state=pending&limit=2`, { expect: 200 });
	await call('GET', '/v1/jobs?limit=0', { expect: 400 });
	await call('GET', '/v1/queue', { token: MEMBER, expect: 200 });
	await call('GET', '/v1/queue?limit=0', { expect: 400 });
	// what-if: the leading scheduler answers; nothing is submitted
	await call('POST', '/v1/queue/what-if', { token: MEMBER, body: job('oa-wi', long), expect: 200 });
	await call('POST', '/v1/queue/what-if', { token: MEMBER, body: { team: TEAM, command: [] }, expect: 422 });
	await call('POST', '/v1/queue/what-if', { token: VIEWER, body: job('oa-wi', long), expect: 403 });
	await call('POST', '/v1/queue/what-if?wait=0', { token: MEMBER, body: job('oa-wi', long), expect: 400 });
	await call('GET', '/v1/jobs/999999999', { expect: 404 });

	await waitJob(stopped.json.id, (j) => j.state === 'running', 'running');
	await call('POST', `/v1/jobs/${stopped.json.id}/stop`, { token: MEMBER, expect: 200 });
	await call('POST', `/v1/jobs/${cancelled.json.id}/cancel`, { token: MEMBER, expect: 200 });
	await call('POST', `/v1/jobs/${cancelled.json.id}/cancel`, { token: VIEWER, expect: 403 });
	await call('POST', '/v1/jobs/999999999/cancel', { expect: 404 });
	await call('POST', '/v1/jobs/999999999/stop', { expect: 404 });

	const done = await waitJob(okId, (j) => TERMINAL.includes(j.state), 'finished');
	if (done.state !== 'succeeded')
		fail(`job ${okId} ended ${done.state}, not succeeded`);
	await call('POST', `/v1/jobs/${okId}/cancel`, { token: MEMBER, expect: 409 });
	await call('POST', `/v1/jobs/${okId}/stop`, { token: MEMBER, expect: 409 });
	await call('GET', `/v1/jobs/${okId}/events`, { token: MEMBER, expect: 200 });
	await call('GET', `/v1/jobs/${okId}/events?after=x`, { token: MEMBER, expect: 400 });
	await call('GET', `/v1/jobs/${okId}/attempts`, { token: MEMBER, expect: 200 });
	await call('GET', `/v1/jobs/${okId}/checkpoints`, { token: MEMBER, expect: 200 });
	await call('GET', `/v1/jobs/${okId}/logs?rank=0&attempt=1&tail=10`, { token: MEMBER, expect: 200 });
	await call('GET', `/v1/jobs/${okId}/logs?rank=x`, { token: MEMBER, expect: 400 });
	await call('POST', `/v1/jobs/${okId}/metrics`, { token: MEMBER, body: { step: 1, metrics: { loss: 0.5 } }, expect: 200 });
	await call('POST', `/v1/jobs/${okId}/metrics`, { token: MEMBER, body: { step: -1, metrics: {} }, expect: 422 });
	await call('GET', `/v1/jobs/${okId}/metrics`, { token: MEMBER, expect: 200 });
	await call('GET', `/v1/jobs/${okId}/metrics?limit=0`, { token: MEMBER, expect: 400 });
	await waitJob(stopped.json.id, (j) => TERMINAL.includes(j.state), 'finished');
	await waitJob(cancelled.json.id, (j) => TERMINAL.includes(j.state), 'finished');
	await call('GET', `/v1/jobs/${cancelled.json.id}`, { token: VIEWER, expect: 200 });
	await call('GET', `/v1/jobs/${okId}`, { token: doomed.json.token, expect: 401 });

	// a sweep whose trial jobs carry the TRAINYARD_PARAM* env the API sets
	const sweep = await call('POST', '/v1/sweeps', {
		token: MEMBER, expect: 201, body: {
			team: TEAM, name: 'oa-sweep', template: { command: ['/bin/sh', '-c', 'echo $TRAINYARD_PARAMS'], resources: { nodes: 1, gpus_per_node: 1 } },
			trials: [{ lr: 0.1, opt: 'adam' }, { lr: 0.01, opt: 'sgd' }], objective: { metric: 'loss' },
		},
	});
	await call('POST', '/v1/sweeps', { token: MEMBER, body: { team: TEAM, template: { command: ['x'] }, trials: [] }, expect: 422 });
	const sid = sweep.json.id;
	await call('GET', '/v1/sweeps', { token: MEMBER, expect: 200 });
	const sw = await call('GET', `/v1/sweeps/${sid}`, { token: MEMBER, expect: 200 });
	await call('GET', '/v1/sweeps/999999999', { expect: 404 });
	for (const trial of (sw.json && sw.json.trials) || []) {
		const tj = await call('GET', `/v1/jobs/${trial.job_id}`, { token: MEMBER, expect: 200 });
		if (!tj.json || !tj.json.spec.env || !tj.json.spec.env.TRAINYARD_PARAMS)
			fail(`trial job ${trial.job_id} has no TRAINYARD_PARAMS in its env: ${tj.text.slice(0, 300)}`);
	}
	await call('GET', `/v1/jobs?team=${TEAM}&limit=5`, { token: MEMBER, expect: 200 });
	await call('POST', `/v1/sweeps/${sid}/cancel`, { token: MEMBER, expect: 200 });
	await call('POST', '/v1/sweeps/999999999/cancel', { expect: 404 });

	// a webhook nobody answers
	const hook = await call('POST', '/v1/webhooks', {
		token: MEMBER, expect: 201,
		body: { team: TEAM, url: 'http://127.0.0.1:9/hook', events: ['job.succeeded', 'team.budget'], secret: 'a-long-random-secret' },
	});
	await call('POST', '/v1/webhooks', { token: MEMBER, body: { team: TEAM, url: 'ftp://x', events: ['*'], secret: 'a-long-random-secret' }, expect: 422 });
	const hid = hook.json.id;
	await call('GET', '/v1/webhooks', { token: MEMBER, expect: 200 });
	await call('GET', `/v1/webhooks/${hid}`, { token: MEMBER, expect: 200 });
	await call('POST', `/v1/webhooks/${hid}/ping`, { token: MEMBER, expect: 202 });
	await call('GET', `/v1/webhooks/${hid}/deliveries`, { token: MEMBER, expect: 200 });
	await call('GET', '/v1/webhooks/999999999', { expect: 404 });
	await call('DELETE', `/v1/webhooks/${hid}`, { token: MEMBER, expect: 200 });
	await call('POST', `/v1/webhooks/${hid}/ping`, { token: MEMBER, expect: 409 });

	// usage, audit
	await call('GET', '/v1/usage', { token: MEMBER, expect: 200 });
	await call('GET', '/v1/usage?group_by=job', { expect: 200 });
	await call('GET', '/v1/usage?split=goodput', { expect: 200 });
	await call('GET', '/v1/usage?split=goodput&format=csv', { expect: 200 });
	await call('GET', '/v1/usage?group_by=nope', { expect: 400 });
	await call('GET', '/v1/audit?limit=5', { expect: 200 });
	await call('GET', '/v1/audit', { token: MEMBER, expect: 403 });

	// nodes: drain and undrain, then a spot notice on the last one
	const node = NODES[NODES.length - 1];
	await call('GET', '/v1/nodes', { token: MEMBER, expect: 200 });
	await call('GET', '/v1/nodes?state=nope', { expect: 400 });
	await call('GET', `/v1/nodes/${node}`, { token: MEMBER, expect: 200 });
	await call('GET', '/v1/nodes/oa-nosuch', { expect: 404 });
	await call('POST', `/v1/nodes/${node}/drain`, { expect: 200 });
	await call('POST', `/v1/nodes/${node}/drain`, { token: MEMBER, expect: 403 });
	await call('POST', `/v1/nodes/${node}/undrain`, { expect: 200 });
	await call('POST', '/v1/nodes/oa-nosuch/undrain', { expect: 404 });
	await call('POST', `/v1/nodes/${node}/preempt`, { body: { deadline_seconds: 'x' }, expect: 422 });
	await call('POST', `/v1/nodes/${node}/preempt`, { body: { deadline_seconds: 60 }, expect: 200 });
	await call('POST', `/v1/nodes/${node}/undrain`, { expect: 200 });

	// node pools (admins write, anyone reads), and a job no node can hold
	await call('PUT', '/v1/node-pools/oa-big', { body: { gpus_per_node: 64, max_nodes: 1 }, expect: 201 });
	await call('PUT', '/v1/node-pools/oa-big', {
		body: { gpus_per_node: 64, cpus_per_node: null, labels: { pool: 'big' }, max_nodes: 2 }, expect: 200,
	});
	await call('PUT', '/v1/node-pools/oa-big', { body: { max_nodes: 1 }, expect: 422 });
	await call('PUT', '/v1/node-pools/oa-big', { body: { gpus_per_node: 1, max_nodes: 1, zone: 'a' }, expect: 400 });
	await call('PUT', '/v1/node-pools/oa-big', { token: MEMBER, body: { gpus_per_node: 1, max_nodes: 1 }, expect: 403 });
	await call('GET', '/v1/node-pools', { token: MEMBER, expect: 200 });
	await call('DELETE', '/v1/node-pools/oa-big', { expect: 204 });
	await call('DELETE', '/v1/node-pools/oa-big', { expect: 404 });
	await call('POST', '/v1/jobs', {
		token: MEMBER, body: job('oa-never', ['true'], { resources: { nodes: 1000, gpus_per_node: 1 } }), expect: 422,
	});

	// the GETs added since (path parameters filled in from what was made)
	const fill = { jobs: okId, sweeps: sid, webhooks: hid, nodes: node, teams: TEAM, tokens: viewer.json.id };
	for (const op of operations) {
		if (op.method !== 'GET' || exercised.has(op.operationId) || SKIP[op.operationId])
			continue;
		const url = op.path.replace(/\{[^}]+\}/g, (_, i) =>
			String(fill[op.path.slice(0, i).split('/').filter(Boolean).pop()] ?? 1));
		await call('GET', url);
	}

	for (const op of operations) {
		if (!exercised.has(op.operationId) && !SKIP[op.operationId])
			fail(`${op.operationId} (${op.method} ${op.path}) was never called: call it in api-test.js or list it in SKIP with why`);
	}
}

main().then(() => {
	console.log(`api-test: ${calls} calls, ${exercised.size} of ${operations.length} operations, ${failures.length} failures`);
	process.exit(failures.length ? 1 : 0);
}, (e) => {
	console.log(`FAIL: ${e.stack || e}`);
	console.log(`api-test: ${calls} calls, ${failures.length + 1} failures`);
	process.exit(1);
});
