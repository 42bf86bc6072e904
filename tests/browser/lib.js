// What the dashboard's browser test stands on: the e2e stack (spawned the
// way tests/e2e/stack.sh does), the API as a client, Debian's chromium,
// axe-core, the documented operations and the failure artifacts.
'use strict';

const fs = require('fs');
const path = require('path');
const { spawn } = require('child_process');
const { createRequire } = require('module');
let chromium;
try {
	({ chromium } = require('playwright-core'));
} catch (e) {
	throw new Error(`cannot load playwright-core (${e.message}): run npm ci --prefix tests/browser (tests/run does)`);
}

const REPO = path.resolve(__dirname, '..', '..');
const CHROMIUM = '/usr/bin/chromium';

function sleep(ms) {
	return new Promise((resolve) => setTimeout(resolve, ms));
}

// Polls fn until it returns true (exactly) or ms pass; anything else it
// returns is what it saw instead, named with what was awaited in the error.
async function eventually(what, fn, ms = 30000) {
	const end = Date.now() + ms;
	let last;
	for (;;) {
		try {
			const v = await fn();
			if (v === true)
				return;
			last = v;
		} catch (e) {
			last = e;
		}
		if (Date.now() > end) {
			const why = last instanceof Error ? last.message : JSON.stringify(last);
			throw new Error(`${what}: not within ${ms / 1000} s (last: ${why})`);
		}
		await sleep(250);
	}
}

function tail(file, lines) {
	try {
		return fs.readFileSync(file, 'utf8').split('\n').slice(-lines).join('\n');
	} catch {
		return '(no log)';
	}
}

// The stack launcher ($TY_STACK_BIN, tests/e2e/stack.c) as our child; its
// settings come back from the env file it writes once every node is ready.
async function stackUp(dir, apiArgs) {
	const bin = process.env.TY_STACK_BIN;
	if (!bin || !fs.existsSync(bin))
		throw new Error('TY_STACK_BIN is not set or missing: run the browser test with tests/run -R browser');
	const envFile = path.join(dir, 'stack.env');
	const logFile = path.join(dir, 'stack.log');
	const log = fs.openSync(logFile, 'w');
	const child = spawn(bin, ['serve'], {
		env: { ...process.env, TY_STACK_ENV_FILE: envFile, TY_STACK_API_ARGS: apiArgs },
		stdio: ['ignore', log, log],
	});
	fs.closeSync(log);
	let exited = null;
	child.on('exit', (code, sig) => { exited = sig || code; });
	const stack = { child, logFile, env: null };
	for (let i = 0; i < 1200 && !fs.existsSync(envFile); i++) { // 120 s, as stack.sh
		if (exited !== null)
			throw new Error(`the stack exited (${exited}) before it was up; last lines of ${logFile}:\n${tail(logFile, 40)}`);
		await sleep(100);
	}
	if (!fs.existsSync(envFile)) {
		await stackDown(stack);
		throw new Error(`the stack was not up within 120 s; last lines of ${logFile}:\n${tail(logFile, 40)}`);
	}
	stack.env = {};
	for (const line of fs.readFileSync(envFile, 'utf8').split('\n')) {
		const eq = line.indexOf('=');
		if (eq > 0)
			stack.env[line.slice(0, eq)] = line.slice(eq + 1);
	}
	return stack;
}

async function stackDown(stack) {
	if (!stack || stack.child.exitCode !== null || stack.child.signalCode !== null)
		return;
	const done = new Promise((resolve) => stack.child.once('exit', resolve));
	stack.child.kill('SIGTERM');
	const timer = setTimeout(() => stack.child.kill('SIGKILL'), 30000);
	await done;
	clearTimeout(timer);
}

// The API as a client: {status, json, text}; expect (a status) turns any
// other answer into an error naming the request and the body.
function apiClient(base) {
	return async function api(method, p, { token, body, expect } = {}) {
		const headers = { Authorization: `Bearer ${token}` };
		if (body !== undefined)
			headers['Content-Type'] = 'application/json';
		const res = await fetch(base + p, {
			method, headers, body: body === undefined ? undefined : JSON.stringify(body),
		});
		const text = await res.text();
		let json = null;
		try {
			json = JSON.parse(text);
		} catch {
			// text/plain (logs, CSV) or empty (204)
		}
		if (expect !== undefined && res.status !== expect)
			throw new Error(`${method} ${p}: HTTP ${res.status}, expected ${expect}: ${text.slice(0, 400)}`);
		return { status: res.status, json, text };
	};
}

async function launchBrowser() {
	if (!fs.existsSync(CHROMIUM))
		throw new Error(`${CHROMIUM} is missing: install Debian's chromium (apt-get install chromium; tests/run does)`);
	return chromium.launch({ executablePath: CHROMIUM, headless: true });
}

// The documented operations: the openapi suite's matcher and response
// validator over docs/openapi.json (its Ajv from tests/openapi/node_modules, which
// tests/run installs).
function openapi() {
	try {
		return require(path.join(REPO, 'tests', 'openapi', 'operations.js'));
	} catch (e) {
		throw new Error(`cannot load tests/openapi/operations.js (${e.message}): ` +
			'run npm ci --prefix tests/openapi (tests/run does)');
	}
}

// The ways a request's JSON body differs from the schema docs/openapi.json
// gives op's request body ([] when it does not), with the openapi suite's Ajv.
let bodyAjv = null;
function requestBodyProblems(op, body) {
	if (!bodyAjv) {
		const req = createRequire(path.join(REPO, 'tests', 'openapi', 'operations.js'));
		const Ajv2020 = req('ajv/dist/2020');
		bodyAjv = new Ajv2020({ allErrors: true, strict: false });
		req('ajv-formats')(bodyAjv);
		bodyAjv.addSchema(openapi().doc, 'openapi.json');
	}
	const esc = (s) => String(s).replace(/~/g, '~0').replace(/\//g, '~1');
	const ref = `openapi.json#/paths/${esc(op.path)}/${op.method.toLowerCase()}/requestBody/content/application~1json/schema`;
	const validate = bodyAjv.compile({ $ref: ref });
	return validate(body) ? [] : validate.errors.map((e) => `${e.instancePath || '/'} ${e.message}`);
}

const AXE_SOURCE = () => fs.readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');

// axe-core over the page as it is; evaluated through the DevTools protocol,
// which the API's CSP (script-src 'self') does not govern. Returns the
// serious and critical violations, each as one printable line.
async function axeCheck(page) {
	if (!(await page.evaluate(() => typeof window.axe !== 'undefined')))
		await page.evaluate(AXE_SOURCE());
	const violations = await page.evaluate(async () => {
		const r = await window.axe.run(document, { resultTypes: ['violations'] });
		return r.violations.map((v) => ({
			id: v.id, impact: v.impact, help: v.help,
			node: v.nodes[0] ? v.nodes[0].target.join(' ') + ' ' + v.nodes[0].html.slice(0, 160) : '',
		}));
	});
	return violations.filter((v) => v.impact === 'serious' || v.impact === 'critical')
		.map((v) => `${v.id} (${v.impact}): ${v.help} — ${v.node}`);
}

module.exports = {
	REPO, sleep, eventually, stackUp, stackDown, apiClient, launchBrowser, openapi, requestBodyProblems, axeCheck,
};
