// The dashboard (portal/dist, served by trainyard-api --ui-dir) in Debian's
// chromium: sign-in, the pages against the e2e stack, live updates, bad
// input, accessibility, documented requests and speed (tests/browser/README.md).
'use strict';

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('fs');
const os = require('os');
const path = require('path');
const L = require('./lib.js');

const DIST = path.join(L.REPO, 'portal', 'dist');
const ARTIFACTS = path.resolve(process.env.TY_BROWSER_ARTIFACTS ||
	path.join(L.REPO, 'build-test', 'artifacts', 'browser'));
const TOKEN_KEY = 'trainyard.token';
// the goals of issue 20; the test fails only far above them (machines are noisy)
const GOAL_FIRST_LOAD_MS = 1000;
const GOAL_QUEUE_10K_MS = 2000;
const SLACK = 10;

let stack, E, api, ui, origin, browser, openapi;
const requests = [];        // every same-origin /v1 request the dashboard made
const misfits = [];         // its responses that differ from docs/openapi.json
let validated = 0;          // responses validated
const contexts = [];        // this case's browser contexts (closed after it)
const consoles = new Map(); // page -> its console lines
const cleanup = { jobs: [], sweeps: [] };
let other;                  // team 'other': {team, token}

function slug(s) {
	return s.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-|-$/g, '').slice(0, 60);
}

async function session(token, opts = {}) {
	const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 }, ...opts });
	ctx.setDefaultTimeout(20000);
	contexts.push(ctx);
	ctx.on('request', (req) => {
		const u = new URL(req.url());
		if (u.origin === origin && u.pathname.startsWith('/v1/'))
			requests.push({ method: req.method(), url: req.url() });
	});
	ctx.on('response', async (res) => {
		const u = new URL(res.url());
		const op = u.origin === origin && u.pathname.startsWith('/v1/') &&
			openapi.findOperation(res.request().method(), res.url());
		if (!op)
			return; // not ours, or undocumented: the request check names it
		let body;
		try {
			body = await res.text();
		} catch {
			return; // the page went away first
		}
		validated++;
		for (const m of openapi.validateResponse(op, res.status(), res.headers()['content-type'], body))
			misfits.push(`${res.request().method()} ${u.pathname}${u.search} ${res.status()}: ${m}`);
	});
	ctx.on('page', (p) => {
		const lines = [];
		consoles.set(p, lines);
		p.on('console', (m) => lines.push(`${m.type()}: ${m.text()}`));
		p.on('pageerror', (e) => lines.push(`pageerror: ${e.message}`));
	});
	const page = await ctx.newPage();
	if (token)
		await signIn(page, token);
	return page;
}

function h1(page, name) {
	return page.getByRole('heading', { level: 1, name, exact: true });
}

function nav(page, name) {
	return page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name, exact: true });
}

async function signIn(page, token) {
	await page.goto(ui + '#/login');
	await page.getByLabel('API token').fill(token);
	await page.getByRole('button', { name: 'Sign in' }).click();
	await h1(page, 'Queue').waitFor();
}

async function go(page, hash, heading) {
	await page.goto(ui + hash);
	await h1(page, heading).waitFor();
}

async function storedToken(page) {
	return page.evaluate((k) => sessionStorage.getItem(k), TOKEN_KEY);
}

async function jobState(page) {
	return (await page.getByTestId('job-state').textContent()).trim();
}

async function submit(token, spec) {
	const r = await api('POST', '/v1/jobs', { token, body: { team: E.TY_TEAM, ...spec }, expect: 201 });
	return r.json.id;
}

async function apiJob(id, token = E.TY_ADMIN_TOKEN) {
	return (await api('GET', `/v1/jobs/${id}`, { token, expect: 200 })).json;
}

// On a failure: a screenshot and the console of every open page, named in
// the error. Either way the case's contexts are closed.
function tcase(name, fn) {
	test(name, async () => {
		try {
			await fn();
		} catch (e) {
			const saved = [];
			let i = 0;
			for (const ctx of contexts) {
				for (const p of ctx.pages()) {
					const base = path.join(ARTIFACTS, `failure-${slug(name)}-${i++}`);
					try {
						await p.screenshot({ path: `${base}.png`, fullPage: true });
						saved.push(`${base}.png`);
					} catch { /* a closed page */ }
					fs.writeFileSync(`${base}.console.txt`,
						`url: ${p.url()}\n${(consoles.get(p) || []).join('\n')}\n`);
					saved.push(`${base}.console.txt`);
				}
			}
			e.message += `\n  saved: ${saved.join(', ') || '(no open page)'}`;
			throw e;
		} finally {
			for (const ctx of contexts.splice(0))
				await ctx.close().catch(() => {});
		}
	});
}

before(async () => {
	if (!fs.existsSync(path.join(DIST, 'index.html')))
		throw new Error(`${DIST}/index.html is missing: build the dashboard first ` +
			'with portal/build (tests/run does)');
	if (/\s/.test(DIST))
		throw new Error(`'${DIST}' holds a blank: TY_STACK_API_ARGS splits at blanks`);
	openapi = L.openapi();
	fs.rmSync(ARTIFACTS, { recursive: true, force: true }); // this run's files only
	fs.mkdirSync(ARTIFACTS, { recursive: true });
	const work = fs.mkdtempSync(path.join(process.env.TY_TEST_TMPDIR || os.tmpdir(), 'browser.'));
	stack = await L.stackUp(work, `--ui-dir ${DIST}`);
	E = stack.env;
	api = L.apiClient(E.TY_API_URL);
	origin = new URL(E.TY_API_URL).origin;
	ui = origin + '/ui/';
	const admin = E.TY_ADMIN_TOKEN;
	await api('POST', '/v1/teams', { token: admin, body: { name: 'other', nominal_gpus: 4 }, expect: 201 });
	const t = await api('POST', '/v1/tokens', {
		token: admin, body: { name: 'browser-other', role: 'member', team: 'other' }, expect: 201,
	});
	other = { team: 'other', token: t.json.token };
	browser = await L.launchBrowser();
});

after(async () => {
	if (api) {
		for (const id of cleanup.jobs)
			await api('POST', `/v1/jobs/${id}/cancel`, { token: E.TY_ADMIN_TOKEN }).catch(() => {});
		for (const id of cleanup.sweeps)
			await api('POST', `/v1/sweeps/${id}/cancel`, { token: E.TY_ADMIN_TOKEN }).catch(() => {});
	}
	if (browser)
		await browser.close();
	await L.stackDown(stack);
	console.log(`browser: artifacts (screenshots, speed.json, failures) in ${ARTIFACTS}`);
});

tcase('a member signs in after a refused token, sees who is signed in, and signs out', async () => {
	const refused = await api('GET', '/v1/jobs', { token: 'ty_not_a_token' });
	assert.equal(refused.status, 401);
	const page = await session(null);
	await go(page, '#/login', 'Sign in');
	await page.getByLabel('API token').fill('ty_not_a_token');
	await page.getByRole('button', { name: 'Sign in' }).click();
	await page.getByRole('alert').filter({ hasText: refused.json.detail }).waitFor();
	assert.equal(await storedToken(page), null, 'a refused token is not kept');

	await page.getByLabel('API token').fill(E.TY_TOKEN);
	await page.getByRole('button', { name: 'Sign in' }).click();
	await h1(page, 'Queue').waitFor();
	assert.equal(await storedToken(page), E.TY_TOKEN);
	const who = (await api('GET', '/v1/whoami', { token: E.TY_TOKEN, expect: 200 })).json;
	const banner = page.getByRole('banner');
	await L.eventually('the header names the token, team and role', async () => {
		const text = await banner.innerText();
		return [who.token, who.team, who.role].every((w) => text.includes(w)) || text;
	}, 10000);

	await page.getByRole('button', { name: 'Sign out' }).click();
	await h1(page, 'Sign in').waitFor();
	assert.equal(await storedToken(page), null, 'signing out forgets the token');
});

let waitingJob;
tcase('a job that cannot start shows in the Queue page with its reason', async () => {
	// three nodes of one GPU on a stack of two nodes: it waits for good
	waitingJob = await submit(E.TY_TOKEN, {
		name: 'browser-waits', command: ['/bin/sh', '-c', 'echo never'],
		resources: { nodes: 3, gpus_per_node: 1 }, queue_if_unschedulable: true,
	});
	cleanup.jobs.push(waitingJob);
	const reason = async () => {
		const j = await apiJob(waitingJob, E.TY_TOKEN);
		return j.pending_reason && j.pending_reason !== 'not yet considered by the scheduler' ? j.pending_reason : null;
	};
	await L.eventually('the scheduler gives the job a reason', async () => (await reason()) !== null, 30000);
	const page = await session(E.TY_TOKEN);
	const row = page.locator(`tr[data-job="${waitingJob}"]`);
	let loaded = Date.now();
	await L.eventually(`row data-job=${waitingJob} shows the name and the API's reason`, async () => {
		if (Date.now() - loaded > 5000) { // the queue page need not watch: look again
			await page.reload();
			loaded = Date.now();
		}
		const text = await row.innerText({ timeout: 2000 });
		const want = await reason();
		return (text.includes('browser-waits') && want && text.includes(want)) || text;
	}, 30000);
});

tcase('a running job\'s page follows it to succeeded without reloading and shows its log', async () => {
	const id = await submit(E.TY_TOKEN, {
		name: 'browser-lines', command: ['/bin/sh', '-c', 'for i in 1 2 3; do echo line-$i; sleep 1; done'],
		resources: { nodes: 1, gpus_per_node: 1 },
	});
	const page = await session(E.TY_TOKEN);
	await go(page, `#/jobs/${id}`, `Job ${id}`);
	await page.evaluate(() => { window.tyNotReloaded = true; });
	await L.eventually('the job state reads succeeded', async () => { const st = await jobState(page); return st === 'succeeded' || st; }, 90000);
	assert.equal(await page.evaluate(() => window.tyNotReloaded), true, 'the page was reloaded');
	assert.equal((await apiJob(id)).state, 'succeeded');
	const log = page.getByTestId('log');
	await L.eventually('the log tail shows line-1..3', async () => {
		const text = await log.innerText({ timeout: 2000 });
		return ['line-1', 'line-2', 'line-3'].every((l) => text.includes(l)) || text;
	}, 20000);
	assert.ok(await page.getByLabel('Rank').count() > 0, 'no select labelled Rank');
});

tcase('a running job cancelled from its page (Cancel job, Confirm) becomes cancelled, and the API agrees', async () => {
	const id = await submit(E.TY_TOKEN, {
		name: 'browser-sleeps', command: ['/bin/sh', '-c', 'sleep 300'], resources: { nodes: 1, gpus_per_node: 1 },
	});
	cleanup.jobs.push(id);
	await L.eventually('the job runs', async () => (await apiJob(id)).state === 'running', 60000);
	const page = await session(E.TY_TOKEN);
	await go(page, `#/jobs/${id}`, `Job ${id}`);
	await L.eventually('the page reads running', async () => (await jobState(page)) === 'running', 20000);
	await page.getByRole('button', { name: 'Cancel job' }).click();
	await page.getByRole('dialog').getByRole('button', { name: 'Confirm' }).click();
	await L.eventually('the page reads cancelled', async () => { const st = await jobState(page); return st === 'cancelled' || st; }, 60000);
	assert.equal((await apiJob(id)).state, 'cancelled');
});

// a rate as the scheduler writes it (%.3g), so the page's evidence can be
// compared with the API's verdict
const rate = (v) => String(Number(v.toPrecision(3)));

tcase('a job\'s page shows its ranks\' steps as they advance and a straggler verdict on its rank and node', async () => {
	// rank 0 steps ten times a second, rank 1 (on the other node) once a
	// second: rank 1 is a straggler (as in tests/e2e/test_e2e_progress.c)
	const id = await submit(E.TY_TOKEN, {
		name: 'browser-progress', resources: { nodes: 2, gpus_per_node: 1 }, retry: { system: 0 },
		command: ['/bin/sh', '-c', 'n=200; d=0.1; if [ $RANK = 1 ]; then n=20; d=1; fi; i=0; ' +
			'while [ $i -lt $n ]; do i=$((i+1)); ' +
			'printf \'{"step":%d,"samples_per_second":64}\' $i > $TRAINYARD_PROGRESS_FILE; sleep $d; done'],
	});
	cleanup.jobs.push(id);
	try {
		const page = await session(E.TY_TOKEN);
		await go(page, `#/jobs/${id}`, `Job ${id}`);
		await page.evaluate(() => { window.tyNotReloaded = true; });
		const rank0 = page.locator('tr[data-rank="0"]').getByTestId('rank-progress');
		await L.eventually('rank 0 shows its step, rates and when it advanced while the job runs', async () => {
			const text = (await rank0.innerText({ timeout: 2000 })).trim();
			return /^step [1-9][0-9]*, [0-9.]+ steps\/s, 64 samples\/s, advanced [0-9]+s ago$/.test(text) || text;
		}, 60000);
		assert.notEqual(await jobState(page), 'succeeded', 'the job ended before the page showed progress');

		let verdict;
		await L.eventually('the API has a straggler verdict', async () => {
			const a = (await api('GET', `/v1/jobs/${id}/attempts`, { token: E.TY_TOKEN, expect: 200 })).json.items;
			verdict = a.length && a[a.length - 1].stragglers ? a[a.length - 1].stragglers[0] : null;
			return !!verdict || a.map((x) => x.state);
		}, 60000);
		assert.equal(verdict.rank, 1);
		const evidence = `rank 1 at ${rate(verdict.steps_per_second)} steps/s against the gang's median ${rate(verdict.median)}`;
		await L.eventually('the verdict shows with its evidence', async () => {
			const text = await page.getByTestId('straggler').first().innerText({ timeout: 2000 });
			return (text.includes(`Straggler on ${verdict.node}`) && text.includes(evidence)) || text;
		}, 20000);
		for (const row of [page.locator('tr[data-rank="1"]'), page.locator(`tr[data-node="${verdict.node}"]`)]) {
			const text = await row.innerText();
			assert.ok(text.includes(`straggler: ${evidence}`), `the row does not name the verdict: ${text}`);
		}
		assert.equal(await page.locator('tr[data-rank="0"]').innerText().then((t) => t.includes('straggler')), false,
			'rank 0 is shown as a straggler');
		await page.screenshot({ path: path.join(ARTIFACTS, 'job-progress.png'), fullPage: true });
		const problems = await L.axeCheck(page);
		assert.deepEqual(problems, [], `axe-core on the job page with progress:\n${problems.join('\n')}`);

		await L.eventually('the job state reads succeeded', async () => { const st = await jobState(page); return st === 'succeeded' || st; }, 90000);
		assert.equal(await page.evaluate(() => window.tyNotReloaded), true, 'the page was reloaded');
		// the last report is kept with the attempt and shown against its end
		const last = (await api('GET', `/v1/jobs/${id}/attempts`, { token: E.TY_TOKEN, expect: 200 })).json.items.pop();
		const step = last.progress.find((p) => p.rank === 0).step;
		await page.reload();
		await h1(page, `Job ${id}`).waitFor();
		await L.eventually(`rank 0 shows step ${step} against the attempt's end`, async () => {
			const text = (await rank0.innerText({ timeout: 2000 })).trim();
			return (text.startsWith(`step ${step}, `) && text.endsWith(' before the attempt ended')) || text;
		}, 20000);
		assert.equal(await page.getByTestId('gang-stalled').count(), 0, 'an ended attempt is shown as stalled');
	} finally { // a straggler blames its node: reset both, as test_e2e_progress does
		for (const n of ['node-a', 'node-b'])
			await api('POST', `/v1/nodes/${n}/undrain`, { token: E.TY_ADMIN_TOKEN, expect: 200 });
	}
});

tcase('the Jobs page finds jobs by name, cancels the selected ones after Confirm, and filters by state', async () => {
	const ids = [];
	for (const n of [1, 2]) {
		ids.push(await submit(E.TY_TOKEN, {
			name: `browser-bulk-${n}`, command: ['/bin/true'], resources: { nodes: 3, gpus_per_node: 1 }, queue_if_unschedulable: true,
		}));
	}
	cleanup.jobs.push(...ids);
	const page = await session(E.TY_TOKEN);
	await go(page, '#/jobs', 'Jobs');
	const shown = async () => (await page.locator('table tbody tr[data-job]').evaluateAll(
		(rows) => rows.map((r) => Number(r.getAttribute('data-job'))))).sort((a, b) => a - b);
	await page.getByLabel('Search').fill('browser-bulk');
	await L.eventually('the search shows exactly the two browser-bulk jobs', async () => {
		const got = await shown();
		return JSON.stringify(got) === JSON.stringify(ids) || got;
	}, 15000);
	for (const id of ids)
		await page.getByLabel(`Select job ${id}`).check();
	await page.getByRole('button', { name: 'Cancel selected' }).click();
	await page.getByRole('dialog').getByRole('button', { name: 'Confirm' }).click();
	await L.eventually('the API has both jobs cancelled', async () => {
		const states = await Promise.all(ids.map(async (id) => (await apiJob(id)).state));
		return states.every((st) => st === 'cancelled') || states;
	}, 15000);
	await page.getByLabel('State').selectOption('pending');
	await L.eventually('no browser-bulk job is pending', async () => {
		const got = await shown();
		return got.length === 0 || got;
	}, 15000);
	await page.getByLabel('State').selectOption('cancelled');
	await L.eventually('both browser-bulk jobs are listed as cancelled', async () => {
		const got = await shown();
		return JSON.stringify(got) === JSON.stringify(ids) || got;
	}, 15000);
});

tcase('a member of another team sees neither the job in Jobs nor its page, and its queue entry without a name', async () => {
	assert.ok(waitingJob, 'needs the waiting job of the queue case');
	// a job of its own first, so that an empty list cannot pass for a scoped one
	const own = (await api('POST', '/v1/jobs', {
		token: other.token, expect: 201,
		body: { team: other.team, name: 'other-waits', command: ['/bin/true'], resources: { nodes: 3, gpus_per_node: 1 }, queue_if_unschedulable: true },
	})).json.id;
	cleanup.jobs.push(own);
	const page = await session(other.token);
	await go(page, '#/jobs', 'Jobs');
	await page.locator(`tr[data-job="${own}"]`).waitFor();
	assert.equal(await page.locator(`[data-job="${waitingJob}"]`).count(), 0, 'Jobs lists the other team\'s job');

	await page.goto(ui + `#/jobs/${waitingJob}`);
	await page.getByText(`Job ${waitingJob} not found`).waitFor();

	await go(page, '#/queue', 'Queue');
	await page.locator(`tr[data-job="${own}"]`).waitFor();
	const entries = (await api('GET', '/v1/queue', { token: other.token, expect: 200 })).json.items;
	const foreign = entries.filter((e) => e.team === E.TY_TEAM);
	assert.ok(foreign.length > 0 && foreign.every((e) => e.job === null && e.name === null),
		`the API's queue for 'other' should hold the first team's entry without id or name: ${JSON.stringify(entries)}`);
	const table = page.locator('table').filter({ has: page.locator(`tr[data-job="${own}"]`) });
	await L.eventually('the queue shows every entry the API lists', async () =>
		(await table.locator('tbody tr').count()) === entries.length, 10000);
	assert.equal(await page.locator(`[data-job="${waitingJob}"]`).count(), 0);
	assert.ok(!(await table.innerText()).includes('browser-waits'), 'the queue shows the other team\'s job name');
});

tcase('the Queue page asks when a job would start: now, never with its reason, a 422 naming the field, nothing submitted', async () => {
	const admin = E.TY_ADMIN_TOKEN;
	const nodes = (await api('GET', '/v1/nodes', { token: admin, expect: 200 })).json.items;
	const most = Math.max(...nodes.map((n) => n.gpus_total));
	assert.ok(most < 64, `a node has ${most} GPUs: no shape is too big for it`);
	// "now" needs every GPU free: the cases before leave nothing running
	await L.eventually('every node is ready with all its GPUs free', async () => {
		const ns = (await api('GET', '/v1/nodes', { token: admin, expect: 200 })).json.items;
		return ns.every((n) => n.state === 'ready' && n.gpus_free === n.gpus_total) ||
			ns.map((n) => `${n.id} ${n.state} ${n.gpus_free}/${n.gpus_total}`);
	}, 60000);
	const queued = async () => (await api('GET', '/v1/queue?limit=500', { token: admin, expect: 200 })).json.items
		.map((e) => e.job).sort((a, b) => a - b);
	const newest = async () => {
		const items = (await api('GET', '/v1/jobs?limit=1', { token: admin, expect: 200 })).json.items;
		return items.length ? items[0].id : 0;
	};
	const before = { queue: await queued(), newest: await newest() };

	const page = await session(E.TY_TOKEN);
	const asked = []; // the bodies the page sent
	page.on('request', (r) => {
		if (r.method() === 'POST' && new URL(r.url()).pathname === '/v1/queue/what-if')
			asked.push({ url: r.url(), body: r.postDataJSON() });
	});
	const form = page.getByRole('region', { name: 'When would a job start?' });
	const estimate = form.getByTestId('what-if-estimate');
	const ask = async (n, g) => {
		await form.getByLabel('Nodes', { exact: true }).fill(String(n));
		await form.getByLabel('GPUs per node', { exact: true }).fill(String(g));
		await form.getByRole('button', { name: 'Ask' }).click();
	};
	const spec = (n, g) => ({
		team: E.TY_TEAM, command: ['true'], resources: { nodes: n, gpus_per_node: g },
		priority_class: 'normal', spot: { allowed: false },
	});
	await form.getByLabel('Team', { exact: true }).selectOption(E.TY_TEAM);

	// held until the page shows that it is asking
	let release;
	const held = new Promise((resolve) => { release = resolve; });
	const isWhatIf = (u) => u.pathname === '/v1/queue/what-if';
	await page.route(isWhatIf, async (r) => { await held; await r.continue(); });
	await ask(1, 1);
	await form.getByRole('status').filter({ hasText: 'Asking the scheduler' }).waitFor();
	assert.equal(await form.getByRole('button', { name: 'Ask' }).isDisabled(), true, 'Ask is enabled while asking');
	release();
	await L.eventually('1 × 1 GPU would start now', async () => {
		const text = (await estimate.innerText({ timeout: 2000 })).trim();
		return text === 'now' || text;
	}, 40000);
	await page.unroute(isWhatIf);
	assert.equal(await form.getByRole('status').count(), 0, 'still shows that it is asking');

	const big = (await api('POST', '/v1/queue/what-if', { token: E.TY_TOKEN, body: spec(1, most + 1), expect: 200 })).json;
	assert.equal(big.estimate.kind, 'never', `the API's answer for ${most + 1} GPUs a node: ${JSON.stringify(big)}`);
	assert.ok(big.reason.startsWith('cannot run: '), `the API's reason: ${big.reason}`);
	await ask(1, most + 1);
	await L.eventually(`${most + 1} GPUs a node would never start, with the API's reason`, async () => {
		const text = (await estimate.innerText({ timeout: 2000 })).trim();
		return text === `never: ${big.reason}` || text;
	}, 40000);
	await page.screenshot({ path: path.join(ARTIFACTS, 'queue-what-if.png'), fullPage: true });
	const problems = await L.axeCheck(page);
	assert.deepEqual(problems, [], `axe-core on the queue page with a what-if answer:\n${problems.join('\n')}`);

	const bad = (await api('POST', '/v1/queue/what-if', { token: E.TY_TOKEN, body: spec(0, 1), expect: 422 })).json;
	assert.equal(bad.field, 'resources.nodes');
	await ask(0, 1);
	const error = form.locator('.error');
	await L.eventually('the 422 shows with the API\'s detail, naming the field', async () => {
		const text = (await error.innerText({ timeout: 2000 })).trim();
		return (text.includes(bad.detail) && text.includes('resources.nodes')) || text;
	}, 20000);
	assert.equal(await estimate.count(), 0, 'an answer still shows beside the error');
	assert.equal(await form.getByLabel('Nodes', { exact: true }).getAttribute('aria-invalid'), 'true');

	assert.equal(asked.length, 3, `the page asked ${asked.length} times`);
	const op = openapi.findOperation('POST', asked[0].url);
	assert.equal(op && op.operationId, 'whatIfQueue');
	assert.deepEqual(asked.map((a) => a.body), [spec(1, 1), spec(1, most + 1), spec(0, 1)]);
	for (const a of asked.slice(0, 2)) // the third is the API's 422
		assert.deepEqual(L.requestBodyProblems(op, a.body), [], `the body differs from docs/openapi.json: ${JSON.stringify(a.body)}`);
	assert.notDeepEqual(L.requestBodyProblems(op, asked[2].body), [], 'the validator takes 0 nodes');

	assert.deepEqual({ queue: await queued(), newest: await newest() }, before, 'the what-if submitted a job');
});

tcase('a what-if that must wait shows when, why, and the job it waits for as a link', async () => {
	// both nodes' GPUs taken by one job until it is cancelled
	const nodes = (await api('GET', '/v1/nodes', { token: E.TY_ADMIN_TOKEN, expect: 200 })).json.items;
	const id = await submit(E.TY_TOKEN, {
		name: 'browser-fills', command: ['/bin/sh', '-c', 'sleep 300'], max_runtime_seconds: 600,
		resources: { nodes: nodes.length, gpus_per_node: Math.min(...nodes.map((n) => n.gpus_total)) },
	});
	cleanup.jobs.push(id);
	try {
		await L.eventually('the job that fills the nodes runs', async () => (await apiJob(id)).state === 'running', 60000);
		const spec = {
			team: E.TY_TEAM, command: ['true'], resources: { nodes: 1, gpus_per_node: 1 },
			priority_class: 'normal', spot: { allowed: false },
		};
		const want = (await api('POST', '/v1/queue/what-if', { token: E.TY_TOKEN, body: spec, expect: 200 })).json;
		assert.equal(want.estimate.kind, 'estimated', `the API's answer: ${JSON.stringify(want)}`);
		assert.deepEqual(want.estimate.waits_for, [id]);

		const page = await session(E.TY_TOKEN);
		const form = page.getByRole('region', { name: 'When would a job start?' });
		await form.getByLabel('Nodes', { exact: true }).fill('1');
		await form.getByLabel('GPUs per node', { exact: true }).fill('1');
		await form.getByRole('button', { name: 'Ask' }).click();
		const estimate = form.getByTestId('what-if-estimate');
		await L.eventually('the answer reads a time and how far it is', async () => {
			const text = (await estimate.innerText({ timeout: 2000 })).trim();
			return /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \(in [0-9]+m [0-9]+s\)$/.test(text) || text;
		}, 40000);
		// the reason says how far its reservation is ("in 9m59s"): compared without the numbers
		const digits = (t) => t.replace(/[0-9]+/g, 'N');
		const reason = (await form.getByTestId('what-if-reason').innerText()).trim();
		assert.ok(want.reason && digits(reason) === digits(`Waits because: ${want.reason}`),
			`the reason shown: '${reason}', the API's: '${want.reason}'`);
		const link = form.getByTestId('what-if-waits').getByRole('link', { name: String(id), exact: true });
		assert.equal(await link.getAttribute('href'), `#/jobs/${id}`);
		await link.click();
		await h1(page, `Job ${id}`).waitFor();
	} finally {
		await api('POST', `/v1/jobs/${id}/cancel`, { token: E.TY_ADMIN_TOKEN });
		await L.eventually('the job that fills the nodes ends', async () => (await apiJob(id)).state === 'cancelled', 60000);
	}
});

async function nodeState(page, node) {
	return (await page.locator(`tr[data-node="${node}"]`).getByTestId('node-state').textContent()).trim();
}

tcase('an admin drains node-b from the Nodes page and undrains it; a member sees no drain buttons', async () => {
	const page = await session(E.TY_ADMIN_TOKEN);
	await go(page, '#/nodes', 'Nodes');
	await page.getByRole('button', { name: 'Drain node-b' }).click();
	await page.getByRole('dialog').getByRole('button', { name: 'Confirm' }).click();
	await L.eventually('node-b reads draining or drained', async () =>
		['draining', 'drained'].includes(await nodeState(page, 'node-b')), 20000);
	const drained = (await api('GET', '/v1/nodes/node-b', { token: E.TY_ADMIN_TOKEN, expect: 200 })).json;
	assert.ok(['draining', 'drained'].includes(drained.state), `the API says node-b is ${drained.state}`);
	try {
		await page.getByRole('button', { name: 'Undrain node-b' }).click();
		await page.getByRole('dialog').getByRole('button', { name: 'Confirm' }).click();
		await L.eventually('node-b reads ready', async () => (await nodeState(page, 'node-b')) === 'ready', 20000);
	} finally { // leave the stack as found, whatever the page did
		await api('POST', '/v1/nodes/node-b/undrain', { token: E.TY_ADMIN_TOKEN, expect: 200 });
	}

	const member = await session(E.TY_TOKEN);
	await go(member, '#/nodes', 'Nodes');
	await member.locator('tr[data-node="node-b"]').waitFor();
	assert.equal(await member.getByRole('button', { name: /^(Drain|Undrain) / }).count(), 0,
		'a member is offered drain buttons');
});

tcase('a token revoked while signed in sends the user back to the login page with the API\'s message', async () => {
	const t = (await api('POST', '/v1/tokens', {
		token: E.TY_ADMIN_TOKEN, expect: 201,
		body: { name: 'browser-revoked', role: 'member', team: E.TY_TEAM },
	})).json;
	const page = await session(t.token);
	await go(page, '#/jobs', 'Jobs');
	await api('DELETE', `/v1/tokens/${t.id}`, { token: E.TY_ADMIN_TOKEN, expect: 204 });
	const refused = await api('GET', '/v1/jobs', { token: t.token });
	assert.equal(refused.status, 401);
	// the next call; the page's own live updates may make it first, and the
	// link is gone then
	await nav(page, 'Queue').click({ timeout: 5000 }).catch(() => {});
	await h1(page, 'Sign in').waitFor();
	await page.getByRole('alert').filter({ hasText: refused.json.detail }).waitFor();
	assert.equal(await storedToken(page), null, 'the revoked token is still stored');
});

tcase('an unreachable API shows the retry banner, never a blank page, and Retry recovers', async () => {
	const page = await session(E.TY_TOKEN);
	await go(page, '#/jobs', 'Jobs');
	// down until the test lets requests through, in the instant before its
	// click: the page's own polling (every 10 s without the feed) would
	// otherwise recover first and take the button away
	let down = true;
	await page.route('**/v1/**', (r) => (down ? r.abort('connectionrefused') : r.continue()));
	await nav(page, 'Queue').click();
	const banner = page.getByRole('alert').filter({ hasText: 'Cannot reach the API' });
	await banner.waitFor();
	await page.getByRole('button', { name: 'Retry' }).waitFor();
	assert.ok(await page.getByRole('navigation', { name: 'Main' }).isVisible(), 'the navigation is gone');
	assert.ok((await page.locator('body').innerText()).trim().length > 0, 'the page is blank');
	down = false;
	await page.getByRole('button', { name: 'Retry' }).click({ force: true });
	await h1(page, 'Queue').waitFor();
	await page.locator('table caption').first().waitFor();
	await L.eventually('the banner goes', async () => (await banner.count()) === 0, 10000);
});

tcase('every page is screenshotted and has no serious or critical axe-core violation', async () => {
	const sweep = (await api('POST', '/v1/sweeps', {
		token: E.TY_TOKEN, expect: 201,
		body: {
			team: E.TY_TEAM, name: 'browser-sweep', trials: [{ x: 1 }, { x: 2 }],
			template: { command: ['/bin/true'], resources: { nodes: 1, gpus_per_node: 0 } },
		},
	})).json;
	cleanup.sweeps.push(sweep.id);
	const job = sweep.trials[0].job_id;
	const table = (p) => p.locator('table caption').first().waitFor();
	const pages = [
		['queue', '#/queue', 'Queue', table],
		['jobs', '#/jobs', 'Jobs', table],
		['job', `#/jobs/${job}`, `Job ${job}`, (p) => p.getByTestId('job-state').waitFor()],
		['teams', '#/teams', 'Teams', table],
		['team', `#/teams/${E.TY_TEAM}`, `Team ${E.TY_TEAM}`, null],
		['nodes', '#/nodes', 'Nodes', table],
		['usage', '#/usage', 'Usage', (p) => p.getByText('Export CSV').first().waitFor()],
		['sweeps', '#/sweeps', 'Sweeps', table],
		['sweep', `#/sweeps/${sweep.id}`, `Sweep ${sweep.id}`, (p) => p.locator(`tr[data-job="${job}"]`).waitFor()],
	];
	const problems = [];
	const check = async (page, name) => {
		await page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`), fullPage: true });
		for (const v of await L.axeCheck(page))
			problems.push(`${name}: ${v}`);
	};
	const login = await session(null);
	await go(login, '#/login', 'Sign in');
	await check(login, 'login');
	const page = await session(E.TY_TOKEN);
	for (const [name, hash, heading, ready] of pages) {
		await go(page, hash, heading);
		if (ready)
			await ready(page);
		await check(page, name);
	}
	assert.deepEqual(problems, [], `axe-core found serious or critical violations:\n${problems.join('\n')}`);
});

tcase('the Usage page\'s Export CSV downloads the API\'s CSV', async () => {
	const page = await session(E.TY_TOKEN);
	await go(page, '#/usage', 'Usage');
	const [dl] = await Promise.all([page.waitForEvent('download'), page.getByText('Export CSV').first().click()]);
	const file = path.join(ARTIFACTS, 'usage.csv');
	await dl.saveAs(file);
	const first = fs.readFileSync(file, 'utf8').split('\n')[0];
	assert.ok(first.includes(','), `the download's first line is not a CSV header: '${first}'`);
});

// Marks, in the page's own clock (ms from navigation start), when the first
// table rows appear, when the first click lands and when the first row
// changes after it (the next page rendered).
function speedProbe(token) {
	try {
		if (token)
			sessionStorage.setItem('trainyard.token', token);
	} catch { /* about:blank has no storage */ }
	const ty = (window.tySpeed = {});
	const look = () => {
		const body = document.querySelector('table tbody'); // the page's first table
		const rows = body ? body.querySelectorAll('tr') : [];
		if (!rows.length)
			return;
		const key = rows[0].getAttribute('data-job') + '|' + rows[0].textContent;
		if (ty.firstRows === undefined) {
			ty.firstRows = performance.now();
			ty.firstKey = key;
			ty.rows = rows.length;
		} else if (ty.clickAt !== undefined && ty.changed === undefined && key !== ty.firstKey) {
			ty.changed = performance.now();
		}
	};
	new MutationObserver(look).observe(document, { subtree: true, childList: true, characterData: true });
	document.addEventListener('click', () => {
		if (ty.clickAt === undefined)
			ty.clickAt = performance.now();
	}, true);
}

async function probe(page, key) {
	await L.eventually(`speed mark ${key}`,
		() => page.evaluate((k) => window.tySpeed !== undefined && window.tySpeed[k] !== undefined, key), 30000);
	return page.evaluate(() => window.tySpeed);
}

function judge(figures, name, ms, goal) {
	figures[name] = Math.round(ms);
	if (ms > goal)
		console.log(`browser: warning: ${name} ${Math.round(ms)} ms is above the goal of ${goal} ms`);
	assert.ok(ms <= goal * SLACK, `${name} ${Math.round(ms)} ms is above ${SLACK}× the goal of ${goal} ms`);
}

tcase('the first load and the Queue page with 10,000 pending jobs are fast enough', async () => {
	const figures = { machine: `${os.cpus().length} CPUs, ${os.cpus()[0].model}`, chromium: browser.version() };
	const cold = async () => {
		const page = await session(null); // a new context: a cold cache
		await page.context().addInitScript(speedProbe, E.TY_TOKEN);
		await page.goto(ui + '#/queue');
		return page;
	};
	let page = await cold();
	judge(figures, 'first_load_ms', (await probe(page, 'firstRows')).firstRows, GOAL_FIRST_LOAD_MS);

	// 10,000 pending jobs in ten sweeps of 1,000 trials that can never start
	// (64 GPUs a node), cancelled again when done
	await api('POST', '/v1/teams', { token: E.TY_ADMIN_TOKEN, body: { name: 'bulk', nominal_gpus: 64 }, expect: 201 });
	const sweeps = [];
	try {
		const t0 = Date.now();
		for (let i = 0; i < 10; i += 2) {
			const two = await Promise.all([i, i + 1].map((n) => api('POST', '/v1/sweeps', {
				token: E.TY_ADMIN_TOKEN, expect: 201,
				body: {
					team: 'bulk', name: `bulk-${n}`, random: { count: 1000, seed: n, params: { x: { uniform: [0, 1] } } },
					template: { command: ['/bin/true'], resources: { nodes: 1, gpus_per_node: 64 }, queue_if_unschedulable: true },
				},
			})));
			sweeps.push(...two.map((r) => r.json.id));
		}
		figures.submit_10k_s = (Date.now() - t0) / 1000;
		const q = (await api('GET', '/v1/queue?team=bulk&limit=1', { token: E.TY_ADMIN_TOKEN, expect: 200 })).json;
		assert.ok(q.items.length === 1 && q.next_cursor, 'the bulk jobs are not in the queue');

		page = await cold();
		const s = await probe(page, 'firstRows');
		assert.ok(s.rows <= 500, `the Queue page rendered ${s.rows} rows at once: more than one page`);
		await page.getByRole('button', { name: /^next/i }).or(page.getByRole('link', { name: /^next/i })).first().click();
		const n = await probe(page, 'changed');
		figures.queue_10k_first_rows_ms = Math.round(n.firstRows);
		figures.queue_10k_next_page_ms = Math.round(n.changed - n.clickAt);
		// the page's own times: the test's wait between the rows and its click is not the page's
		judge(figures, 'queue_10k_usable_ms', n.firstRows + (n.changed - n.clickAt), GOAL_QUEUE_10K_MS);
	} finally {
		fs.writeFileSync(path.join(ARTIFACTS, 'speed.json'), JSON.stringify(figures, null, 2) + '\n');
		console.log(`browser: speed ${JSON.stringify(figures)}`);
		for (const id of sweeps) // 1,000 trials each, locked in id order as the scheduler does
			await api('POST', `/v1/sweeps/${id}/cancel`, { token: E.TY_ADMIN_TOKEN, expect: 200 });
	}
});

tcase('every request the dashboard made is a documented operation', async () => {
	assert.ok(requests.length > 0, 'no /v1 request was recorded');
	const seen = new Map();
	for (const r of requests) {
		const u = new URL(r.url);
		const key = `${r.method} ${u.pathname}?${[...new Set(u.searchParams.keys())].sort().join('&')}`;
		if (!seen.has(key))
			seen.set(key, openapi.requestProblem(r));
	}
	const undocumented = [...seen].filter(([, why]) => why).map(([k, why]) => `${k}: ${why}`);
	console.log(`browser: ${requests.length} requests, ${seen.size} distinct operations and paths`);
	assert.deepEqual(undocumented, [], `requests not in docs/openapi.json:\n${undocumented.join('\n')}`);
});

tcase('every response the dashboard got is what docs/openapi.json says of it', async () => {
	assert.ok(validated > 0, 'no response was validated');
	console.log(`browser: ${validated} responses validated`);
	const distinct = [...new Set(misfits)];
	assert.deepEqual(distinct, [], `responses that differ from docs/openapi.json:\n${distinct.slice(0, 40).join('\n')}`);
});
