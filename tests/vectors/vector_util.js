// vector_util.js - what the tokenizer vector generators in tests/vectors share: the Hugging Face
// `tokenizers` binding, a seeded random stream, added-token records, GPT-2's byte-to-character
// map, the steps of a plain count-based BPE trainer, and the two JSON writers (fixtures indented,
// vectors on one line).
// Not run by itself; the generators require it (see each generator's header for how it is run).
'use strict';
const fs = require('fs');
const path = require('path');
// resolved through NODE_PATH (tests/node/node_modules after `npm ci` there)
const { Tokenizer } = require('@anush008/tokenizers');

const DIR = __dirname;

// splitmix64 on BigInt: the same seeded stream on every machine.
function rng(seed) {
  let s = BigInt(seed);
  const M = (1n << 64n) - 1n;
  return () => {
    s = (s + 0x9e3779b97f4a7c15n) & M;
    let z = s;
    z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & M;
    z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & M;
    return Number((z ^ (z >> 31n)) & 0xffffffffn);
  };
}

// An added_tokens entry in tokenizer.json's field order; special unless o says otherwise.
const added = (id, content, o) => Object.assign({ id, content, single_word: false, lstrip: false,
  rstrip: false, normalized: false, special: true }, o || {});

// ---- BPE training steps: words are [symbols, count] pairs ------------------------------------

// Map word -> count to [[symbols], count], symbols being the word's code points.
const symbolWords = (counts) => [...counts.entries()].map(([w, c]) => [Array.from(w), c]);

// How often each code point occurs, weighted by word count.
function charCounts(words) {
  const chars = new Map();
  for (const [sy, c] of words) for (const ch of sy) chars.set(ch, (chars.get(ch) || 0) + c);
  return chars;
}

// Count adjacent symbol pairs, keyed a + sep + b; keep(a, b) may exclude pairs.
function countPairs(words, sep, keep) {
  const pc = new Map();
  for (const [sy, c] of words)
    for (let i = 0; i + 1 < sy.length; i++) {
      if (keep && !keep(sy[i], sy[i + 1])) continue;
      const k = sy[i] + sep + sy[i + 1];
      pc.set(k, (pc.get(k) || 0) + c);
    }
  return pc;
}

// The most frequent pair seen at least twice, ties to the smaller key; null when none.
function bestPair(pc) {
  let best = null, bc = 1;
  for (const [k, c] of pc) if (c > bc || (c === bc && best !== null && k < best)) { best = k; bc = c; }
  return best;
}

// Every word with each left-to-right occurrence of a, b fused into one symbol.
function mergePair(words, a, b) {
  return words.map(([sy, c]) => {
    const o = [];
    for (let i = 0; i < sy.length; i++) {
      if (i + 1 < sy.length && sy[i] === a && sy[i + 1] === b) { o.push(a + b); i++; } else o.push(sy[i]);
    }
    return [o, c];
  });
}

// GPT-2's bytes_to_unicode as [byte, character] pairs in GPT-2's id order (printable bytes first,
// then the rest mapped to U+0100 onwards).
function bytesToUnicode() {
  const bs = [];
  for (let b = 0x21; b <= 0x7e; b++) bs.push(b);
  for (let b = 0xa1; b <= 0xac; b++) bs.push(b);
  for (let b = 0xae; b <= 0xff; b++) bs.push(b);
  const cs = bs.slice();
  let n = 0;
  for (let b = 0; b < 256; b++) {
    if (!bs.includes(b)) {
      bs.push(b);
      cs.push(256 + n);
      n++;
    }
  }
  return bs.map((b, i) => [b, String.fromCodePoint(cs[i])]);
}

// ---- writers ----------------------------------------------------------------------------------

// A tokenizer.json fixture in DIR, indented by one space as the committed files are.
function writeFixture(name, obj) {
  fs.writeFileSync(path.join(DIR, name), JSON.stringify(obj, null, 1) + '\n');
}

// A vectors file in DIR, on one line.
function writeVectors(name, obj) {
  fs.writeFileSync(path.join(DIR, name), JSON.stringify(obj) + '\n');
}

module.exports = { Tokenizer, DIR, rng, added, symbolWords, charCounts, countPairs, bestPair,
  mergePair, bytesToUnicode, writeFixture, writeVectors };
