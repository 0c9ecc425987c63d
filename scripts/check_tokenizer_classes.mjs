#!/usr/bin/env node
// check_tokenizer_classes.mjs - kiln's GPT-2 pre-tokenisation against HF's.
//
// Asks HF's tokenizer (the npm package `tokenizers`) for the class of every
// code point and compares it with
//   1. tests/gpt2/data/code_point_classes.txt, the committed reference,
//   2. transformer/lib/UnicodeTables.inc, kiln's tables,
//   3. with a built test binary: kiln's Tokenizer::split itself, on every
//      code point, and kiln's ids on fresh random texts against HF's (the
//      doctest cases that read the committed files, pointed at new ones).
//
//   (mkdir -p /tmp/hf && cd /tmp/hf && npm install tokenizers)
//   NODE_PATH=/tmp/hf/node_modules node scripts/check_tokenizer_classes.mjs \
//       [--tests build/bin/kiln_gpt2_tests] [--seed N] [--texts N]
//
// Exits non-zero on any difference. scripts/gen_unicode_tables.mjs
// regenerates the tables and the references from HF.

import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as H from './hf_gpt2_tokenizer.mjs';

const args = process.argv.slice(2);
const option = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 && i + 1 < args.length ? args[i + 1] : fallback;
};
const testBinary = option('--tests', ['bin', 'tests']
  .map((d) => path.join(H.root, 'build', d, 'kiln_gpt2_tests'))
  .find((p) => fs.existsSync(p)) ?? path.join(H.root, 'build', 'bin', 'kiln_gpt2_tests'));
const seed = Number(option('--seed', String(Date.now() % 1000000)));
const textCount = Number(option('--texts', '2000'));

const hex = (c) => 'U+' + c.toString(16).toUpperCase().padStart(4, '0');
let failed = false;

/// Differences between two class strings, summarised by (ours, HF's) class.
function compare(what, ours, hf) {
  const kinds = new Map();
  const examples = [];
  let n = 0;
  for (let c = 0; c < hf.length; ++c) {
    if (hf[c] === '-' || ours[c] === hf[c]) continue;
    ++n;
    const k = `${ours[c]} where HF has ${hf[c]}`;
    kinds.set(k, (kinds.get(k) ?? 0) + 1);
    if (examples.length < 10) examples.push(`${hex(c)} ${ours[c]}/${hf[c]}`);
  }
  console.log(`${what}: ${n} code points differ from HF` +
    (n ? ` (${[...kinds].map(([k, v]) => `${v} ${k}`).join(', ')}; e.g. ${examples.join(', ')})` : ''));
  if (n) failed = true;
}

const t0 = Date.now();
const hf = H.classifyAll();
console.log(`HF tokenizers ${H.hfVersion}: classified 0..10FFFF in ` +
  `${((Date.now() - t0) / 1000).toFixed(1)} s`);

// 1. The committed reference.
const refPath = path.join(H.root, 'tests', 'gpt2', 'data', 'code_point_classes.txt');
const ref = new Array(0x110000).fill('-');
for (const line of fs.readFileSync(refPath, 'utf8').split('\n')) {
  if (!line || line.startsWith('#')) continue;
  const [lo, hi, cls] = line.split(' ');
  for (let c = parseInt(lo, 16); c <= parseInt(hi, 16); ++c) ref[c] = cls;
}
compare(path.relative(H.root, refPath), ref, hf);

// 2. kiln's tables: a letter, else a number, else white space, else other.
const incPath = path.join(H.root, 'transformer', 'lib', 'UnicodeTables.inc');
const inc = fs.readFileSync(incPath, 'utf8');
const tables = new Array(0x110000).fill('O');
for (const [name, cls] of [['kSpaces', 'S'], ['kNumbers', 'N'], ['kLetters', 'L']]) {
  const body = inc.slice(inc.indexOf(name)).split('};')[0];
  for (const [, lo, hi] of body.matchAll(/\{0x([0-9A-F]+), 0x([0-9A-F]+)\}/g))
    for (let c = parseInt(lo, 16); c <= parseInt(hi, 16); ++c) tables[c] = cls;
}
compare(path.relative(H.root, incPath), tables, hf);

// 3. kiln itself, through its tests, on HF's answers of today.
if (fs.existsSync(testBinary)) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-hf-check-'));
  fs.writeFileSync(path.join(dir, 'code_point_classes.txt'), H.formatReference(hf));
  fs.writeFileSync(path.join(dir, 'tokenizer_random.txt'),
    await H.formatRandomCases(H.randomTexts(seed, textCount, hf)));
  const run = spawnSync(testBinary,
    ['-tc=every code point has HF*,random texts encode as HF does'],
    { env: { ...process.env, KILN_GPT2_TEST_DATA: dir }, encoding: 'utf8' });
  const out = (run.stdout ?? '') + (run.stderr ?? '');
  console.log(`kiln's split on every code point and ids of ${textCount} random texts ` +
    `(seed ${seed}): ${run.status === 0 ? 'same as HF' : 'DIFFERENT'}`);
  if (run.status !== 0) {
    console.log(out.split('\n').slice(-60).join('\n'));
    console.log(`(inputs kept in ${dir})`);
    failed = true;
  } else {
    fs.rmSync(dir, { recursive: true });
  }
} else {
  console.log(`no ${testBinary}: build kiln_gpt2_tests to compare kiln's split itself`);
}
process.exit(failed ? 1 : 0);
