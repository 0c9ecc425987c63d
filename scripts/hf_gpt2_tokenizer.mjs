// hf_gpt2_tokenizer.mjs - GPT-2's tokenizer as Hugging Face runs it.
//
// Shared by gen_unicode_tables.mjs and check_tokenizer_classes.mjs. The
// reference is the npm package `tokenizers` (HF's Rust core), which is not a
// dependency of kiln: install it anywhere and point NODE_PATH at it, e.g.
//
//   (mkdir -p /tmp/hf && cd /tmp/hf && npm install tokenizers)
//   NODE_PATH=/tmp/hf/node_modules node scripts/gen_unicode_tables.mjs
//
// The package is also found when the current directory (or a parent) has it
// in node_modules.

import { createRequire } from 'node:module';
import path from 'node:path';
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

// createRequire resolves from the given file and also honours NODE_PATH.
const requirers = [path.join(process.cwd(), 'x.js'), path.join(root, 'scripts', 'x.js')].map(
  (from) => createRequire(from));

function resolveTokenizers() {
  for (const req of requirers) {
    try {
      return req.resolve('tokenizers');
    } catch (e) {
      if (e.code !== 'MODULE_NOT_FOUND') throw e;
    }
  }
  console.error(
    "cannot find the npm package 'tokenizers': run `npm install tokenizers` in some " +
      'directory and set NODE_PATH=<that directory>/node_modules');
  process.exit(2);
}

const main = resolveTokenizers();
export const hf = requirers[0](main);
/// The package's version, recorded in what the scripts generate.
export const hfVersion = JSON.parse(
  fs.readFileSync(path.join(path.dirname(main), 'package.json'), 'utf8')).version;

/// GPT-2's pre-tokenizer: ByteLevel without a prefix space, with its regex
/// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
export const preTokenizer = hf.byteLevelPreTokenizer(false, true);

/// The four classes the pattern distinguishes. A code point is in exactly
/// one: \p{L}, \p{N}, \s, or none of them ("other").
export const LETTER = 'L', NUMBER = 'N', SPACE = 'S', OTHER = 'O';

const isSurrogate = (c) => c >= 0xd800 && c <= 0xdfff;

/// Lengths (in code points) of the pieces HF's pre-tokenizer cuts `text`
/// into, keyed by the code-point offset where each piece starts.
function pieceLengths(text) {
  const starts = new Map();
  for (const [, [a, b]] of preTokenizer.preTokenizeString(text)) starts.set(a, b - a);
  return starts;
}

// Every probe has one code point c in a fixed context and asks whether one
// particular piece has length 2. The contexts are chosen so that the piece
// of interest always starts at the same place whatever c and the previous
// probe are, and so that only one class of c makes it 2 code points long:
//   letter: "a" c "1"     "ac" is one piece iff c is \p{L} ("1" is a number)
//   number: "1" c "a"     "1c" is one piece iff c is \p{N}
//   other:  "!" c "a"     "!c" is one piece iff c is not \s, \p{L}, \p{N}
//   space:  "a\t\t" c "a" "\t\t" is a piece iff c is \s: then \s+(?!\S)
//           stops before c (c is left for the next piece); else the run
//           "\t\t" is followed by non-space and splits into "\t", "\t"
// Probes of one kind are concatenated, thousands per call.
const probes = [
  { cls: LETTER, pre: 'a', post: '1', at: 0 },
  { cls: NUMBER, pre: '1', post: 'a', at: 0 },
  { cls: OTHER, pre: '!', post: 'a', at: 0 },
  { cls: SPACE, pre: 'a\t\t', post: '', at: 1, tail: 'a' },
];

/// HF's class of every code point: a string of 0x110000 class letters, with
/// '-' for the surrogates (not characters, so not in any text).
export function classifyAll(log = () => {}) {
  const cls = new Array(0x110000).fill('-');
  const hits = new Uint8Array(0x110000);
  const batch = 1 << 12; // HF is slower per probe on much longer texts
  for (const p of probes) {
    for (let lo = 0; lo < 0x110000; lo += batch) {
      const cps = [];
      for (let c = lo; c < Math.min(lo + batch, 0x110000); ++c) if (!isSurrogate(c)) cps.push(c);
      const unit = [...p.pre].length + 1 + [...p.post].length;
      const text = cps.map((c) => p.pre + String.fromCodePoint(c) + p.post).join('') + (p.tail ?? '');
      const lens = pieceLengths(text);
      cps.forEach((c, i) => {
        if (lens.get(i * unit + p.at) === 2) {
          ++hits[c];
          cls[c] = p.cls;
        }
      });
    }
    log(`probed ${p.cls}`);
  }
  for (let c = 0; c < 0x110000; ++c)
    if (!isSurrogate(c) && hits[c] !== 1)
      throw new Error(`U+${c.toString(16).toUpperCase()} answers ${hits[c]} of the 4 class probes`);
  return cls.join('');
}

/// [lo, hi] ranges of the code points of class `c`.
export function rangesOf(classes, c) {
  const out = [];
  for (let i = 0; i < classes.length; ++i) {
    if (classes[i] !== c) continue;
    let j = i;
    while (j + 1 < classes.length && classes[j + 1] === c) ++j;
    out.push([i, j]);
    i = j;
  }
  return out;
}

/// The reference file: one line per run of code points of one class,
/// "LO HI C" in hex (surrogates are left out).
export function formatReference(classes) {
  const lines = [
    '# The class GPT-2\'s pre-tokenizer gives every code point, as HF tokenizers ' +
      `${hfVersion} does:`,
    '# L letter (\\p{L}), N number (\\p{N}), S white space (\\s), O anything else.',
    '# "LO HI C" per run, in hex; surrogates are not characters and are left out.',
    '# Generated by scripts/gen_unicode_tables.mjs; do not edit.',
  ];
  for (let i = 0; i < classes.length; ++i) {
    if (classes[i] === '-') continue;
    let j = i;
    while (j + 1 < classes.length && classes[j + 1] === classes[i]) ++j;
    lines.push(`${i.toString(16).toUpperCase()} ${j.toString(16).toUpperCase()} ${classes[i]}`);
    i = j;
  }
  return lines.join('\n') + '\n';
}

/// GPT-2's full tokenizer built from the repository's data/gpt2 files, with
/// <|endoftext|> as a special token, as transformers' GPT-2 tokenizer has it.
export async function gpt2Tokenizer(dir = path.join(root, 'data', 'gpt2')) {
  const model = await hf.BPE.fromFile(path.join(dir, 'encoder.json'), path.join(dir, 'vocab.bpe'));
  const t = new hf.Tokenizer(model);
  t.setPreTokenizer(preTokenizer);
  t.addSpecialTokens(['<|endoftext|>']);
  return t;
}

/// A small deterministic generator (mulberry32), so that generated files
/// only change when HF does.
export function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/// `count` random texts that stress the pre-tokenisation: words, numbers,
/// symbols, every kind of white space, contractions (and near misses),
/// <|endoftext|>, and code points of every class HF has (`classes` as from
/// classifyAll), so new letters and numbers come up too.
export function randomTexts(seed, count, classes) {
  const rand = rng(seed);
  const pick = (xs) => xs[Math.floor(rand() * xs.length)];
  const byClass = {};
  for (const c of [LETTER, NUMBER, SPACE, OTHER]) byClass[c] = rangesOf(classes, c);
  const ofClass = (c) => {
    // Weighted by range, not by code point: otherwise CJK and the private
    // use planes would be nearly all there is.
    const [lo, hi] = pick(byClass[c]);
    return String.fromCodePoint(lo + Math.floor(rand() * (hi - lo + 1)));
  };
  const spaces = [' ', ' ', ' ', '\t', '\n', '\n', '\r', '\v', '\f', '\x1c', '\x1d', '\x1e',
    '\x1f', '\x85', '\xa0', '\u1680', '\u2000', '\u2009', '\u200a', '\u200b', '\u2028',
    '\u2029', '\u202f', '\u205f', '\u3000', '\ufeff'];
  const atoms = [
    () => (rand() < 0.5 ? ' ' : '') + Array.from({ length: 1 + Math.floor(rand() * 8) },
      () => pick('etaoinshrdlucmfwypvbgkqjxzETAOINSHRDLU')).join(''),
    () => (rand() < 0.5 ? ' ' : '') + String(Math.floor(rand() * 1e6)),
    () => (rand() < 0.3 ? ' ' : '') + Array.from({ length: 1 + Math.floor(rand() * 3) },
      () => pick('!"#$%&()*+,-./:;<=>?@[\\]^_`{|}~\'')).join(''),
    () => Array.from({ length: 1 + Math.floor(rand() * 4) }, () => pick(spaces)).join(''),
    () => pick(["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'RE", "'x", "'", "''s"]),
    () => (rand() < 0.3 ? ' ' : '') + Array.from({ length: 1 + Math.floor(rand() * 3) },
      () => ofClass(pick([LETTER, NUMBER, SPACE, OTHER]))).join(''),
    () => String.fromCodePoint(pick([0x1f642, 0x1f44d, 0x1f3fd, 0x200d, 0x301, 0xe9, 0x65e5])),
    () => (rand() < 0.1 ? '<|endoftext|>' : 'é'),
  ];
  return Array.from({ length: count }, () =>
    Array.from({ length: 1 + Math.floor(rand() * 16) }, () => pick(atoms)()).join(''));
}

/// The random-text reference: every text with the ids HF gives it.
export async function formatRandomCases(texts) {
  const tok = await gpt2Tokenizer();
  const lines = [
    `# Random texts and the ids HF tokenizers ${hfVersion} gives them with data/gpt2's files.`,
    '# A case a line: the text\'s UTF-8 bytes in hex, a tab, the ids separated by spaces.',
    '# Generated by scripts/gen_unicode_tables.mjs; do not edit.',
  ];
  for (const text of texts) {
    const ids = (await tok.encode(text)).getIds();
    lines.push(`${Buffer.from(text, 'utf8').toString('hex')}\t${ids.join(' ')}`);
  }
  return lines.join('\n') + '\n';
}
