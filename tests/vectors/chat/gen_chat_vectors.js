// gen_chat_vectors.js - expected renderings of chat templates from @huggingface/jinja (the
// Jinja engine transformers.js uses) for tests/c/test_jinja.c.
//
//   cd tests/node && npm ci --no-audit --no-fund && cd ../..
//   node tests/vectors/chat/gen_chat_vectors.js
//
// Writes tests/vectors/chat/chat_vectors.json: for every template in templates/ and every
// conversation that fits it, with add_generation_prompt on and off, the variables passed (as
// transformers passes them: messages, tools, documents, add_generation_prompt and the special
// tokens) and the rendered text, or the error the template raised. Also a list of small
// language probes (filters, tests, loops, macros, whitespace control) with their output.
'use strict';
const fs = require('fs');
const path = require('path');
const { Template } = require(path.join(__dirname, '../../node/node_modules/@huggingface/jinja'));

const DIR = __dirname;

const TOOLS = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'Current weather for a city.',
      parameters: {
        type: 'object',
        properties: {
          city: { type: 'string', description: 'City name, e.g. "Lyon"' },
          unit: { type: ['string', 'null'], enum: ['c', 'f'], description: 'Unit ' },
          days: { type: 'array', items: { type: 'integer' }, description: 'Days ahead' },
        },
        required: ['city'],
      },
      return: { type: 'number' },
    },
  },
  {
    type: 'function',
    function: {
      name: 'add',
      description: 'Adds two numbers: é → ü, "quoted" \\ back.',
      parameters: { type: 'object', properties: { a: { type: 'number', description: 'first' }, b: { type: 'number', description: 'second' } } },
    },
  },
];

const CALL = { type: 'function', id: 'call12345', function: { name: 'get_weather', arguments: { city: 'Lyon', days: [1, 2], unit: null, deep: { ok: true, x: 1.5 } } } };
const CALL2 = { type: 'function', id: 'call67890', function: { name: 'add', arguments: { a: 2, b: 3.25 } } };

const CASES = {
  hi: [{ role: 'user', content: 'Hi' }],
  system_multi: [
    { role: 'system', content: 'You are terse.  ' },
    { role: 'user', content: 'Hi there!' },
    { role: 'assistant', content: 'Hello.' },
    { role: 'user', content: '  2+2?  \n' },
  ],
  no_system_multi: [
    { role: 'user', content: 'Quote: "x" and \\n, tab\tend' },
    { role: 'assistant', content: 'Ünïcödé ✓ 🙂' },
    { role: 'user', content: 'Line one\nLine two' },
  ],
  prefill: [
    { role: 'user', content: 'Write a haiku.' },
    { role: 'assistant', content: 'Autumn wind' },
  ],
  tool_round: [
    { role: 'system', content: 'Use tools when needed.' },
    { role: 'user', content: 'Weather in Lyon, and 2+3.25?' },
    { role: 'assistant', content: '', tool_calls: [CALL, CALL2] },
    { role: 'tool', content: '{"temp": 21}', tool_call_id: 'call12345', name: 'get_weather' },
    { role: 'tool', content: '5.25', tool_call_id: 'call67890', name: 'add' },
    { role: 'assistant', content: 'It is 21 degrees; the sum is 5.25.' },
    { role: 'user', content: 'Thanks' },
  ],
  one_call: [
    { role: 'user', content: 'Weather in Lyon?' },
    { role: 'assistant', tool_calls: [CALL] },
    { role: 'tool', content: { temp: 21, sky: 'clear' } },
    { role: 'assistant', content: 'Sunny, 21.' },
  ],
  mistral_tools: [
    { role: 'system', content: 'Be exact.' },
    { role: 'user', content: 'Weather?' },
    { role: 'assistant', tool_calls: [CALL] },
    { role: 'tool', content: '{"temp": 21}', tool_call_id: 'call12345' },
    { role: 'assistant', content: 'Warm.' },
    { role: 'user', content: 'And tomorrow?' },
  ],
  distill: [
    { role: 'system', content: 'Think first.' },
    { role: 'user', content: 'What is 7*6?' },
    { role: 'assistant', content: '<think>\n7*6 is 42.\n</think>\n\n42' },
    { role: 'user', content: 'And 6*7?' },
  ],
  distill_tools: [
    { role: 'user', content: 'Weather and sum?' },
    { role: 'assistant', content: null, tool_calls: [{ type: 'function', function: { name: 'get_weather', arguments: '{"city": "Lyon"}' } }, { type: 'function', function: { name: 'add', arguments: '{"a": 2}' } }] },
    { role: 'tool', content: '21' },
    { role: 'tool', content: '2' },
    { role: 'assistant', content: 'Done.' },
  ],
  multimodal: [
    { role: 'system', content: [{ type: 'text', text: 'Describe images.' }] },
    { role: 'user', content: [{ type: 'image' }, { type: 'text', text: '  What is this?  ' }] },
    { role: 'assistant', content: [{ type: 'text', text: 'A cat.' }] },
    { role: 'user', content: 'Sure?' },
  ],
  bad_alternation: [
    { role: 'user', content: 'a' },
    { role: 'user', content: 'b' },
  ],
};

// template -> special tokens, the cases it is rendered with, whether tools are passed, extras
const TEMPLATES = {
  'chatml_tools.jinja': { tok: { eos_token: '<|im_end|>', pad_token: '<|endoftext|>' }, cases: ['hi', 'system_multi', 'no_system_multi', 'prefill', 'tool_round', 'one_call'], tools: ['tool_round', 'one_call', 'hi'] },
  'chatml_plain.jinja': { tok: { eos_token: '<|im_end|>', bos_token: '<|im_start|>' }, cases: ['hi', 'system_multi', 'no_system_multi', 'prefill'] },
  'header_dated.jinja': { tok: { bos_token: '<|begin_of_text|>', eos_token: '<|eot_id|>' }, cases: ['hi', 'system_multi', 'no_system_multi', 'prefill', 'one_call'], tools: ['one_call', 'hi'], extra: { date_string: '26 Jul 2024' } },
  'phi_style.jinja': { tok: { bos_token: '<s>', eos_token: '<|endoftext|>', unk_token: '<unk>' }, cases: ['hi', 'system_multi', 'no_system_multi', 'prefill'] },
  'inst_alternating.jinja': { tok: { bos_token: '<s>', eos_token: '</s>' }, cases: ['hi', 'system_multi', 'no_system_multi', 'prefill', 'bad_alternation'] },
  'inst_tools.jinja': { tok: { bos_token: '<s>', eos_token: '</s>' }, cases: ['hi', 'system_multi', 'no_system_multi', 'mistral_tools', 'bad_alternation'], tools: ['mistral_tools', 'hi'] },
  'turns_model.jinja': { tok: { bos_token: '<bos>', eos_token: '<eos>' }, cases: ['hi', 'no_system_multi', 'prefill', 'system_multi', 'bad_alternation'] },
  'turns_multimodal.jinja': { tok: { bos_token: '<bos>', eos_token: '<eos>' }, cases: ['hi', 'system_multi', 'no_system_multi', 'multimodal', 'bad_alternation'] },
  'reasoning_distill.jinja': { tok: { bos_token: '<｜begin▁of▁sentence｜>', eos_token: '<｜end▁of▁sentence｜>' }, cases: ['hi', 'system_multi', 'distill', 'distill_tools'] },
  'hermes_tools.jinja': { tok: { bos_token: '<|begin_of_text|>', eos_token: '<|im_end|>' }, cases: ['hi', 'system_multi', 'tool_round', 'one_call', 'prefill'], tools: ['tool_round', 'one_call', 'hi'] },
  'zephyr_style.jinja': { tok: { bos_token: '<s>', eos_token: '</s>', unk_token: '<unk>' }, cases: ['hi', 'system_multi', 'no_system_multi', 'prefill'] },
};

function render(text, vars) {
  try {
    return { output: new Template(text).render(vars) };
  } catch (e) {
    const msg = String(e.message || e);
    return { error: msg, raised: text.includes(msg) };
  }
}

const vectors = [];
for (const [file, spec] of Object.entries(TEMPLATES)) {
  const text = fs.readFileSync(path.join(DIR, 'templates', file), 'utf8');
  for (const c of spec.cases) {
    const toolVariants = (spec.tools || []).includes(c) ? [true, false] : [false];
    for (const withTools of toolVariants) {
      for (const gen of [true, false]) {
        const vars = { messages: CASES[c], tools: withTools ? TOOLS : null, documents: null, add_generation_prompt: gen, ...spec.tok, ...(spec.extra || {}) };
        vectors.push({ template: file, case: c + (withTools ? '+tools' : ''), vars, ...render(text, vars) });
      }
    }
  }
}

// Language probes: each a template and variables.
const V = { s: '  Hello, World  ', n: 7, f: 2.5, z: 0, list: [3, 1, 2], words: ['b', 'A', 'c'], d: { b: 1, a: [1, 'x', null, true], c: { k: 'v' } }, e: [], msgs: CASES.tool_round, nul: null, t: true, uni: 'çéñx', emo: 'a🙂é' };
const PROBES = [
  ['if_elif_else', '{% for i in [1,2,3,4] %}{% if i == 1 %}one{% elif i == 2 %}two{% elif i == 3 %}three{% else %}many{% endif %},{% endfor %}'],
  ['loop_vars', '{% for x in list %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}/{{ loop.revindex0 }}/{{ loop.first }}/{{ loop.last }}/{{ loop.length }}/{{ loop.previtem }}/{{ loop.nextitem }};{% endfor %}'],
  ['loop_else', '{% for x in e %}x{% else %}empty{% endfor %}|{% for x in list if x > 1 %}{{ x }}{{ loop.length }}{% else %}none{% endfor %}'],
  ['loop_break_continue', '{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif %}{{ x }}{% endfor %}'],
  ['loop_scope', '{% set a = 1 %}{% for x in list %}{% set a = x %}{% endfor %}{{ a }}{% if true %}{% set b = 2 %}{% endif %}{{ b }}'],
  ['loop_tuple', '{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k in d %}{{ k }}{% endfor %}'],
  ['namespace', '{% set ns = namespace(count=0, found=false) %}{% for m in msgs %}{% if m.role == "tool" %}{% set ns.count = ns.count + 1 %}{% set ns.found = true %}{% endif %}{% endfor %}{{ ns.count }} {{ ns.found }}'],
  ['set_block', '{% set x %}  inner {{ n }} {% endset %}[{{ x }}]{% set a, b = 1, 2 %}{{ a }}{{ b }}'],
  ['macro', '{% macro greet(name, punct="!") %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet("Ann") }} {{ greet("Bo", "?") }} {{ greet(name="Cy", punct=".") }}'],
  ['macro_kwargs_varargs', '{% macro f(a) %}{{ a }}|{{ varargs }}|{{ kwargs }}{% endmacro %}{{ f(1, 2, 3, x=4) }}'],
  ['call_block', '{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}{% call wrap("b") %}bold {{ n }}{% endcall %}{% macro each(xs) %}{% for x in xs %}{{ caller(x) }}{% endfor %}{% endmacro %}{% call(item) each(list) %}[{{ item }}]{% endcall %}'],
  ['ws_control', 'a  {{- " b " -}}  c\n  {%- if true %}\n   d\n  {%- endif %}\ne {#- comment -#}  f'],
  ['trim_lstrip_blocks', 'x\n    {% if true %}\n    y\n    {% endif %}\nz\n  {# c #}\nw {{ n }}\n'],
  ['string_methods', '{{ s.strip() }}|{{ s.lstrip() }}|{{ s.rstrip() }}|{{ s.upper() }}|{{ s.lower() }}|{{ "hello wORLD x_y".title() }}|{{ "abc".capitalize() }}|{{ s.startswith("  He") }}|{{ s.endswith(("x", "  ")) }}|{{ s.replace("l", "L") }}|{{ s.replace("l", "L", 2) }}|{{ "a,b,,c".split(",") }}|{{ "  a b  c ".split() }}|{{ "a-b-c".split("-", 1) }}|{{ s.split(none, 1) }}'],
  ['string_ops', '{{ "ab" ~ 1 ~ 2.5 ~ true }}|{{ "x" + "y" }}|{{ "ell" in s }}|{{ "z" not in s }}|{{ s[2] }}{{ s[-3] }}|{{ s[2:7] }}|{{ s[::2] }}|{{ s[::-1] }}|{{ uni[1:3] }}|{{ uni|length }}|{{ uni[-2] }}'],
  ['list_ops', '{{ list[0] }}{{ list[-1] }}|{{ list[1:] }}|{{ list[:-1] }}|{{ list[::-1] }}|{{ list[::2] }}|{{ list + [9] }}|{{ 2 in list }}|{{ 5 not in list }}|{{ list|length }}|{{ list|first }}|{{ list|last }}|{{ list|sort }}|{{ list|sort(reverse=true) }}|{{ words|sort }}|{{ list|reverse|list }}|{{ [1,1,2,1,3]|unique|list }}|{{ list|join(", ") }}|{{ words|join }}'],
  ['dict_ops', '{{ d.b }}|{{ d["a"] }}|{{ d.get("b") }}|{{ d.get("zz", "dflt") }}|{{ d.get("zz") }}|{{ d.keys() }}|{{ d.values()|length }}|{{ d|items|list }}|{{ "a" in d }}|{{ d.c.k }}|{{ d.missing is defined }}|{{ d|length }}|{{ d|dictsort }}'],
  ['tojson', '{{ d|tojson }}|{{ d|tojson(indent=2) }}|{{ list|tojson(indent=4) }}|{{ "é\\"\\n\\t"|tojson }}|{{ f|tojson }}|{{ n|tojson }}|{{ nul|tojson }}|{{ d|tojson(separators=(",", ":")) }}|{{ d|tojson(sort_keys=true) }}|{{ emo|tojson(ensure_ascii=true) }}|{{ emo|tojson }}|{{ e|tojson(indent=2) }}|{{ {}|tojson(indent=2) }}'],
  ['tests', '{{ n is number }}{{ s is string }}{{ d is mapping }}{{ list is iterable }}{{ s is iterable }}{{ d is iterable }}{{ list is sequence }}{{ nul is none }}{{ t is true }}{{ t is false }}{{ zz is defined }}{{ zz is undefined }}{{ n is odd }}{{ n is even }}{{ n is integer }}{{ t is boolean }}{{ "ab" is lower }}{{ "AB" is upper }}{{ d is not mapping }}'],
  ['selectattr_map', '{{ msgs|selectattr("role", "equalto", "tool")|list|length }}|{{ msgs|rejectattr("role", "equalto", "tool")|map(attribute="role")|join(",") }}|{{ msgs|selectattr("tool_calls")|list|length }}|{{ msgs|map(attribute="name", default="-")|join(",") }}|{{ msgs|map(attribute="role")|unique|join(",") }}'],
  ['filters_misc', '{{ s|trim }}|{{ s|length }}|{{ "x"|upper }}{{ "Y"|lower }}|{{ "abc"|capitalize }}|{{ "a b"|title }}|{{ "42"|int + 1 }}|{{ "4.5"|float }}|{{ "x"|int(7) }}|{{ 3.9|int }}|{{ 3|float }}|{{ n|string ~ "!" }}|{{ zz|default("dflt") }}|{{ ""|default("dflt", true) }}|{{ "v"|safe }}|{{ -3|abs }}|{{ "a\\nb\\n\\nc"|indent }}|{{ "a\\nb"|indent(2, true) }}|{{ "a-b"|replace("-", "+") }}|{{ t|string }}'],
  ['arith', '{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 2 * 3 + 1 }} {{ (1 + 2) * 3 }} {{ 1 - -1 }} {{ n * f }} {{ 10 / 4 }} {{ 1.0 }} {{ 0.1 + 0.2 }} {{ 3.0 if false else 3 }} {{ -n }} {{ 4 > 3 }} {{ 3 >= 3 }} {{ 2 < 1 }} {{ 1 == 1.0 }} {{ "1" == 1 }} {{ 1 != 2 }}'],
  ['logic', '{{ true and "x" }}|{{ false or "y" }}|{{ not e }}|{{ e or "empty" }}|{{ nul or 0 or "last" }}|{{ "a" if t else "b" }}|{{ "a" if not t else "b" }}|{{ "only" if t }}|{{ "none" if false }}|{{ not not 1 }}'],
  ['literals', '{{ [1, "two", [3], {"k": 4}] }}|{{ {"a": 1, "b": [true, none]} }}|{{ "adj" "acent" }}|{{ \'single\' }}|{{ "esc\\t\\\\" }}|{{ none }}|{{ True }}{{ False }}|{{ 1.50 }}'],
  ['undefined_access', '[{{ zz }}][{{ zz.a }}][{{ d.zz.a }}][{{ nul.x }}][{{ list[10] }}]'],
  ['raise', '{% if n > 3 %}{{ raise_exception("n is too big: " ~ n) }}{% endif %}ok'],
  ['filter_block', '{% filter upper %}shout {{ n }}{% endfilter %}'],
  ['range', '{{ range(3)|list }}{{ range(1, 7, 2)|list }}{{ range(5, 0, -2)|list }}'],
  ['none_output', '[{{ nul }}][{{ zz }}][{{ d.get("zz") }}]'],
  ['msgs_scan', '{%- for m in msgs[::-1] %}{%- if m.role == "user" and m.content is string %}{{ loop.index0 }}:{{ m.content }}{% break %}{% endif %}{%- endfor %}'],
  ['float_print', '{{ 1/3 }} {{ 2.0 * 3 }} {{ 1000000.0 * 1000000.0 * 1000000000.0 }} {{ 123456789.125 }} {{ 0.000001 }} {{ 0.0000001 }} {{ -0.0 }} {{ 5 / 1 }}'],
];
const probes = PROBES.map(([name, text]) => ({ name, template: text, vars: V, ...render(text, V) }));

const out = { generator: 'tests/vectors/chat/gen_chat_vectors.js', engine: '@huggingface/jinja ' + require(path.join(__dirname, '../../node/node_modules/@huggingface/jinja/package.json')).version, vectors, probes };
fs.writeFileSync(path.join(DIR, 'chat_vectors.json'), JSON.stringify(out, null, 1) + '\n');
console.log(`${vectors.length} template vectors (${vectors.filter((v) => v.error).length} errors), ${probes.length} probes (${probes.filter((p) => p.error).length} errors)`);
for (const p of probes) if (p.error) console.log('probe error', p.name, p.error);
for (const v of vectors) if (v.error) console.log('vector error', v.template, v.case, v.error);

// Model directories (tests/vectors/chat/<dir>/): the template found as transformers finds it
// (chat_template.jinja first, else tokenizer_config.json's chat_template, "default" of a list),
// with the special tokens of tokenizer_config.json. test_chat.c loads the directory and passes
// only messages, tools and add_generation_prompt, so the variables it adds are checked too.
function tokenText(v) {
  if (typeof v === 'string') return v;
  if (v && typeof v === 'object' && typeof v.content === 'string') return v.content;
  return null;
}
const DIRS = {
  'qwen2.5': ['hi', 'system_multi', 'no_system_multi', 'prefill', 'tool_round', 'one_call'],
  smollm2: ['hi', 'system_multi', 'prefill'],
  llama3: ['hi', 'system_multi', 'no_system_multi', 'prefill'],
  'llama3.1': ['hi', 'system_multi', 'no_system_multi', 'one_call'],
  tinyllama: ['hi', 'system_multi', 'no_system_multi'],
  unknown: ['hi', 'no_system_multi', 'bad_alternation'],
  jinja_file: ['hi', 'system_multi'],
  hermes_dir: ['hi', 'system_multi', 'tool_round', 'one_call'],
};
const DIR_TOOLS = { 'qwen2.5': ['tool_round', 'one_call', 'hi'], 'llama3.1': ['one_call', 'hi'], hermes_dir: ['tool_round', 'one_call', 'hi'] };
const dirVectors = [];
for (const [dir, cases] of Object.entries(DIRS)) {
  const base = path.join(DIR, dir);
  const cfg = fs.existsSync(path.join(base, 'tokenizer_config.json')) ? JSON.parse(fs.readFileSync(path.join(base, 'tokenizer_config.json'), 'utf8')) : {};
  let text = fs.existsSync(path.join(base, 'chat_template.jinja')) ? fs.readFileSync(path.join(base, 'chat_template.jinja'), 'utf8') : cfg.chat_template;
  if (Array.isArray(text)) text = text.find((t) => t.name === 'default').template;
  const special = {};
  for (const k of ['bos_token', 'eos_token', 'unk_token', 'sep_token', 'pad_token', 'cls_token', 'mask_token']) {
    const s = tokenText(cfg[k]);
    if (s !== null) special[k] = s;
  }
  if (Array.isArray(cfg.additional_special_tokens)) special.additional_special_tokens = cfg.additional_special_tokens.map(tokenText).filter((s) => s !== null);
  for (const c of cases) {
    for (const withTools of (DIR_TOOLS[dir] || []).includes(c) ? [true, false] : [false]) {
      for (const gen of [true, false]) {
        const vars = { messages: CASES[c], tools: withTools ? TOOLS : null, documents: null, add_generation_prompt: gen, ...special };
        dirVectors.push({ dir, case: c + (withTools ? '+tools' : ''), messages: CASES[c], tools: withTools ? TOOLS : null, add_generation_prompt: gen, ...render(text, vars) });
      }
    }
  }
}
out.dirs = dirVectors;
fs.writeFileSync(path.join(DIR, 'chat_vectors.json'), JSON.stringify(out, null, 1) + '\n');
console.log(`${dirVectors.length} directory vectors (${dirVectors.filter((v) => v.error).length} errors)`);
for (const v of dirVectors) if (v.error) console.log('dir error', v.dir, v.case, v.error);
