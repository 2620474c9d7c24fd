// The step explorer: asks the server for a generation's step record (POST /workbench/steps,
// the same record wb.steps.record returns to a Lua script) and draws it. No framework, no
// build step; every chart is SVG made here.
'use strict';

const SVGNS = 'http://www.w3.org/2000/svg';
const FIELDS = ['temperature', 'top_k', 'top_p', 'min_p', 'repetition_penalty',
  'frequency_penalty', 'presence_penalty', 'seed', 'max_tokens'];
const state = { records: {}, selected: null, timer: null, seq: 0 };
// With `workbench serve --api-key KEY`, open /explorer/#key=KEY.
const KEY = new URLSearchParams(location.hash.slice(1)).get('key');
function headers(extra = {}) { return KEY ? { ...extra, Authorization: `Bearer ${KEY}` } : extra; }

function el(tag, attrs = {}, text) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}
function svg(tag, attrs = {}, text) {
  const e = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}
// Token text as a reader can see it: spaces and newlines made visible.
function shown(t) { return t.replace(/\n/g, '\u21b5').replace(/ /g, '\u00b7') || '\u2205'; }
function pct(p) { return (100 * p).toFixed(p >= 0.1 ? 1 : 2) + '%'; }
// Low probability red, high green, on a light background.
function probColour(p) { return `hsl(${Math.round(120 * p)}, 70%, 85%)`; }

function runParams(run) {
  const box = document.querySelector(`fieldset[data-run="${run}"]`);
  const params = {};
  for (const name of FIELDS) {
    const v = box.querySelector(`[name="${name}"]`).value;
    if (v !== '') params[name] = Number(v);
  }
  const stop = box.querySelector('[name="stop"]').value;
  if (stop.trim() !== '') params.stop = stop.split(',').map((s) => s.replace(/\\n/g, '\n')).filter((s) => s);
  const bias = box.querySelector('[name="logit_bias"]').value.trim();
  if (bias !== '') params.logit_bias = JSON.parse(bias);
  return params;
}

function constraintSpec() {
  const kind = document.getElementById('constraint-kind').value;
  const text = document.getElementById('constraint-text').value;
  if (kind === 'none') return { kind };
  if (kind === 'choice') return { kind, choices: text.split('\n').filter((s) => s !== '') };
  if (kind === 'regex') return { kind, pattern: text };
  return { kind, schema: text };
}

async function fetchRecord(run) {
  const body = { prompt: document.getElementById('prompt').value, params: runParams(run),
    constraint: constraintSpec(), top: 10, attention: document.getElementById('attention').checked };
  const res = await fetch('/workbench/steps', { method: 'POST',
    headers: headers({ 'Content-Type': 'application/json' }), body: JSON.stringify(body) });
  const data = await res.json();
  if (!res.ok) throw new Error((data.error && data.error.message) || res.statusText);
  return data;
}

async function rerun() {
  const seq = ++state.seq;
  const runs = document.getElementById('compare').checked ? ['a', 'b'] : ['a'];
  const status = document.getElementById('status');
  status.textContent = 'running...';
  status.className = 'muted';
  try {
    const t0 = performance.now();
    const recs = await Promise.all(runs.map(fetchRecord));
    if (seq !== state.seq) return; // a newer setting arrived meanwhile
    state.records = {};
    runs.forEach((r, i) => { state.records[r] = recs[i]; });
    const keep = state.selected;
    state.selected = keep && state.records[keep.run] && keep.index <= state.records[keep.run].steps.length
      ? keep : { run: 'a', index: 1 };
    drawReplies();
    drawStep();
    drawWaterfall();
    status.textContent = `done in ${(performance.now() - t0).toFixed(0)} ms`;
  } catch (e) {
    if (seq !== state.seq) return;
    status.textContent = e.message;
    status.className = 'error';
  }
}
function schedule() { clearTimeout(state.timer); state.timer = setTimeout(rerun, 200); }

function drawReplies() {
  const box = document.getElementById('replies');
  box.replaceChildren();
  for (const [run, rec] of Object.entries(state.records)) {
    const card = el('div', { class: 'reply', 'data-run': run });
    card.append(el('h3', {}, `Run ${run.toUpperCase()}: T=${rec.params.temperature ?? 1}, seed ${rec.seed}`));
    const toks = el('div', { class: 'tokens' });
    toks.append(el('span', { class: 'tok prompt', title: `the prompt: ${rec.prompt_ids.length} tokens` }, rec.prompt));
    rec.steps.forEach((st) => {
      const t = el('span', { class: 'tok gen', 'data-index': st.index,
        title: `id ${st.id}, p ${pct(st.p)}, rank ${st.rank ?? '-'}` }, shown(st.text));
      t.style.background = probColour(st.p);
      if (state.selected.run === run && state.selected.index === st.index) t.classList.add('selected');
      t.addEventListener('click', () => { state.selected = { run, index: st.index }; drawReplies(); drawStep(); });
      toks.append(t);
    });
    card.append(toks);
    card.append(el('div', { class: 'summary' },
      `${rec.steps.length} tokens, stop: ${rec.stop_reason}, TTFT ${rec.timing.ttft_ms.toFixed(2)} ms`));
    box.append(card);
  }
}

// One stage's candidates as horizontal bars, the chosen token highlighted.
function stageChart(stage, chosen) {
  const rows = stage.top.filter((c) => c.p > 0);
  const w = 260, rowH = 16, labelW = 96;
  const s = svg('svg', { viewBox: `0 0 ${w} ${rows.length * rowH + 2}`, width: '100%', role: 'img',
    'aria-label': `${stage.name} candidates` });
  rows.forEach((c, i) => {
    const y = i * rowH;
    s.append(svg('text', { x: 0, y: y + 12 }, shown(c.text).slice(0, 12)));
    s.append(svg('rect', { class: 'bar', x: labelW, y: y + 2, height: rowH - 4,
      width: Math.max(1, (w - labelW - 44) * c.p), fill: c.id === chosen ? '#2f6fde' : '#9aa8c0',
      'data-id': c.id, 'data-p': c.p }));
    s.append(svg('text', { x: w - 42, y: y + 12 }, pct(c.p)));
  });
  return s;
}

function drawStep() {
  const box = document.getElementById('step');
  box.replaceChildren();
  const sel = state.selected;
  const rec = sel && state.records[sel.run];
  if (!rec || rec.steps.length === 0) return;
  const st = rec.steps[sel.index - 1];
  box.append(el('h2', {}, `Run ${sel.run.toUpperCase()}, step ${st.index}: ${JSON.stringify(st.text)} (id ${st.id})`));
  const facts = el('div', { class: 'facts' });
  const items = [['p', pct(st.p)], ['rank', st.rank ?? '-'], ['entropy', `${st.entropy_bits.toFixed(2)} bits`],
    ['survivors', st.stages[st.stages.length - 1].survivors], ['position', st.position],
    ['KV cache', `${st.kv_tokens} tokens, ${(st.kv_bytes / 1024).toFixed(1)} KiB`]];
  if (st.constraint) {
    items.push(['constraint removed', pct(st.constraint.removed_mass)]);
    if (st.constraint.overruled) items.push(['overruled', `${JSON.stringify(st.constraint.overruled.text)} (log p ${st.constraint.overruled.logprob.toFixed(2)})`]);
  }
  for (const [k, v] of items) { const b = el('b', {}, `${k}: `); const sp = el('span', {}, `${v}   `); facts.append(b, sp); }
  box.append(facts);
  const stages = el('div', { class: 'stages' });
  for (const stage of st.stages) {
    const card = el('div', { class: 'stage', 'data-stage': stage.name });
    card.append(el('h4', {}, `${stage.name}: ${stage.survivors} survive, ${stage.entropy_bits.toFixed(2)} bits`
      + (stage.chosen_rank ? `, chosen #${stage.chosen_rank}` : '')));
    card.append(stageChart(stage, st.id));
    stages.append(card);
  }
  box.append(stages);
  if (st.attention) box.append(attentionChart(st, rec));
}

// Attention of the position whose logits chose this token (the previous token; the last prompt
// token for step 1), by layer (rows) and head (columns): each cell a strip over the positions
// it attends to, darker = more weight. Present when the record carries it (attention: true).
function attentionChart(st, rec) {
  const att = st.attention, pos = st.attention_position, P = rec.prompt_ids.length;
  const text = (j) => (j < P ? rec.prompt_tokens[j] : rec.steps[j - P].text);
  const wrap = el('div', { class: 'attention' });
  wrap.append(el('h2', {}, `Attention of position ${pos} (${JSON.stringify(text(pos))}), whose output chose this token: layer \u00d7 head`));
  const L = att.length, H = att[0].length, T = pos + 1, cw = 120, ch = 14, lw = 26, top = 14;
  const s = svg('svg', { viewBox: `0 0 ${lw + H * cw} ${top + L * ch}`, width: '100%', role: 'img',
    'aria-label': 'attention by layer and head' });
  for (let h = 0; h < H; h++) s.append(svg('text', { x: lw + h * cw, y: 10 }, `head ${h}`));
  let best = { v: -1 };
  att.forEach((layer, l) => {
    s.append(svg('text', { x: 0, y: top + l * ch + 10 }, `L${l}`));
    layer.forEach((w, h) => w.forEach((v, t) => {
      const r = svg('rect', { class: 'att', x: lw + h * cw + (t * (cw - 4)) / T, y: top + l * ch,
        width: (cw - 4) / T, height: ch - 2, fill: `rgba(47,111,222,${v.toFixed(3)})`,
        'data-layer': l, 'data-head': h, 'data-pos': t, 'data-w': v });
      r.append(svg('title', {}, `layer ${l} head ${h}: ${pct(v)} on ${JSON.stringify(text(t))} (position ${t})`));
      s.append(r);
      if (v > best.v) best = { v, l, h, t };
    }));
  });
  wrap.append(s);
  wrap.append(el('div', { class: 'facts attention-best' },
    `strongest: layer ${best.l} head ${best.h}, ${pct(best.v)} on ${JSON.stringify(text(best.t))} (position ${best.t})`));
  return wrap;
}

// Tokenization, prefill and every decode step on one time axis, the KV cache size under it.
function drawWaterfall() {
  const box = document.getElementById('waterfall');
  box.replaceChildren();
  for (const [run, rec] of Object.entries(state.records)) {
    const t = rec.timing;
    const spans = [{ name: 'tokenize', start: 0, ms: t.tokenize_ms, kind: 'tok' }];
    let now = t.tokenize_ms;
    spans.push({ name: 'prefill + first token', start: now, ms: t.ttft_ms, kind: 'prefill' });
    now += t.ttft_ms;
    rec.steps.slice(1).forEach((st) => { spans.push({ name: `step ${st.index}`, start: now, ms: st.ms, kind: 'decode', kv: st.kv_tokens }); now += st.ms; });
    const total = Math.max(now, 1e-6), w = 640, rowH = 6, top = 14;
    const h = top + spans.length * rowH + 44;
    const s = svg('svg', { viewBox: `0 0 ${w} ${h}`, width: '100%', 'data-run': run, role: 'img',
      'aria-label': `timing of run ${run}` });
    s.append(svg('text', { x: 0, y: 10 }, `Run ${run.toUpperCase()}: TTFT ${t.ttft_ms.toFixed(2)} ms, `
      + `${rec.steps.length} tokens in ${total.toFixed(2)} ms`));
    spans.forEach((sp, i) => {
      const r = svg('rect', { class: `wf wf-${sp.kind}`, x: (sp.start / total) * w, y: top + i * rowH,
        width: Math.max(0.5, (sp.ms / total) * w), height: rowH - 1,
        fill: sp.kind === 'prefill' ? '#e8833a' : sp.kind === 'tok' ? '#6b7280' : '#2f6fde' });
      r.append(svg('title', {}, `${sp.name}: ${sp.ms.toFixed(3)} ms`));
      s.append(r);
    });
    // KV cache tokens over time, as a step line under the bars.
    const base = h - 4, maxKv = rec.prompt_ids.length + rec.steps.length;
    let d = `M 0 ${base}`;
    spans.forEach((sp, i) => {
      const kv = i === 0 ? 0 : (sp.kv ?? rec.prompt_ids.length);
      d += ` L ${(sp.start / total) * w} ${base - (kv / maxKv) * 24}`;
    });
    s.append(svg('path', { class: 'kv', d, fill: 'none', stroke: '#16a34a' }));
    s.append(svg('text', { x: 0, y: base - 28 }, `KV cache (green): ${rec.prompt_ids.length} prompt tokens, up to ${maxKv}`
      + ` (${((maxKv * rec.model.kv_bytes_per_token) / 1024).toFixed(0)} KiB)`));
    box.append(s);
  }
}

async function init() {
  const tpl = document.getElementById('run-fields');
  for (const box of document.querySelectorAll('fieldset.run')) box.append(tpl.content.cloneNode(true));
  const b = document.querySelector('fieldset[data-run="b"]');
  b.querySelector('[name="temperature"]').value = '1.5';
  document.getElementById('compare').addEventListener('change', (e) => {
    b.disabled = !e.target.checked; b.querySelector('legend input').disabled = false; schedule();
  });
  b.querySelector('legend input').disabled = false;
  document.getElementById('controls').addEventListener('input', schedule);
  document.getElementById('controls').addEventListener('change', schedule);
  try {
    const info = await (await fetch('/workbench/info', { headers: headers() })).json();
    document.getElementById('model-name').textContent = `${info.model_type}, ${info.parameters} parameters, ${info.dir}`;
    // Large models make large attention records: start with it off there (the box turns it on).
    if (info.n_layer * info.n_head > 64) document.getElementById('attention').checked = false;
  } catch (e) { /* the page still works without the header */ }
  rerun();
}
init();
