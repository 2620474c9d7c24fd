// gen_tokenizer_post_vectors.js - Hugging Face `tokenizers` ids and attention masks under
// tokenizer.json's `truncation` and `padding`, for test_tokenizer_post (C) and
// test_tokenizer_binding (Lua, through tok:encode).
//
// Run from the repository root (node >= 18):
//   (cd tests/node && npm ci --no-audit --no-fund)
//   NODE_PATH=tests/node/node_modules node tests/vectors/gen_tokenizer_post_vectors.js
//
// It writes tests/vectors/tokenizer_post_vectors.json: for each base fixture (a byte-level one and
// a SentencePiece-style one from tests/vectors/) and each truncation/padding setting, the inputs
// (hex) with HF's ids and attention mask from encode(text, add_special_tokens=false), or HF's
// error. Settings HF refuses to load are listed with `load_error: true`. HF aborts the process
// (a Rust assert) when it must truncate with stride >= max_length; those cases are not run
// through HF and are written as `error: "abort"` (the workbench returns an error there).
'use strict';
const fs = require('fs');
const path = require('path');
const { Tokenizer } = require('@anush008/tokenizers');

const DIR = __dirname;
const BASES = ['family_qwen2_tokenizer.json', 'family_tinyllama_tokenizer.json'];

const T = (max_length, strategy, direction, stride) => ({ direction, max_length, strategy, stride });
const P = (strategy, direction, pad_to_multiple_of, pad_id, pad_token) =>
  ({ strategy, direction, pad_to_multiple_of, pad_id, pad_type_id: 0, pad_token });

const SETTINGS = [
  [null, null],
  [T(0, 'LongestFirst', 'Right', 0), null],
  [T(1, 'LongestFirst', 'Right', 0), null],
  [T(1, 'LongestFirst', 'Left', 0), null],
  [T(3, 'LongestFirst', 'Right', 0), null],
  [T(3, 'LongestFirst', 'Left', 0), null],
  [T(5, 'OnlyFirst', 'Right', 2), null],
  [T(5, 'OnlyFirst', 'Left', 4), null],
  [T(4, 'LongestFirst', 'Right', 4), null], // stride == max_length: HF aborts when it cuts
  [T(2, 'OnlyFirst', 'Left', 7), null],
  [T(6, 'OnlySecond', 'Right', 0), null], // no second sequence: an error when it must cut
  [T(0, 'OnlySecond', 'Right', 0), null],
  [T(8, 'LongestFirst', 'Right', 0), null],
  [T(17, 'OnlyFirst', 'Left', 3), null],
  [T(512, 'LongestFirst', 'Right', 0), null],
  [{ max_length: 4, strategy: 'LongestFirst', stride: 0 }, null], // direction defaults to Right
  [null, P('BatchLongest', 'Right', null, 0, '[PAD]')],
  [null, P('BatchLongest', 'Right', 8, 7, '<pad>')],
  [null, P('BatchLongest', 'Left', 3, 5, '<pad>')],
  [null, P('BatchLongest', 'Left', 0, 5, '<pad>')],
  [null, P('BatchLongest', 'Right', 1, 5, '<pad>')],
  [null, P({ Fixed: 12 }, 'Right', null, 3, '<pad>')],
  [null, P({ Fixed: 12 }, 'Left', null, 3, '<pad>')],
  [null, P({ Fixed: 12 }, 'Left', 5, 2, '<pad>')],
  [null, P({ Fixed: 0 }, 'Right', 4, 9, '<pad>')],
  [null, P({ Fixed: 1 }, 'Right', null, 9, '<pad>')],
  [null, P({ Fixed: 40 }, 'Right', 16, 1000000, '<pad>')], // pad_id beyond the vocab: kept
  [T(3, 'LongestFirst', 'Right', 0), P({ Fixed: 5 }, 'Right', null, 7, '<pad>')],
  [T(3, 'LongestFirst', 'Left', 1), P({ Fixed: 5 }, 'Left', 4, 7, '<pad>')],
  [T(7, 'OnlyFirst', 'Right', 0), P('BatchLongest', 'Left', 4, 7, '<pad>')],
  [T(2, 'LongestFirst', 'Right', 0), P({ Fixed: 2 }, 'Right', null, 7, '<pad>')],
  [T(10, 'LongestFirst', 'Left', 0), P({ Fixed: 10 }, 'Left', null, 0, '<unk>')],
  [T(0, 'LongestFirst', 'Right', 0), P({ Fixed: 3 }, 'Right', null, 7, '<pad>')],
  [T(0, 'LongestFirst', 'Right', 0), P('BatchLongest', 'Right', 4, 7, '<pad>')],
  // files HF refuses to load
  [{ max_length: 4, strategy: 'LongestFirst' }, null],
  [{ direction: 'Right', strategy: 'LongestFirst', stride: 0 }, null],
  [{ direction: 'Right', max_length: 4, stride: 0 }, null],
  [T(4, 'longest_first', 'Right', 0), null],
  [T(4, 'LongestFirst', 'right', 0), null],
  [T(-1, 'LongestFirst', 'Right', 0), null],
  [T(2.5, 'LongestFirst', 'Right', 0), null],
  [T('4', 'LongestFirst', 'Right', 0), null],
  [[], null],
  [null, { strategy: 'BatchLongest', direction: 'Right', pad_type_id: 0, pad_token: '<pad>' }],
  [null, { strategy: 'BatchLongest', pad_id: 0, pad_type_id: 0, pad_token: '<pad>' }],
  [null, { direction: 'Right', pad_id: 0, pad_type_id: 0, pad_token: '<pad>' }],
  [null, { strategy: 'BatchLongest', direction: 'Right', pad_id: 0, pad_token: '<pad>' }],
  [null, { strategy: 'BatchLongest', direction: 'Right', pad_id: 0, pad_type_id: 0 }],
  [null, P('Fixed', 'Right', null, 0, '<pad>')],
  [null, P({ Fixed: -2 }, 'Right', null, 0, '<pad>')],
  [null, P({ Fixed: 4, BatchLongest: 1 }, 'Right', null, 0, '<pad>')],
  [null, P('BatchLongest', 'Right', -1, 0, '<pad>')],
  [null, P('BatchLongest', 'Right', null, -3, '<pad>')],
  [null, P('BatchLongest', 'Up', null, 0, '<pad>')],
  [null, 'BatchLongest'],
];

const INPUTS = [
  '', 'x', 'hello', 'hello world', 'the thing thinking about the world model',
  'Hello, World! How are you doing today?', '  leading and trailing  ', 'a b c d e f g h i j k l m n o p',
  '12345 67890 3.14159', 'naïve café résumé Straße über', '東京 日本語 中文', 'emoji 😀🚀👍🏽 end',
  '<|endoftext|>', 'a<|endoftext|>b<|endoftext|>c', '<|im_start|>user\nHi there<|im_end|>\n',
  '<s>', '<s> hello </s> world', '</s></s></s></s></s></s>', 'line one\nline two\n\n  indented',
  '\t\t tabs\tand\r\nnewlines', 'zzzz qqqq xxxx', '▁x▁y', 'the '.repeat(40), 'hello world '.repeat(12),
];

function hex(s) { return Buffer.from(s, 'utf8').toString('hex'); }

function wouldAbort(tr, n) {
  if (!tr || typeof tr !== 'object' || Array.isArray(tr)) return false;
  return tr.max_length > 0 && n > tr.max_length && tr.stride >= tr.max_length &&
    tr.strategy !== 'OnlySecond';
}

(async () => {
  const out = { generator: 'tests/vectors/gen_tokenizer_post_vectors.js',
    hf: '@anush008/tokenizers 0.6.0 (tokenizers 0.22.2)', sets: [] };
  let n_cases = 0, n_load_errors = 0;
  for (const base of BASES) {
    const json = JSON.parse(fs.readFileSync(path.join(DIR, base), 'utf8'));
    const plain = Tokenizer.fromString(JSON.stringify(json));
    const plainIds = [];
    for (const s of INPUTS) plainIds.push((await plain.encode(s, null, { addSpecialTokens: false })).getIds());
    for (const [truncation, padding] of SETTINGS) {
      const j = Object.assign({}, json, { truncation, padding });
      const set = { base, truncation, padding };
      let tok;
      try {
        tok = Tokenizer.fromString(JSON.stringify(j));
      } catch (e) {
        set.load_error = true;
        set.hf_error = String(e.message || e).slice(0, 200);
        out.sets.push(set);
        n_load_errors++;
        continue;
      }
      set.cases = [];
      for (let i = 0; i < INPUTS.length; i++) {
        const c = { hex: hex(INPUTS[i]) };
        if (wouldAbort(truncation, plainIds[i].length)) {
          c.error = 'abort';
        } else {
          try {
            const e = await tok.encode(INPUTS[i], null, { addSpecialTokens: false });
            c.ids = e.getIds();
            c.mask = e.getAttentionMask();
          } catch (e) {
            c.error = String(e.message || e).slice(0, 200);
          }
        }
        set.cases.push(c);
        n_cases++;
      }
      out.sets.push(set);
    }
  }
  const file = path.join(DIR, 'tokenizer_post_vectors.json');
  fs.writeFileSync(file, JSON.stringify(out) + '\n');
  console.log(`wrote ${file}: ${out.sets.length} settings, ${n_cases} encodings, ${n_load_errors} refused files`);
})();
