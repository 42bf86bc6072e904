// openapi_operations: operations.js and check-requests.js on cases that
// must be told apart (node --test).
'use strict';

const test = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { execFileSync } = require('child_process');
const { findOperation, validateResponse, checkRequests } = require('./operations');

const problem = (status, code) => JSON.stringify({
	type: `https://trainyard.dev/problems/${code}`, title: 'x', status, code, detail: 'd',
});

test('a path template matches one non-empty segment, query and host ignored', () => {
	assert.strictEqual(findOperation('GET', '/v1/jobs/42').operationId, 'getJob');
	assert.strictEqual(findOperation('get', 'http://h:1/v1/jobs/42?x=1#y').operationId, 'getJob');
	assert.strictEqual(findOperation('POST', '/v1/jobs/42/cancel').operationId, 'cancelJob');
	assert.strictEqual(findOperation('GET', '/v1/jobs?q=a/b').operationId, 'listJobs');
	assert.strictEqual(findOperation('GET', '/v1/jobs/'), null);
	assert.strictEqual(findOperation('GET', '/v1/jobs/42/nope'), null);
	assert.strictEqual(findOperation('DELETE', '/v1/jobs/42'), null);
	assert.strictEqual(findOperation('GET', '/v1'), null);
});

test('a literal segment wins over a template', () => {
	// /v1/nodes/{id}/drain and /v1/jobs/{id}/metrics are literal after the id
	assert.strictEqual(findOperation('POST', '/v1/nodes/drain/drain').operationId, 'drainNode');
	assert.strictEqual(findOperation('GET', '/v1/jobs/7/metrics').operationId, 'getJobMetrics');
});

test('an undocumented status, content type or body is reported', () => {
	const op = findOperation('GET', '/v1/teams/ml');
	assert.deepStrictEqual(validateResponse(op, 404, 'application/problem+json', problem(404, 'team_not_found')), []);
	assert.match(validateResponse(op, 418, 'application/json', '{}')[0], /status 418 is not documented/);
	assert.match(validateResponse(op, 404, 'application/json', problem(404, 'team_not_found'))[0], /content type/);
	assert.match(validateResponse(op, 404, 'application/problem+json', '{')[0], /not JSON/);
	assert.match(validateResponse(op, 404, 'application/problem+json', problem(404, 'no_such_code')).join(), /\/code/);
	assert.match(validateResponse(op, 200, 'application/json; charset=utf-8', '{"name":"ml"}').join(),
		/required property 'nominal_gpus'/);
});

test('formats are checked', () => {
	const op = findOperation('GET', '/v1/tokens');
	const token = (createdAt) => JSON.stringify({ items: [{ id: 1, name: 'ci', role: 'admin', team: null,
		created_at: createdAt, revoked_at: null }] });
	const good = validateResponse(op, 200, 'application/json', token('2026-11-22T12:00:00.123Z'));
	// a month the pattern admits and the calendar does not
	const bad = validateResponse(op, 200, 'application/json', token('2026-13-45T12:00:00.123Z'));
	assert.deepStrictEqual(good, []);
	assert.strictEqual(bad.length, 1, bad.join('; '));
	assert.match(bad.join(), /created_at must match format "date-time"/);
});

test('a status without content needs an empty body; media type parameters are ignored', () => {
	const del = findOperation('DELETE', '/v1/tokens/3');
	assert.deepStrictEqual(validateResponse(del, 204, '', ''), []);
	assert.match(validateResponse(del, 204, 'text/plain', 'x')[0], /without a body/);
	const m = findOperation('GET', '/metrics');
	assert.deepStrictEqual(validateResponse(m, 200, 'text/plain; version=0.0.4; charset=utf-8', '# x\n'), []);
});

test('check-requests lists undocumented requests and exits 1', () => {
	assert.deepStrictEqual(checkRequests([{ method: 'GET', url: '/v1/nodes' }, { method: 'PUT', url: '/v1/nodes' }]),
		[{ method: 'PUT', url: '/v1/nodes', why: 'no operation of docs/openapi.json matches' }]);
	// query parameters count: a documented one passes, an unknown one is named
	assert.deepStrictEqual(checkRequests([{ method: 'GET', url: '/v1/jobs/1/events?after=3&wait=25' }]), []);
	assert.deepStrictEqual(checkRequests([{ method: 'GET', url: '/v1/jobs/1/events?after=1&bogus=2' }]).map((r) => r.why),
		['listJobEvents documents no query parameter bogus']);
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'check-requests.'));
	const run = (text) => {
		fs.writeFileSync(path.join(dir, 'r.jsonl'), text);
		try {
			return { rc: 0, out: execFileSync('node', [path.join(__dirname, 'check-requests.js'), path.join(dir, 'r.jsonl')],
				{ encoding: 'utf8', stdio: 'pipe' }) };
		} catch (e) {
			return { rc: e.status, out: e.stdout + e.stderr };
		}
	};
	try {
		let r = run('{"method":"GET","url":"/v1/jobs/1"}\n\n{"method":"POST","url":"/v1/jobs"}\n');
		assert.strictEqual(r.rc, 0, r.out);
		r = run('{"method":"GET","url":"/v1/jobs/1"}\n{"method":"GET","url":"/v1/secret"}\n');
		assert.strictEqual(r.rc, 1);
		assert.match(r.out, /undocumented request: GET \/v1\/secret/);
		r = run('{"method":"GET"}\n');
		assert.strictEqual(r.rc, 2);
		assert.match(r.out, /r.jsonl:1: needs string fields/);
		r = run('nope\n');
		assert.strictEqual(r.rc, 2);
		assert.match(r.out, /r.jsonl:1: not JSON/);
	} finally {
		fs.rmSync(dir, { recursive: true, force: true });
	}
});
