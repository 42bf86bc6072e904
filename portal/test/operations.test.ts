// Every request the dashboard makes is a documented operation: the calls in
// src/api.ts, the list at its top, and docs/openapi.json agree.
import { describe, expect, it } from 'vitest';
import source from '../src/api.ts?raw';
import openapi from '../../docs/openapi.json';

const norm = (path: string) => path.replace(/\$\{[^}]*\}|\{[^}]*\}/g, '{}');

function called(): string[] {
	const ops = new Set<string>();
	const re = /\b(?:json<[\s\S]*?>|request)\(\s*'(GET|POST|PATCH|DELETE)',\s*[`'](\/[^`']*)[`']/g;
	for (const m of source.matchAll(re)) ops.add(`${m[1]} ${norm(m[2])}`);
	return [...ops].sort();
}

function listed(): string[] {
	const head = source.slice(source.indexOf('Operations it calls'));
	const block = head.slice(0, head.search(/\n\s*\n/)); // up to the first blank line
	const ops = new Set<string>();
	for (const m of block.matchAll(/(GET|POST|PATCH|DELETE) (\/[^\s,]*[^\s,.])/g)) ops.add(`${m[1]} ${norm(m[2])}`);
	return [...ops].sort();
}

function documented(): Set<string> {
	const ops = new Set<string>();
	for (const [path, item] of Object.entries((openapi as { paths: Record<string, object> }).paths))
		for (const method of Object.keys(item))
			if (['get', 'post', 'patch', 'delete', 'put'].includes(method)) ops.add(`${method.toUpperCase()} ${norm(path)}`);
	return ops;
}

describe('operations', () => {
	it('finds the calls (the parser itself)', () => {
		expect(called()).toContain('GET /v1/jobs/{}/logs');
		expect(called()).toContain('POST /v1/nodes/{}/drain');
		expect(called().length).toBeGreaterThan(15);
	});
	it('the list at the top of api.ts is what it calls', () => {
		expect(listed()).toEqual(called());
	});
	it('every call is in docs/openapi.json', () => {
		const doc = documented();
		const missing = called().filter((op) => !doc.has(op));
		expect(missing).toEqual([]);
	});
});
