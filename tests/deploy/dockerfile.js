#!/usr/bin/env node
// Parses and validates one Dockerfile for check_manifests.py with rcjsuen's
// dockerfile-utils (pinned in package-lock.json, installed by `npm ci`).
//
//   node dockerfile.js FILE   prints {"diagnostics": [...], "stages": [...]}:
//     every problem the validator finds, each check at severity error
//     (line and column 1-based), and each build stage's instructions as
//     parsed; exit 0 even with problems (the caller reports them), 2 when
//     the file cannot be read

"use strict";
const fs = require("fs");
const { validate, ValidationSeverity } = require("dockerfile-utils");
const { DockerfileParser } = require("dockerfile-ast");

if (process.argv.length !== 3) {
	process.stderr.write("usage: node dockerfile.js FILE\n");
	process.exit(2);
}
const path = process.argv[2];
let text;
try {
	text = fs.readFileSync(path, "utf8");
} catch (e) {
	process.stderr.write(`dockerfile.js: cannot read '${path}': ${e.message}\n`);
	process.exit(2);
}

// the checks that default to a warning or to nothing count as failures too
const E = ValidationSeverity.ERROR;
const settings = {
	deprecatedMaintainer: E, directiveCasing: E, emptyContinuationLine: E,
	instructionCasing: E, instructionCmdMultiple: E, instructionEntrypointMultiple: E,
	instructionHealthcheckMultiple: E, instructionJSONInSingleQuotes: E,
	instructionWorkdirRelative: E,
};
const diagnostics = validate(text, settings).map((d) => ({
	line: d.range.start.line + 1,
	column: d.range.start.character + 1,
	message: d.message,
}));

const stages = [];
for (const ins of DockerfileParser.parse(text).getInstructions()) {
	const keyword = ins.getKeyword();
	const flags = {};
	for (const f of typeof ins.getFlags === "function" ? ins.getFlags() : [])
		flags[f.getName()] = f.getValue();
	const parsed = {
		keyword,
		line: ins.getRange().start.line + 1,
		flags,
		args: ins.getArguments().map((a) => a.getValue()),
	};
	if (keyword === "FROM") {
		stages.push({ name: ins.getBuildStage(), image: ins.getImage(),
			line: parsed.line, instructions: [] });
	} else if (stages.length) {
		stages[stages.length - 1].instructions.push(parsed);
	}
}
process.stdout.write(JSON.stringify({ diagnostics, stages }) + "\n");
