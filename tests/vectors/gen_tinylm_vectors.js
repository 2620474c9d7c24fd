// gen_tinylm_vectors.js - ids the Hugging Face `tokenizers` library (through the
// @anush008/tokenizers native Node build) gives with the SHIPPED models/tinylm-base/tokenizer.json,
// for tests/lua/test_tinylm.lua. Rerun whenever the shipped tokenizer changes:
//   mkdir -p /tmp/tokvec && (cd /tmp/tokvec && npm install @anush008/tokenizers@0.6.0)
//   workbench scripts/make_corpus.lua            # models/data/brightlane_val.txt (seed 1)
//   NODE_PATH=/tmp/tokvec/node_modules node tests/vectors/gen_tinylm_vectors.js
'use strict';
const fs = require('fs');
const path = require('path');
const { Tokenizer } = require('@anush008/tokenizers');

const ROOT = path.join(__dirname, '..', '..');
const tok = Tokenizer.fromFile(path.join(ROOT, 'models/tinylm-base/tokenizer.json'));

// Every 7th validation line (real support text: names, amounts, invoice numbers, JSON), plus
// hostile text the corpus never has.
const val = fs.readFileSync(path.join(ROOT, 'models/data/brightlane_val.txt'), 'utf8').split('\n');
const inputs = val.filter((_, i) => i % 7 === 0).slice(0, 400);
inputs.push(
  '', ' ', '   ', '\n\n\t  \n', 'Customer (Ana): Hi,', 'Customer (Ana): Hi, my',
  "I'm sure you'LL say it's fine", 'Ticket: I was charged twice this month\nCategory:',
  '<|endoftext|>Customer (Zoë): Hi,<|endoftext|><|endoftext|>', 'Triage: {"category": "bug"}',
  'naïve café — 日本語のテキスト 👩‍👩‍👧 e\u0301 \u00a0nbsp', '12345678901234567890 $1,299.00',
  'x'.repeat(3000), 'ab '.repeat(500)
);

(async () => {
  const out = [];
  for (const text of inputs) {
    const enc = await tok.encode(text, null, { addSpecialTokens: false });
    out.push({ text, ids: Array.from(enc.getIds()) });
  }
  fs.writeFileSync(path.join(__dirname, 'tinylm_vectors.json'), JSON.stringify(out) + '\n');
  console.log(`wrote ${out.length} vectors`);
})();
