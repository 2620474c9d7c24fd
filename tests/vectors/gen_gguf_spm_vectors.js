// gen_gguf_spm_vectors.js - a SentencePiece-BPE vocabulary shaped like Llama-2 / TinyLlama's
// tokenizer.model (pieces with scores, <unk> <s> </s>, the 256 <0xNN> byte pieces, merged pieces
// by descending score, single characters last with the lowest scores), converted to tokenizer.json
// the way transformers' SentencePiece converter does it, and Hugging Face `tokenizers` ids for
// inputs, for test_gguf_tokenizer: GGUF metadata carries the pieces and scores (no merges), and
// the workbench must derive the same merges and give the same ids.
//
// Run from the repository root (node >= 18):
//   (cd tests/node && npm ci --no-audit --no-fund)
//   NODE_PATH=tests/node/node_modules node tests/vectors/gen_gguf_spm_vectors.js
// It writes tests/vectors/gguf_spm_legacy_tokenizer.json (Llama-2's legacy normalizer shape),
// tests/vectors/gguf_spm_first_tokenizer.json (Metaspace prepend_scheme "first", TinyLlama's newer
// conversions) and tests/vectors/gguf_spm_vectors.json (the pieces' scores and the cases).
'use strict';
const path = require('path');
const { Tokenizer, DIR, rng, added, symbolWords, charCounts, countPairs, bestPair, mergePair, writeFixture,
  writeVectors } = require('./vector_util');

// words from syllables, with a few accented and non-Latin ones (SentencePiece keeps frequent
// characters as pieces and leaves rare ones to byte fallback)
const SYL = ['ka', 'lo', 'mi', 'ne', 'ru', 'ta', 'shi', 'on', 'er', 'an', 'th', 'es', 'é', 'ü', 'ß',
  'да', 'не', '日本', '語', 'ing', 'ed', 'the', 'qu', 'x', 'z', '1', '23', "'s"];
function corpus(seed, nWords) {
  const r = rng(seed);
  const words = [];
  for (let i = 0; i < nWords; i++) {
    let w = '';
    const n = 1 + (r() % 3);
    for (let k = 0; k < n; k++) w += SYL[Math.min(r() % SYL.length, r() % SYL.length)];
    if (r() % 9 === 0) w = w[0].toUpperCase() + w.slice(1);
    if (r() % 13 === 0) w += ['.', ',', '!', '?'][r() % 4];
    words.push(w);
  }
  return words;
}

// SentencePiece-style BPE: words are '▁' + word; merges by pair count, ties by the pair's text.
function trainPieces(words, nMerges) {
  const counts = new Map();
  for (const w of words) counts.set('▁' + w, (counts.get('▁' + w) || 0) + 1);
  let ws = symbolWords(counts);
  const chars = charCounts(ws);
  const pieces = [];
  const seen = new Set();
  for (let m = 0; m < nMerges; m++) {
    const best = bestPair(countPairs(ws, '\u0000'));
    if (best === null) break;
    const [a, b] = best.split('\u0000');
    if (!seen.has(a + b)) { seen.add(a + b); pieces.push(a + b); }
    ws = mergePair(ws, a, b);
  }
  // every character of a piece is a piece itself, as in a real SentencePiece model
  const inPieces = new Set(pieces.flatMap((p) => Array.from(p)));
  const keep = [...chars.entries()].filter(([ch, c]) => c >= 15 || inPieces.has(ch)).sort((x, y) => y[1] - x[1] || (x[0] < y[0] ? -1 : 1))
    .map(([ch]) => ch);
  return { pieces, chars: keep };
}

// The model proto: [piece, score] in id order.
function proto() {
  const { pieces, chars } = trainPieces(corpus(5, 6000), 700);
  const out = [['<unk>', 0], ['<s>', 0], ['</s>', 0]];
  for (let b = 0; b < 256; b++) out.push(['<0x' + b.toString(16).toUpperCase().padStart(2, '0') + '>', 0]);
  let score = 0;
  const have = new Set(out.map((p) => p[0]));
  for (const p of pieces) if (!have.has(p)) { have.add(p); out.push([p, --score]); }
  for (const c of chars) if (!have.has(c)) { have.add(c); out.push([c, --score]); }
  return out;
}

// transformers' SentencePieceExtractor.extract(vocab_scores): every split of a piece into two
// pieces of the vocabulary, sorted by (left id, right id) within the piece; then all of them by
// descending score of the piece (a stable sort, so ties keep vocabulary order).
function extractMerges(pieces) {
  const vocab = new Map(pieces.map(([p], i) => [p, i]));
  const merges = [];
  for (const [piece, score] of pieces) {
    const cps = Array.from(piece);
    const local = [];
    for (let i = 1; i < cps.length; i++) {
      const l = cps.slice(0, i).join(''), r = cps.slice(i).join('');
      if (vocab.has(l) && vocab.has(r)) local.push([l, r, score]);
    }
    local.sort((x, y) => vocab.get(x[0]) - vocab.get(y[0]) || vocab.get(x[1]) - vocab.get(y[1]));
    merges.push(...local);
  }
  merges.sort((x, y) => y[2] - x[2]); // Array.prototype.sort is stable
  return merges.map(([l, r]) => [l, r]);
}

const DECODER = { type: 'Sequence', decoders: [
  { type: 'Replace', pattern: { String: '▁' }, content: ' ' }, { type: 'ByteFallback' },
  { type: 'Fuse' }, { type: 'Strip', content: ' ', start: 1, stop: 0 },
] };
const POST = { type: 'TemplateProcessing',
  single: [{ SpecialToken: { id: '<s>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
  pair: [{ SpecialToken: { id: '<s>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } },
    { SpecialToken: { id: '<s>', type_id: 1 } }, { Sequence: { id: 'B', type_id: 1 } }],
  special_tokens: { '<s>': { id: '<s>', ids: [1], tokens: ['<s>'] } } };

function tokenizerJson(pieces, shape) {
  const vocab = {};
  pieces.forEach(([p], i) => { vocab[p] = i; });
  const legacy = shape === 'legacy';
  return {
    version: '1.0', truncation: null, padding: null,
    added_tokens: [added(0, '<unk>'), added(1, '<s>'), added(2, '</s>')],
    normalizer: legacy ? { type: 'Sequence', normalizers: [{ type: 'Prepend', prepend: '▁' },
      { type: 'Replace', pattern: { String: ' ' }, content: '▁' }] } : null,
    pre_tokenizer: legacy ? null : { type: 'Metaspace', replacement: '▁', prepend_scheme: 'first', split: false },
    post_processor: POST,
    decoder: DECODER,
    model: { type: 'BPE', dropout: null, unk_token: '<unk>', continuing_subword_prefix: null,
      end_of_word_suffix: null, fuse_unk: true, byte_fallback: true, ignore_merges: false, vocab,
      merges: extractMerges(pieces) },
  };
}

function inputs() {
  const out = ['', ' ', '  ', 'a', 'hello world', ' leading', 'trailing ', 'two  spaces', '\t tab',
    'line\nbreak', '\n\n', 'Kalo mine ruta.', 'the thing is', "it's", 'ÉCOLE é ü ß', 'да не',
    '日本語のテキスト', '😀 emoji 👍🏽', 'x\u0301 combining', '▁ literal mark', '▁▁x', '<s>', '<s>hello',
    'a<s>b', 'hi </s>', '<unk>', '</s></s>', ' <s> ', '<0x41>', 'mixed 123 4567', 'ka lo mi ne',
    '\u00a0nbsp', 'U+2028\u2028x', 'kalokalo kalo', 'KALO', 'shionerantha'];
  const words = corpus(77, 4000);
  const r = rng(99);
  const extra = ['  ', ' ', '\n', '<s>', '</s>', '🙂', 'ж', '中', '\t', '.', 'é'];
  for (let i = 0; i < 400; i++) {
    let s = '';
    const n = 1 + (r() % 8);
    for (let k = 0; k < n; k++) {
      s += words[r() % words.length];
      s += r() % 5 === 0 ? extra[r() % extra.length] : ' ';
    }
    if (r() % 3 === 0) s = s.trimEnd();
    out.push(s);
  }
  return out;
}

async function main() {
  const pieces = proto();
  const files = [['gguf_spm_legacy_tokenizer.json', 'legacy'], ['gguf_spm_first_tokenizer.json', 'first']];
  const tokenizers = [];
  const texts = inputs();
  for (const [name, shape] of files) {
    writeFixture(name, tokenizerJson(pieces, shape));
    const tok = Tokenizer.fromFile(path.join(DIR, name));
    const cases = [];
    for (const t of texts) {
      const enc = await tok.encode(t, null, { addSpecialTokens: false });
      cases.push({ hex: Buffer.from(t, 'utf8').toString('hex'), ids: Array.from(enc.getIds()) });
    }
    tokenizers.push({ file: 'tests/vectors/' + name, cases });
  }
  const out = { generator: 'tests/vectors/gen_gguf_spm_vectors.js', library: '@anush008/tokenizers 0.6.0',
    pieces: pieces.map(([p, s]) => [p, s]), tokenizers };
  writeVectors('gguf_spm_vectors.json', out);
  console.log(`${pieces.length} pieces, ${tokenizers[0].cases.length} cases per tokenizer`);
}

main().catch((e) => { console.error(e); process.exit(1); });
