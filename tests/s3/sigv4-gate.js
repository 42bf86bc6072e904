#!/usr/bin/env node
// s3rver behind a gate that checks every request's AWS SigV4 signature
// with the AWS SDK's own signer: s3rver checks only the access key id.
'use strict';

const crypto = require('crypto');
const fs = require('fs');
const http = require('http');
const S3rver = require('s3rver');
const { SignatureV4 } = require('@smithy/signature-v4');
const { Hash } = require('@smithy/hash-node');

const USAGE = `usage: sigv4-gate.js --credentials-file FILE --directory DIR
       [--address 127.0.0.1] [--port 0] [--bucket NAME]...

FILE is the executor's --tier-credentials-file:
{"access_key_id": "S3RVER", "secret_access_key": "..."}; the id must be
S3RVER (the only one s3rver knows), the secret is any. Prints
"sigv4-gate listening on ADDRESS:PORT" when ready.`;

const ALGORITHM = 'AWS4-HMAC-SHA256';
const UNSIGNED = 'UNSIGNED-PAYLOAD';

function die(msg) {
  console.error(`sigv4-gate: ${msg}\n${USAGE}`);
  process.exit(2);
}

function parseArgs(argv) {
  const o = { address: '127.0.0.1', port: 0, buckets: [] };
  for (let i = 0; i < argv.length; i += 2) {
    const [k, v] = [argv[i], argv[i + 1]];
    if (v === undefined) die(`'${k}' needs a value`);
    if (k === '--credentials-file') o.credentials = v;
    else if (k === '--directory') o.directory = v;
    else if (k === '--address') o.address = v;
    else if (k === '--port' && /^\d+$/.test(v) && Number(v) < 65536) o.port = Number(v);
    else if (k === '--bucket') o.buckets.push(v);
    else die(`unknown option or bad value '${k} ${v}'`);
  }
  if (!o.credentials) die('--credentials-file is missing');
  if (!o.directory) die('--directory is missing');
  let c;
  try {
    c = JSON.parse(fs.readFileSync(o.credentials, 'utf8'));
  } catch (e) {
    die(`cannot read credentials '${o.credentials}': ${e.message}`);
  }
  if (typeof c.access_key_id !== 'string' || typeof c.secret_access_key !== 'string' ||
      !c.secret_access_key)
    die(`'${o.credentials}' needs access_key_id and secret_access_key strings`);
  if (c.access_key_id !== 'S3RVER')
    die(`access key id '${c.access_key_id}' in '${o.credentials}': s3rver knows only S3RVER`);
  o.keyId = c.access_key_id;
  o.secret = c.secret_access_key;
  return o;
}

// S3's error document; a HEAD's answer carries only the status
function refuse(res, status, code, message) {
  const xml = '<?xml version="1.0" encoding="UTF-8"?>\n' +
    `<Error><Code>${code}</Code><Message>${message}</Message></Error>`;
  res.writeHead(status, { 'content-type': 'application/xml', 'x-amz-error-code': code,
                          'content-length': Buffer.byteLength(xml) });
  res.end(xml);
}

// "AWS4-HMAC-SHA256 Credential=ID/DATE/REGION/SERVICE/aws4_request,
//  SignedHeaders=a;b, Signature=HEX" into its parts, or null
function parseAuthorization(h) {
  const m = /^AWS4-HMAC-SHA256 (.*)$/.exec(h || '');
  if (!m) return null;
  const f = {};
  for (const part of m[1].split(',')) {
    const eq = part.indexOf('=');
    if (eq > 0) f[part.slice(0, eq).trim()] = part.slice(eq + 1).trim();
  }
  const scope = (f.Credential || '').split('/');
  if (scope.length !== 5 || scope[4] !== 'aws4_request' || !f.SignedHeaders ||
      !/^[0-9a-f]{64}$/.test(f.Signature || ''))
    return null;
  return { keyId: scope[0], date: scope[1], region: scope[2], service: scope[3],
           signedHeaders: f.SignedHeaders.split(';'), signature: f.Signature };
}

// 20261127T084500Z as a Date, or null
function amzDate(s) {
  const m = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(s || '');
  return m ? new Date(Date.UTC(m[1], m[2] - 1, m[3], m[4], m[5], m[6])) : null;
}

// The signature the SDK computes for the request as received, in hex.
async function expectedSignature(o, req, auth, body) {
  const url = new URL(req.url, 'http://gate');
  const query = {};
  for (const [k, v] of url.searchParams) {
    if (k in query) query[k] = [].concat(query[k], v);
    else query[k] = v;
  }
  const headers = {};
  for (const name of auth.signedHeaders) headers[name] = req.headers[name] || '';
  const signer = new SignatureV4({
    credentials: { accessKeyId: o.keyId, secretAccessKey: o.secret },
    region: auth.region, service: auth.service, sha256: Hash.bind(null, 'sha256'),
    uriEscapePath: false, // S3: the path is signed as sent, not encoded again
    applyChecksum: false,
  });
  const signed = await signer.sign(
    { method: req.method, protocol: 'http:', hostname: url.hostname,
      path: req.url.split('?')[0], query, headers, body },
    { signingDate: amzDate(req.headers['x-amz-date']), signingRegion: auth.region,
      signingService: auth.service, signableHeaders: new Set(auth.signedHeaders) });
  return /Signature=([0-9a-f]{64})$/.exec(signed.headers.authorization)[1];
}

// null when req may pass, else [status, code, message]
async function check(o, req, body) {
  const h = req.headers.authorization;
  if (!h)
    return [403, 'AccessDenied', 'Anonymous access is forbidden: requests must be signed (SigV4)'];
  const auth = parseAuthorization(h);
  if (!auth)
    return [400, 'AuthorizationHeaderMalformed', `the Authorization header is not ${ALGORITHM}`];
  if (auth.keyId !== o.keyId)
    return [403, 'InvalidAccessKeyId',
            'The AWS Access Key Id you provided does not exist in our records.'];
  const date = req.headers['x-amz-date'];
  if (!amzDate(date) || !auth.signedHeaders.includes('x-amz-date') ||
      !auth.signedHeaders.includes('host') || date.slice(0, 8) !== auth.date)
    return [403, 'AccessDenied',
            'x-amz-date and host must be signed, and the scope\'s date be x-amz-date\'s'];
  // without the header the signer hashes the body itself, as SigV4 outside S3 does
  const claimed = req.headers['x-amz-content-sha256'];
  if (claimed && claimed !== UNSIGNED &&
      crypto.createHash('sha256').update(body).digest('hex') !== claimed)
    return [400, 'XAmzContentSHA256Mismatch',
            'The provided \'x-amz-content-sha256\' header does not match what was computed.'];
  const want = Buffer.from(await expectedSignature(o, req, auth, body), 'hex');
  const got = Buffer.from(auth.signature, 'hex');
  if (want.length !== got.length || !crypto.timingSafeEqual(want, got))
    return [403, 'SignatureDoesNotMatch',
            'The request signature we calculated does not match the signature you provided. ' +
            'Check your key and signing method.'];
  return null;
}

// the request, unchanged, to s3rver; its answer back
function proxy(upstream, req, body, res) {
  const up = http.request({ host: upstream.address, port: upstream.port, method: req.method,
                            path: req.url, headers: req.headers }, (ures) => {
    res.writeHead(ures.statusCode, ures.headers);
    ures.pipe(res);
  });
  up.on('error', (e) => refuse(res, 502, 'InternalError', `s3rver: ${e.message}`));
  up.end(body);
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  const upstream = await new S3rver({
    address: '127.0.0.1', port: 0, directory: o.directory, silent: true,
    configureBuckets: o.buckets.map((name) => ({ name, configs: [] })),
  }).run();
  const server = http.createServer((req, res) => {
    const chunks = [];
    // the whole body first: its hash is checked before s3rver sees any of it
    req.on('data', (c) => chunks.push(c));
    req.on('end', async () => {
      const body = Buffer.concat(chunks);
      let refused;
      try {
        refused = await check(o, req, body);
      } catch (e) {
        refused = [403, 'SignatureDoesNotMatch', `cannot check the signature: ${e.message}`];
      }
      if (refused) {
        console.log(`${req.method} ${req.url}: ${refused[0]} ${refused[1]}`);
        refuse(res, ...refused);
      } else {
        proxy(upstream, req, body, res);
      }
    });
  });
  server.listen(o.port, o.address, () => {
    const a = server.address();
    console.log(`sigv4-gate listening on ${a.address}:${a.port} (s3rver on ` +
                `${upstream.address}:${upstream.port}, data in ${o.directory})`);
  });
  server.on('error', (e) => {
    console.error(`sigv4-gate: ${e.message}`);
    process.exit(1);
  });
}

main().catch((e) => {
  console.error(`sigv4-gate: ${e.stack || e}`);
  process.exit(1);
});
