// gen_tokenizer_vectors.js - expected token ids from the Hugging Face `tokenizers` library
// (Rust, through the @anush008/tokenizers native Node build) for the C tokenizer test.
//
// Run from the repository root (needs node >= 18; nothing is installed inside the repo):
//   build/tests/test_tokenizer --gen-small tests/vectors/small_tokenizer.json   # only if training changed
//   mkdir -p /tmp/tokvec && (cd /tmp/tokvec && npm install @anush008/tokenizers@0.6.0)
//   NODE_PATH=/tmp/tokvec/node_modules node tests/vectors/gen_tokenizer_vectors.js
//
// It writes tests/vectors/fixture_tokenizer.json and fixture_noregex_tokenizer.json (hand-built
// tokenizers exercising the array and string merge forms, added tokens with lstrip / rstrip /
// single_word / normalized, ignore_merges, add_prefix_space, use_regex=false) and
// tests/vectors/tokenizer_vectors.json: for each tokenizer, inputs as hex bytes and HF's ids.
// Inputs that are not valid UTF-8 are passed to HF as Buffer.toString('utf8'), i.e. decoded with
// U+FFFD per maximal invalid subpart, which is the rule the C encoder applies to raw bytes.
'use strict';
const path = require('path');
const { Tokenizer, DIR, rng, bytesToUnicode, writeFixture, writeVectors } = require('./vector_util');

function buildFixture(arrayForm, opts) {
  const vocab = {};
  let next = 0;
  for (const [, ch] of bytesToUnicode()) vocab[ch] = next++;
  const pairs = [
    ['t', 'h'], ['th', 'e'], ['Ġ', 'the'], ['i', 'n'], ['in', 'g'], ['Ġ', 't'], ['Ġt', 'h'],
    ['Ġth', 'ing'], ['e', 'r'], ['Ġ', 'h'], ['Ġh', 'e'], ['l', 'l'], ['e', 'll'], ['Ġh', 'ell'],
    ['Ġhell', 'o'], ['1', '2'], ['12', '3'], ['Ġ', 'Ġ'], ['ĠĠ', 'Ġ'], ['Ċ', 'Ċ'], ["'", 'm'],
    ['Ã', '©'], ['h', 'Ã©'], ['a', 'b'], ['Ġ', 'ab'], ['ð', 'Ł'], ['a', 'a'], ['aa', 'aa'],
    ['Ġ', 'a'], ['Ġa', 'a'],
    ['t', 'h'], // repeated pair: HF keeps the last rank
  ];
  for (const [a, b] of pairs) if (!(a + b in vocab)) vocab[a + b] = next++;
  for (const extra of ['Ġzebra', 'zebra', 'Ġthinking']) vocab[extra] = next++;
  const merges = pairs.map(([a, b]) => (arrayForm ? [a, b] : a + ' ' + b));
  const added = [];
  const add = (content, o) => {
    const id = content in vocab ? vocab[content] : next + added.filter((t) => !(t.content in vocab)).length;
    added.push(Object.assign({ id, content, single_word: false, lstrip: false, rstrip: false,
      normalized: false, special: false }, o));
  };
  add('<|endoftext|>', { special: true });
  add('[MASK]', { lstrip: true, rstrip: true, special: true });
  add('hello', { single_word: true, normalized: true });
  add('<tool>', { rstrip: true });
  add('Ġthe', {});
  add('ab', { lstrip: true, normalized: true });
  add('abc', { special: true });
  add('ünï', { single_word: true, special: true });
  return {
    version: '1.0', truncation: null, padding: null, added_tokens: added, normalizer: null,
    pre_tokenizer: { type: 'ByteLevel', add_prefix_space: opts.prefix, trim_offsets: true,
      use_regex: opts.regex },
    post_processor: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: false, use_regex: true },
    decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null,
      end_of_word_suffix: null, fuse_unk: false, byte_fallback: false,
      ignore_merges: opts.ignoreMerges, vocab, merges },
  };
}

const hostile = [
  '', ' ', '  ', '   x', 'x   ', 'a  b   c    d', '\n', '\n\n\t ', ' \n \n', '\t\t\tx\t',
  'trailing spaces   ', '   leading', '\r\n\r\n', 'a\u0085b\u0085 \u0085', '\u00a0x\u00a0 \u00a0',
  '\u2028\u2029 \u3000x\u3000', '\u000b\u000c', "I'm", "you'LL", 'it’s', "we've they're I'd don't",
  "'s't're've'm'll'd", "''''", "x's", "O'Neil's", '12345678901234567890', '1 22 333 4444',
  '3.14159, -2e10', '١٢٣ ٤٥٦', '½ ² ⅷ', 'hello world', 'Hello, World!', 'the thing thinking',
  '...!!!???', '@#$%^&*()_+-=[]{}|;:",.<>/?`~', 'emoji 😀😃😄 end', '👨‍👩‍👧‍👦 family',
  '🏳️‍🌈 flag 🇫🇷🇩🇪', '👍🏽👍🏿', 'CJK 東京都 日本語のテキスト 中文字符', '한국어 텍스트',
  'e\u0301\u0301\u0301 n\u0303 a\u0308', '\u0301 leading combining', 'العربية النص 123',
  'עברית', 'हिन्दी भाषा', 'ไทยภาษา', 'русский Ελληνικά mixed ABC', 'Straße façade café naïve',
  'ﬁ ﬂ ＡＢＣ ｱｲｳ', '\u200b\u200c\u200d zero width', '\ufeffbom', '\u{10ffff}\u{e000}',
  '<|endoftext|>', 'a<|endoftext|>b', ' <|endoftext|> ', '<|endoftext|><|endoftext|>',
  '<|endoftext', '|endoftext|>', '<|endoftext|>\n\nhello', 'x [MASK] y', 'x   [MASK]   y',
  '[MASK][MASK]', ' [MASK]', 'hello there', 'xhello there', 'hello_world', 'say hello.',
  'helloworld', 'héllo hello', '<tool>  args', '<tool>', 'abc ab a b', '  ab', 'xab', 'aabc',
  'ünï ünïx xünï', 'Ġthe the Ġ', 'zebra Ġzebra zebras', 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa',
  ' aaaaaaaaa aaaaaaa', 'thethethethe', '\u0000null\u0000', '\u0001\u0002\u001f\u007f',
];

function randomString(r) {
  const pools = [
    'abcdefghijklmnopqrstuvwxyz', 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', '0123456789', '     ', '\t\n\r',
    '.,;:!?\'"-()[]{}<>/\\|@#$%^&*_+=~`', 'éèêëñüöäßçø', '東京日本語中文字', '😀🚀👍🏽\u200d',
    '\u0301\u0303\u0308', 'عربي', '’‘“”…—', '\u0085\u00a0\u2028\u3000', 'ab', 'hello the ',
  ];
  const specials = ['<|endoftext|>', '[MASK]', '<tool>', "'s", "'ll", 'abc'];
  const n = r() % 40;
  let s = '';
  for (let i = 0; i < n; i++) {
    const k = r() % 20;
    if (k < 15) {
      const pool = Array.from(pools[k]);
      s += pool[r() % pool.length];
    } else if (k < 17) {
      s += specials[r() % specials.length];
    } else {
      s += ' '.repeat(r() % 6);
    }
  }
  return Buffer.from(s, 'utf8');
}

function randomBytes(r, n) {
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) {
    const k = r() % 4;
    // bias towards UTF-8 lead/continuation bytes so partial sequences are common
    b[i] = k === 0 ? 0x80 + (r() % 64) : k === 1 ? 0xc0 + (r() % 64) : r() % 256;
  }
  return b;
}

function inputs(seed) {
  const r = rng(seed);
  const out = hostile.map((s) => Buffer.from(s, 'utf8'));
  // invalid UTF-8: truncated, overlong, surrogates, stray continuations, out-of-range
  for (const hex of ['ff', 'c0af', 'e282', 'e282ac', 'eda080', 'f09f98', 'f09f9880', 'f4908080',
    '80bf', 'fe', 'c2', 'e0808f', 'f0808080', '61e28262', '20ff20', 'ffffff616263',
    'e29d', 'e29d2020', '3c7c656e646f66746578747c3eff'])
    out.push(Buffer.from(hex, 'hex'));
  for (let i = 0; i < 20; i++) out.push(randomBytes(r, 1 + (r() % 300)));
  for (let i = 0; i < 300; i++) out.push(randomString(r));
  out.push(Buffer.from('a'.repeat(5000)));
  out.push(Buffer.from(' '.repeat(3000) + 'x'));
  return out;
}

async function vectorsFor(file, seed) {
  const tok = Tokenizer.fromFile(path.join(DIR, file));
  const cases = [];
  for (const buf of inputs(seed)) {
    const enc = await tok.encode(buf.toString('utf8'), null, { addSpecialTokens: false });
    cases.push({ hex: buf.toString('hex'), ids: enc.getIds() });
  }
  return { file: 'tests/vectors/' + file, cases };
}

async function main() {
  writeFixture('fixture_tokenizer.json', buildFixture(true, { prefix: true, regex: true, ignoreMerges: true }));
  writeFixture('fixture_noregex_tokenizer.json',
    buildFixture(false, { prefix: false, regex: false, ignoreMerges: false }));
  const sets = [];
  sets.push(await vectorsFor('small_tokenizer.json', 1));
  sets.push(await vectorsFor('fixture_tokenizer.json', 2));
  sets.push(await vectorsFor('fixture_noregex_tokenizer.json', 3));
  const out = { generator: 'tests/vectors/gen_tokenizer_vectors.js',
    library: 'Hugging Face tokenizers 0.22 via @anush008/tokenizers 0.6.0', tokenizers: sets };
  writeVectors('tokenizer_vectors.json', out);
  console.log(sets.map((s) => `${s.file}: ${s.cases.length} cases`).join('\n'));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
