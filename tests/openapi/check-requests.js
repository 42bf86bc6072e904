#!/usr/bin/env node
// check-requests.js FILE: FILE holds one {"method","url"} a line (the
// requests a client made, e.g. the SDK's tests); prints each that no
// operation of docs/openapi.json matches and exits 1 if there is one.
'use strict';

const fs = require('fs');
const { checkRequests } = require('./operations');

const file = process.argv[2];
if (!file || process.argv.length > 3) {
	console.error('usage: check-requests.js FILE (JSON lines of {"method","url"})');
	process.exit(2);
}
let text;
try {
	text = fs.readFileSync(file, 'utf8');
} catch (e) {
	console.error(`check-requests: cannot read '${file}': ${e.message}`);
	process.exit(2);
}
const records = [];
let bad = 0;
text.split('\n').forEach((line, i) => {
	if (line.trim() === '')
		return;
	let r;
	try {
		r = JSON.parse(line);
	} catch (e) {
		console.error(`check-requests: ${file}:${i + 1}: not JSON: ${e.message}`);
		bad++;
		return;
	}
	if (typeof r !== 'object' || r === null || typeof r.method !== 'string' || typeof r.url !== 'string') {
		console.error(`check-requests: ${file}:${i + 1}: needs string fields "method" and "url"`);
		bad++;
		return;
	}
	records.push(r);
});
if (bad)
	process.exit(2);
const undocumented = checkRequests(records);
for (const r of undocumented)
	console.log(`undocumented request: ${r.method.toUpperCase()} ${r.url}: ${r.why}`);
console.log(`check-requests: ${records.length} requests, ${undocumented.length} undocumented`);
process.exit(undocumented.length ? 1 : 0);
