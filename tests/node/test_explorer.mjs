// The step explorer in a real browser: Debian's chromium, headless, driven by playwright-core,
// against `workbench serve` on loopback. The rendered DOM is checked against the JSON record
// the same endpoint returns; screenshots go to <build>/test-artifacts/ (desktop and phone).
import { mkdirSync, existsSync } from "node:fs";
import { join } from "node:path";
import { requireModules, startServer, test, finish, assert, eq, BUILD_DIR } from "./serve_helper.mjs";

requireModules("playwright-core");
const CHROMIUM = process.env.WB_CHROMIUM || "/usr/bin/chromium";
if (!existsSync(CHROMIUM)) {
  console.log(`SKIP: ${CHROMIUM} is missing (apt-get install chromium; it is in .ci/packages)`);
  process.exit(77);
}
const { chromium } = await import("playwright-core");
const ART = join(BUILD_DIR, "test-artifacts");
mkdirSync(ART, { recursive: true });

const srv = await startServer();
const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: [
  "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
  "--disable-component-update", "--disable-sync"] });

// The page's default settings for run A, as the form starts.
const PROMPT = "Customer (Ana): Hi, my";
const PARAMS_A = { temperature: 0.8, top_k: 0, top_p: 1, min_p: 0, repetition_penalty: 1,
  frequency_penalty: 0, presence_penalty: 0, seed: 1, max_tokens: 40 };
async function record(params, constraint = { kind: "none" }) {
  const r = await fetch(`${srv.base}/workbench/steps`, { method: "POST",
    body: JSON.stringify({ prompt: PROMPT, params, constraint, top: 10, attention: true }) });
  assert(r.ok, `steps: ${r.status}`);
  return r.json();
}
const tokensOf = (page, run) => page.$$eval(`.reply[data-run="${run}"] .tok.gen`, (els) => els.map((e) => e.textContent));
const shown = (t) => t.replace(/\n/g, "\u21b5").replace(/ /g, "\u00b7") || "\u2205";

try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("requestfailed", (r) => errors.push(`request failed: ${r.url()}`));

  await test("the page runs a generation and shows one span per generated token", async () => {
    await page.goto(`${srv.base}/explorer/`);
    await page.waitForSelector('.reply[data-run="a"] .tok.gen');
    const rec = await record(PARAMS_A);
    const toks = await tokensOf(page, "a");
    eq(toks.length, rec.steps.length, "token count");
    eq(toks, rec.steps.map((s) => shown(s.text)), "token texts");
    assert((await page.textContent("#model-name")).includes("gpt2"), "model header");
  });

  await test("clicking a token shows that step's bars, stage by stage, as in the record", async () => {
    const rec = await record(PARAMS_A);
    const k = Math.min(3, rec.steps.length);
    await page.click(`.reply[data-run="a"] .tok.gen[data-index="${k}"]`);
    const stages = await page.$$eval("#step .stage", (els) => els.map((e) => e.dataset.stage));
    eq(stages, rec.stages, "stage names in the documented order");
    for (const [i, stage] of rec.steps[k - 1].stages.entries()) {
      const bars = await page.$$eval(`#step .stage[data-stage="${stage.name}"] rect.bar`,
        (els) => els.map((e) => [Number(e.dataset.id), Number(e.dataset.p)]));
      const want = stage.top.filter((c) => c.p > 0);
      eq(bars.length, want.length, `bars in stage ${i + 1}`);
      bars.forEach(([id, p], j) => { eq(id, want[j].id); assert(Math.abs(p - want[j].p) < 1e-9, "bar p"); });
    }
    assert((await page.textContent("#step h2")).includes(`step ${k}`), "step heading");
    await page.screenshot({ path: join(ART, "explorer-desktop.png"), fullPage: true });
  });

  await test("the attention panel draws the chosen step's attention by layer and head, as in the record", async () => {
    const rec = await record(PARAMS_A);
    const k = Math.min(3, rec.steps.length);
    await page.click(`.reply[data-run="a"] .tok.gen[data-index="${k}"]`);
    const st = rec.steps[k - 1];
    assert(Array.isArray(st.attention), "the record carries attention");
    eq(st.attention_position, st.position - 1, "the position whose logits chose the token");
    const L = rec.model.n_layer, H = rec.model.n_head, T = st.attention_position + 1;
    eq(st.attention.length, L, "layers");
    for (const layer of st.attention) {
      eq(layer.length, H, "heads");
      for (const row of layer) {
        eq(row.length, T, "positions 0..attention_position");
        const sum = row.reduce((a, b) => a + b, 0);
        assert(Math.abs(sum - 1) < 1e-5, `a row sums to ${sum}`);
      }
    }
    const cells = await page.$$eval("#step .attention rect.att", (els) => els.map((e) =>
      [Number(e.dataset.layer), Number(e.dataset.head), Number(e.dataset.pos), Number(e.dataset.w)]));
    eq(cells.length, L * H * T, "one cell per layer, head and position");
    for (const [l, h, t, w] of cells) assert(Math.abs(w - st.attention[l][h][t]) < 1e-9, `cell ${l}.${h}.${t}`);
    let best = [-1];
    st.attention.forEach((layer, l) => layer.forEach((row, h) => row.forEach((v, t) => { if (v > best[0]) best = [v, l, h, t]; })));
    const said = await page.textContent("#step .attention-best");
    assert(said.includes(`layer ${best[1]} head ${best[2]}`) && said.includes(`(position ${best[3]})`), said);
    assert((await page.textContent("#step .attention h2")).includes(`position ${st.attention_position}`), "heading");
  });

  await test("attention is a choice: unticked, the page re-runs without it; a huge record is refused", async () => {
    const replyBefore = await tokensOf(page, "a");
    await page.uncheck("#attention");
    await page.waitForFunction(() => !document.querySelector("#step .attention") &&
      document.querySelector('.reply[data-run="a"] .tok.gen'));
    eq(await tokensOf(page, "a"), replyBefore, "same reply without attention");
    await page.check("#attention");
    await page.waitForSelector("#step .attention");
    // TinyLM: 4 layers x 4 heads; 500 steps over a short prompt bound above 2M weights.
    const r = await fetch(`${srv.base}/workbench/steps`, { method: "POST",
      body: JSON.stringify({ prompt: PROMPT, params: { ...PARAMS_A, max_tokens: 500 }, top: 10, attention: true }) });
    eq(r.status, 400, "refused");
    const body = await r.json();
    eq(body.error.param, "attention", "names the field");
    assert(body.error.message.includes("limit"), body.error.message);
  });

  await test("the waterfall has tokenization, prefill and one bar per decode step", async () => {
    const rec = await record(PARAMS_A);
    const n = await page.$$eval('#waterfall svg[data-run="a"] rect.wf', (els) => els.length);
    eq(n, rec.steps.length + 1, "bars");
    eq(await page.$$eval('#waterfall svg[data-run="a"] rect.wf-prefill', (e) => e.length), 1, "one prefill bar");
  });

  await test("a setting change re-runs at once: temperature 0 gives the greedy reply", async () => {
    await page.fill('fieldset[data-run="a"] [name="temperature"]', "0");
    const rec = await record({ ...PARAMS_A, temperature: 0 });
    await page.waitForFunction((want) => {
      const t = [...document.querySelectorAll('.reply[data-run="a"] .tok.gen')].map((e) => e.textContent).join("");
      return t === want;
    }, rec.steps.map((s) => shown(s.text)).join(""), { timeout: 10000 });
  });

  await test("two settings side by side: run B at T=1.5 with the same seed", async () => {
    await page.check("#compare");
    await page.waitForSelector('.reply[data-run="b"] .tok.gen');
    const recB = await record({ ...PARAMS_A, temperature: 1.5 });
    eq(await tokensOf(page, "b"), recB.steps.map((s) => shown(s.text)), "run B tokens");
    eq(await page.$$eval("#waterfall svg", (e) => e.length), 2, "two waterfalls");
  });

  await test("a choice constraint shows the mass it removed", async () => {
    await page.selectOption("#constraint-kind", "choice");
    await page.fill("#constraint-text", " billing\n refund");
    await page.waitForFunction(() => document.querySelector("#step .facts")?.textContent.includes("constraint removed"),
      null, { timeout: 10000 });
    const txt = [...(await tokensOf(page, "a"))].join("");
    assert(txt === "\u00b7billing" || txt === "\u00b7refund", `constrained reply ${txt}`);
  });

  await test("at a phone width the page fits without sideways scrolling", async () => {
    const phone = await browser.newPage({ viewport: { width: 390, height: 844 }, deviceScaleFactor: 2 });
    await phone.goto(`${srv.base}/explorer/`);
    await phone.waitForSelector('.reply[data-run="a"] .tok.gen');
    const [sw, iw] = await phone.evaluate(() => [document.documentElement.scrollWidth, window.innerWidth]);
    assert(sw <= iw, `scrollWidth ${sw} > ${iw}`);
    await phone.screenshot({ path: join(ART, "explorer-phone.png"), fullPage: true });
    await phone.close();
  });

  await test("bad settings show the server's message, not a broken page", async () => {
    await page.selectOption("#constraint-kind", "regex");
    await page.fill("#constraint-text", "(");
    await page.waitForSelector("#status.error", { timeout: 10000 });
    assert((await page.textContent("#status")).includes("unclosed"), "regex error shown");
    eq(errors, [], "no page errors");
  });
} finally {
  await browser.close();
  await srv.stop();
}
finish();
