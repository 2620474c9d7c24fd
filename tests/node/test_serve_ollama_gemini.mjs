// The Ollama and Gemini APIs of `workbench serve`, driven by the official `ollama` and
// `@google/genai` clients pointed at the loopback server.
import { requireModules, startServer, test, finish, assert, eq } from "./serve_helper.mjs";
requireModules("ollama", "@google/genai");
const { Ollama } = await import("ollama");
const { GoogleGenAI } = await import("@google/genai");

const srv = await startServer();
const MODEL = "tinylm-base";
const ollama = new Ollama({ host: srv.base });
const ai = new GoogleGenAI({ apiKey: "unused", httpOptions: { baseUrl: srv.base } });
const user = "Ticket: I was charged twice for my subscription";

try {
  await test("ollama list shows the model with its details", async () => {
    const r = await ollama.list();
    eq(r.models.map((m) => m.name), [`${MODEL}:latest`]);
    assert(r.models[0].details.parameter_size.endsWith("M"), JSON.stringify(r.models[0].details));
  });

  await test("ollama chat: streamed NDJSON equals the one-shot reply for a seed; counts in the last object", async () => {
    const p = { model: MODEL, messages: [{ role: "user", content: user }], options: { seed: 4, num_predict: 16, temperature: 0.8 },
      keep_alive: "5m" };
    const one = await ollama.chat({ ...p, stream: false });
    assert(one.done && one.message.role === "assistant", JSON.stringify(one));
    let text = "", last = null, parts = 0;
    for await (const c of await ollama.chat({ ...p, stream: true })) {
      text += c.message.content; parts++;
      if (c.done) last = c;
    }
    eq(text, one.message.content, "streamed text");
    assert(parts >= 3, `${parts} objects`);
    eq(last.eval_count, one.eval_count, "eval_count");
    assert(last.prompt_eval_count > 0 && last.eval_duration > 0, JSON.stringify(last));
  });

  await test("ollama generate with format = JSON schema returns that JSON", async () => {
    const schema = { type: "object", properties: { category: { enum: ["billing", "bug"] }, urgent: { type: "boolean" } },
      required: ["category", "urgent"] };
    const r = await ollama.generate({ model: MODEL, prompt: user, format: schema, stream: false, options: { seed: 1, num_predict: 30 } });
    const v = JSON.parse(r.response);
    assert(["billing", "bug"].includes(v.category) && typeof v.urgent === "boolean", r.response);
  });

  await test("ollama: unknown model is an error naming it", async () => {
    try { await ollama.chat({ model: "llama9", messages: [{ role: "user", content: "x" }], stream: false }); throw new Error("accepted"); }
    catch (e) { assert(/llama9/.test(e.message) && e.status_code === 404, `${e.status_code} ${e.message}`); }
  });

  await test("gemini generateContent: text, usage, finishReason; systemInstruction and thinkingConfig accepted", async () => {
    const r = await ai.models.generateContent({ model: MODEL, contents: user,
      config: { systemInstruction: "Ticket triage.", maxOutputTokens: 12, seed: 3, temperature: 0.7, topK: 40,
        thinkingConfig: { thinkingBudget: 0 } } });
    assert(typeof r.text === "string" && r.text.length > 0, "no text");
    assert(["STOP", "MAX_TOKENS"].includes(r.candidates[0].finishReason), r.candidates[0].finishReason);
    assert(r.usageMetadata.candidatesTokenCount > 0 && r.usageMetadata.promptTokenCount > 0, JSON.stringify(r.usageMetadata));
  });

  await test("gemini streamGenerateContent (SSE) equals generateContent for a seed", async () => {
    const req = { model: MODEL, contents: user, config: { maxOutputTokens: 16, seed: 8 } };
    const one = await ai.models.generateContent(req);
    let text = "", n = 0;
    for await (const c of await ai.models.generateContentStream(req)) { text += c.text ?? ""; n++; }
    eq(text, one.text, "streamed text");
    assert(n >= 3, `${n} chunks`);
  });

  await test("gemini responseSchema + responseMimeType give JSON of that schema", async () => {
    const r = await ai.models.generateContent({ model: MODEL, contents: user, config: {
      responseMimeType: "application/json", maxOutputTokens: 40, seed: 2,
      responseSchema: { type: "OBJECT", properties: { category: { type: "STRING", enum: ["billing", "bug"] },
        priority: { type: "INTEGER" } }, propertyOrdering: ["category", "priority"] } } });
    const v = JSON.parse(r.text);
    eq(Object.keys(v), ["category", "priority"], "key order");
    assert(["billing", "bug"].includes(v.category) && Number.isInteger(v.priority), r.text);
  });

  await test("gemini countTokens counts the prompt", async () => {
    const r = await ai.models.countTokens({ model: MODEL, contents: user });
    const one = await ai.models.generateContent({ model: MODEL, contents: user, config: { maxOutputTokens: 1 } });
    eq(r.totalTokens, one.usageMetadata.promptTokenCount, "same count as the prompt of a generation");
  });

  await test("gemini: an unknown generationConfig field is a 400", async () => {
    try {
      await ai.models.generateContent({ model: MODEL, contents: user, config: { maxOutputTokens: 2, notAField: 1 } });
    } catch (e) { assert(/400|INVALID/.test(String(e.message ?? e)), String(e)); return; }
    // The SDK drops fields it does not know; send one raw.
    const r = await fetch(`${srv.base}/v1beta/models/${MODEL}:generateContent`, { method: "POST",
      body: JSON.stringify({ contents: [{ parts: [{ text: "x" }] }], generationConfig: { notAField: 1 } }) });
    eq(r.status, 400, "status");
    eq((await r.json()).error.status, "INVALID_ARGUMENT", "status name");
  });
} finally {
  await srv.stop();
}
finish();
