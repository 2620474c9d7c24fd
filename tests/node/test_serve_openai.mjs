// The OpenAI API of `workbench serve`, driven by the official `openai` and `groq-sdk` clients.
import { requireModules, startServer, test, finish, assert, eq, health } from "./serve_helper.mjs";
requireModules("openai", "groq-sdk");
const { default: OpenAI } = await import("openai");
const { default: Groq } = await import("groq-sdk");

const srv = await startServer(["--max-batch", "8"]);
const client = new OpenAI({ apiKey: "unused", baseURL: `${srv.base}/v1`, maxRetries: 0 });
const MODEL = "tinylm-base";
const msgs = [{ role: "user", content: "Ticket: I was charged twice for my subscription" }];

async function streamText(params, opts) {
  const s = await client.chat.completions.create({ ...params, stream: true }, opts);
  let text = "", chunks = 0, finish = null, usage = null, ext = null;
  for await (const c of s) {
    if (c.usage) usage = c.usage;
    if (c.workbench) ext = c.workbench;
    for (const ch of c.choices) {
      if (ch.delta?.content) { text += ch.delta.content; chunks++; }
      if (ch.finish_reason) finish = ch.finish_reason;
    }
  }
  return { text, chunks, finish, usage, ext };
}

try {
  await test("models.list names the served model", async () => {
    const ids = [];
    for await (const m of client.models.list()) ids.push(m.id);
    eq(ids, [MODEL]);
  });

  await test("chat completion: text, usage and the workbench extension", async () => {
    const r = await client.chat.completions.create({ model: MODEL, messages: msgs, max_tokens: 24, seed: 7 });
    assert(r.object === "chat.completion", r.object);
    const c = r.choices[0];
    assert(typeof c.message.content === "string" && c.message.content.length > 0, "empty content");
    assert(["stop", "length"].includes(c.finish_reason), c.finish_reason);
    assert(r.usage.prompt_tokens > 0 && r.usage.completion_tokens > 0, JSON.stringify(r.usage));
    eq(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens, "total");
    const w = r.workbench;
    eq(w.tokens, r.usage.completion_tokens, "extension tokens");
    eq(w.itl_ms.length, w.tokens - 1, "one interval per token after the first");
    assert(w.ttft_ms > 0 && w.prefill_ms > 0 && w.prefill_ms <= w.ttft_ms, JSON.stringify(w));
  });

  await test("streaming gives the same text as the whole reply for a seed, with usage last", async () => {
    const p = { model: MODEL, messages: msgs, max_completion_tokens: 24, seed: 11, temperature: 0.9 };
    const whole = await client.chat.completions.create(p);
    const s = await streamText({ ...p, stream_options: { include_usage: true } });
    eq(s.text, whole.choices[0].message.content, "streamed text");
    eq(s.finish, whole.choices[0].finish_reason, "finish_reason");
    eq(s.usage.completion_tokens, whole.usage.completion_tokens, "usage");
    assert(s.chunks >= 2, `only ${s.chunks} chunks`);
    assert(s.ext && s.ext.tokens === whole.usage.completion_tokens, "extension in the final chunk");
  });

  await test("completions, streaming and not", async () => {
    const p = { model: MODEL, prompt: "Ticket: the export button", max_tokens: 12, seed: 3 };
    const r = await client.completions.create(p);
    assert(r.object === "text_completion" && r.choices[0].text.length > 0, JSON.stringify(r));
    const s = await client.completions.create({ ...p, stream: true });
    let t = "";
    for await (const c of s) t += c.choices[0]?.text ?? "";
    eq(t, r.choices[0].text, "streamed completion");
  });

  await test("json_schema response_format yields JSON of that schema", async () => {
    const schema = { type: "object", properties: { category: { enum: ["billing", "bug", "account"] },
      priority: { type: "integer", minimum: 1, maximum: 5 } }, required: ["category", "priority"],
      additionalProperties: false };
    const r = await client.chat.completions.create({ model: MODEL, messages: msgs, max_tokens: 40, seed: 1,
      response_format: { type: "json_schema", json_schema: { name: "triage", schema, strict: true } } });
    const v = JSON.parse(r.choices[0].message.content);
    assert(["billing", "bug", "account"].includes(v.category), JSON.stringify(v));
    assert(Number.isInteger(v.priority) && v.priority >= 1 && v.priority <= 5, JSON.stringify(v));
  });

  await test("an uncompilable json_schema is a 400 naming the keyword", async () => {
    try {
      await client.chat.completions.create({ model: MODEL, messages: msgs, response_format: { type: "json_schema",
        json_schema: { name: "x", schema: { type: "object", properties: { a: { type: "string", pattern: "^a+$" } }, required: ["a"] } } } });
      throw new Error("accepted");
    } catch (e) {
      assert(e.status === 400, `status ${e.status}`);
      assert(/pattern/.test(e.message), e.message);
    }
  });

  await test("logprobs: one entry per token, top_logprobs sorted, tokens spell the text", async () => {
    const r = await client.chat.completions.create({ model: MODEL, messages: msgs, max_tokens: 10, seed: 5,
      logprobs: true, top_logprobs: 3 });
    const c = r.choices[0];
    const lp = c.logprobs.content;
    eq(lp.map((t) => t.token).join(""), c.message.content, "tokens join to the content");
    for (const t of lp) {
      assert(t.logprob <= 0, "logprob > 0");
      eq(t.top_logprobs.length, 3, "top_logprobs count");
      for (let i = 1; i < 3; i++) assert(t.top_logprobs[i - 1].logprob >= t.top_logprobs[i].logprob, "unsorted");
      assert(t.top_logprobs[0].logprob >= t.logprob - 1e-6, "the best candidate is at least the chosen one");
    }
  });

  await test("n = 3 gives three choices, each equal to its seed alone", async () => {
    const r = await client.chat.completions.create({ model: MODEL, messages: msgs, max_tokens: 12, n: 3, seed: 40 });
    eq(r.choices.map((c) => c.index), [0, 1, 2], "indices");
    const alone = await client.chat.completions.create({ model: MODEL, messages: msgs, max_tokens: 12, seed: 41 });
    eq(r.choices[1].message.content, alone.choices[0].message.content, "choice 1 draws from seed + 1");
  });

  await test("aborting mid-stream cancels the request; the server keeps serving", async () => {
    const before = await health(srv.base);
    const ac = new AbortController();
    const s = await client.chat.completions.create({ model: MODEL, messages: msgs, max_tokens: 100, n: 8,
      logit_bias: { "2047": -100 }, stream: true, seed: 2, temperature: 1.0 }, { signal: ac.signal });
    let n = 0;
    try {
      for await (const c of s) { if (c.choices[0]?.delta?.content && ++n === 2) ac.abort(); }
    } catch (e) { assert(e.name === "AbortError" || /abort/i.test(e.message), e.message); }
    let h;
    for (let i = 0; i < 40; i++) {
      h = await health(srv.base);
      if (h.cancelled > before.cancelled) break;
      await new Promise((r) => setTimeout(r, 25));
    }
    assert(h.cancelled > before.cancelled, `cancelled ${before.cancelled} -> ${h.cancelled}`);
    eq(h.running, 0, "nothing left running");
    const r = await client.chat.completions.create({ model: MODEL, messages: msgs, max_tokens: 4 });
    assert(r.choices[0].message.content !== undefined, "served after the abort");
  });

  await test("8 concurrent streams each equal their sequential reply", async () => {
    const seeds = [1, 2, 3, 4, 5, 6, 7, 8];
    const p = (seed) => ({ model: MODEL, messages: msgs, max_tokens: 20, seed, temperature: 1.0 });
    const seq = [];
    for (const seed of seeds) seq.push((await client.chat.completions.create(p(seed))).choices[0].message.content);
    const par = await Promise.all(seeds.map((seed) => streamText(p(seed))));
    eq(par.map((x) => x.text), seq, "concurrent texts");
  });

  await test("a seeded request alone and among 8 concurrent mixed ones gives the same text, in shared steps", async () => {
    const target = { model: MODEL, messages: msgs, max_tokens: 24, seed: 77, temperature: 0.9, top_p: 0.95,
      stop: ["\n\n"], stream_options: { include_usage: true } };
    const alone = await streamText(target);
    const others = [
      { model: MODEL, messages: msgs, max_tokens: 20, temperature: 0, stream_options: { include_usage: true } },
      { model: MODEL, messages: [{ role: "user", content: "Ticket: the export button" }], max_tokens: 16, seed: 3,
        temperature: 1.2, top_k: 20, stream_options: { include_usage: true } },
      { model: MODEL, messages: msgs, max_tokens: 12, seed: 5, presence_penalty: 1.0, stream_options: { include_usage: true } },
      { model: MODEL, messages: msgs, max_tokens: 30, seed: 9, frequency_penalty: 0.5, min_p: 0.05,
        stream_options: { include_usage: true } },
      { model: MODEL, messages: msgs, max_tokens: 8, seed: 11, logprobs: true, top_logprobs: 2,
        stream_options: { include_usage: true } },
      { model: MODEL, messages: msgs, max_tokens: 24, seed: 13, response_format: { type: "json_object" },
        stream_options: { include_usage: true } },
      { model: MODEL, messages: msgs, max_tokens: 24, seed: 77, temperature: 0.5, stream_options: { include_usage: true } },
    ];
    const before = await health(srv.base);
    const all = await Promise.all([target, ...others].map((p) => streamText(p)));
    const after = await health(srv.base);
    eq(all[0].text, alone.text, "the seeded request among 7 others");
    eq(all[0].finish, alone.finish, "its finish reason");
    const tokens = all.reduce((s, x) => s + x.usage.completion_tokens, 0);
    const steps = after.steps - before.steps;
    // one at a time they would need at least one step per generated token
    assert(steps < tokens, `the 8 requests shared forward passes (${steps} steps for ${tokens} tokens)`);
    assert(after.peak_batch >= 2, `peak batch ${after.peak_batch}`);
  });

  await test("errors: unknown model 404, unknown field 400, bad value 400, too long 400", async () => {
    const cases = [
      [{ model: "gpt-nothing", messages: msgs }, 404, /does not exist/],
      [{ model: MODEL, messages: msgs, temprature: 1 }, 400, /Unrecognized request argument supplied: temprature/],
      [{ model: MODEL, messages: msgs, temperature: 3 }, 400, /temperature/],
      [{ model: MODEL, messages: [{ role: "user", content: "word ".repeat(400) }] }, 400, /maximum context length is \d+ tokens/],
      [{ model: MODEL, messages: [] }, 400, /messages/],
    ];
    for (const [body, status, re] of cases) {
      try { await client.chat.completions.create(body); throw new Error(`accepted ${JSON.stringify(body).slice(0, 60)}`); }
      catch (e) { eq(e.status, status, `status for ${re}`); assert(re.test(e.message), e.message); }
    }
  });

  await test("groq-sdk: chat, streaming and not", async () => {
    const groq = new Groq({ apiKey: "unused", baseURL: srv.base, maxRetries: 0 });
    const p = { model: MODEL, messages: msgs, max_tokens: 16, seed: 9 };
    const r = await groq.chat.completions.create(p);
    const s = await groq.chat.completions.create({ ...p, stream: true });
    let t = "";
    for await (const c of s) t += c.choices[0]?.delta?.content ?? "";
    eq(t, r.choices[0].message.content, "groq streamed text");
  });
} finally {
  await srv.stop();
}

// --api-key: a second server that requires the Bearer token.
const keyed = await startServer(["--api-key", "sk-test-123"]);
try {
  await test("--api-key: a wrong key is 401, the right one works", async () => {
    const bad = new OpenAI({ apiKey: "wrong", baseURL: `${keyed.base}/v1`, maxRetries: 0 });
    try { await bad.models.list(); throw new Error("accepted"); } catch (e) { eq(e.status, 401, "status"); }
    const good = new OpenAI({ apiKey: "sk-test-123", baseURL: `${keyed.base}/v1`, maxRetries: 0 });
    const r = await good.chat.completions.create({ model: MODEL, messages: msgs, max_tokens: 3 });
    assert(r.choices.length === 1, "answered");
    assert(!keyed.stderr().includes("sk-test-123"), "the key was printed");
  });
} finally {
  await keyed.stop();
}
finish();
