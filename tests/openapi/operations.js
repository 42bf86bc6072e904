// The operations of docs/openapi.json: which one a request is
// (findOperation, checkRequests) and whether a response is what the
// document says it is (validateResponse). Used by api-test.js, by
// check-requests.js and by the browser tests.
'use strict';

const fs = require('fs');
const path = require('path');
let Ajv2020, addFormats;
try {
	Ajv2020 = require('ajv/dist/2020');
	addFormats = require('ajv-formats');
} catch (e) {
	throw new Error(`operations.js: ${e.message.split('\n')[0]}: run 'npm ci --prefix tests/openapi' (tests/run does)`);
}

const DOC_PATH = path.join(__dirname, '..', '..', 'docs', 'openapi.json');
const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];
const DOC_ID = 'openapi.json';

const doc = JSON.parse(fs.readFileSync(DOC_PATH, 'utf8'));

// OpenAPI 3.1 schemas are JSON Schema 2020-12; the document is added whole
// so that a response schema's "#/components/..." resolve within it
const ajv = new Ajv2020({ allErrors: true, strict: false, validateFormats: true });
addFormats(ajv);
ajv.addSchema(doc, DOC_ID);

const operations = [];
for (const [tmpl, item] of Object.entries(doc.paths || {})) {
	const segments = tmpl.split('/').slice(1);
	for (const method of METHODS) {
		if (!item[method])
			continue;
		operations.push({
			method: method.toUpperCase(),
			path: tmpl,
			operationId: item[method].operationId,
			operation: item[method],
			segments,
			templated: segments.filter((s) => s.startsWith('{')).length,
		});
	}
}

// the path of a URL, absolute or not, without its query and fragment
function urlPath(url) {
	const u = new URL(url, 'http://localhost');
	return u.pathname;
}

// The operation a request is, or null. A template segment ({id}) matches
// any one non-empty segment; where several match, the one with the fewest
// template segments wins (/v1/jobs/search before /v1/jobs/{id}).
function findOperation(method, url) {
	const m = String(method).toUpperCase();
	const segs = urlPath(url).split('/').slice(1).map((s) => {
		try {
			return decodeURIComponent(s);
		} catch {
			return s;
		}
	});
	let best = null;
	for (const op of operations) {
		if (op.method !== m || op.segments.length !== segs.length)
			continue;
		const ok = op.segments.every((t, i) =>
			t.startsWith('{') && t.endsWith('}') ? segs[i] !== '' : t === segs[i]);
		if (ok && (!best || op.templated < best.templated))
			best = op;
	}
	return best;
}

// the media type alone, lowercased: "application/json; charset=utf-8" -> "application/json"
function mediaType(ct) {
	return String(ct || '').split(';')[0].trim().toLowerCase();
}

function deref(obj) {
	while (obj && obj.$ref) {
		const parts = obj.$ref.replace(/^#\//, '').split('/')
			.map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
		obj = parts.reduce((o, k) => (o ? o[k] : undefined), doc);
	}
	return obj;
}

function pointer(parts) {
	return '#/' + parts.map((p) => String(p).replace(/~/g, '~0').replace(/\//g, '~1')).join('/');
}

const compiled = new Map();
function validatorFor(op, statusKey, contentKey) {
	const ref = DOC_ID + pointer(['paths', op.path, op.method.toLowerCase(), 'responses',
		statusKey, 'content', contentKey, 'schema']);
	if (!compiled.has(ref))
		compiled.set(ref, ajv.compile({ $ref: ref }));
	return compiled.get(ref);
}

// The ways a response differs from what the document says of it ([] when
// it does not): the status must be documented (exactly, as 4XX, or as
// default), the content type must be one documented for it (an empty body
// where none is), and a JSON body must validate against its schema.
function validateResponse(op, status, contentType, bodyText) {
	const errors = [];
	const responses = op.operation.responses || {};
	const code = String(status);
	const statusKey = [code, code[0] + 'XX', 'default'].find((k) => responses[k]);
	if (!statusKey)
		return [`status ${code} is not documented for ${op.method} ${op.path}`];
	const response = deref(responses[statusKey]);
	const content = response.content || {};
	const body = bodyText == null ? '' : String(bodyText);
	if (Object.keys(content).length === 0) {
		if (body !== '')
			errors.push(`status ${code} is documented without a body, got ${body.length} bytes`);
		return errors;
	}
	const mt = mediaType(contentType);
	const contentKey = Object.keys(content).find((k) => mediaType(k) === mt) ||
		Object.keys(content).find((k) => {
			const [t, s] = mediaType(k).split('/');
			return s === '*' && (t === '*' || t === mt.split('/')[0]);
		});
	if (!contentKey) {
		errors.push(`content type '${contentType}' is not documented for status ${code} ` +
			`(documented: ${Object.keys(content).join(', ')})`);
		return errors;
	}
	if (!content[contentKey].schema)
		return errors;
	let value = body;
	if (mt === 'application/json' || mt.endsWith('+json')) {
		try {
			value = JSON.parse(body);
		} catch (e) {
			return [`the body is not JSON: ${e.message}`];
		}
	}
	const validate = validatorFor(op, statusKey, contentKey);
	if (!validate(value)) {
		for (const e of validate.errors)
			errors.push(`${e.instancePath || '(body)'} ${e.message}` +
				(e.params && Object.keys(e.params).length ? ` ${JSON.stringify(e.params)}` : ''));
	}
	return errors;
}

// a parameter object, its $ref into components resolved
function deref(p) {
	if (!p || !p.$ref)
		return p;
	return p.$ref.replace(/^#\//, '').split('/').reduce((o, k) => o && o[k], doc);
}

// The query parameter names of url that op does not document (its own
// parameters and its path item's).
function undocumentedQuery(op, url) {
	const documented = new Set([...(doc.paths[op.path].parameters || []), ...(op.operation.parameters || [])]
		.map(deref).filter((p) => p && p.in === 'query').map((p) => p.name));
	const names = [...new URL(url, 'http://localhost').searchParams.keys()];
	return [...new Set(names)].filter((n) => !documented.has(n));
}

// Why a request ({method, url}) is not a documented operation, or null:
// no operation matches, or it sends query parameters the operation does not take.
function requestProblem(r) {
	const op = findOperation(r.method, r.url);
	if (!op)
		return 'no operation of docs/openapi.json matches';
	const extra = undocumentedQuery(op, r.url);
	return extra.length ? `${op.operationId} documents no query parameter ${extra.join(', ')}` : null;
}

// The requests of a list ({method, url}) that are not documented, each with its `why`.
function checkRequests(records) {
	return records.map((r) => ({ ...r, why: requestProblem(r) })).filter((r) => r.why);
}

module.exports = { doc, operations, findOperation, requestProblem, validateResponse, checkRequests, mediaType };
