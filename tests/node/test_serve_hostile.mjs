// Hostile requests against `workbench serve`: each gets a clear error (or is cut off), and the
// server keeps serving. Raw sockets, so nothing is smoothed over by a client library.
import net from "node:net";
import { startServer, test, finish, assert, eq, health } from "./serve_helper.mjs";

const srv = await startServer(["--max-body", "65536"]);
const MODEL = "tinylm-base";

function raw(data, { waitMs = 3000 } = {}) {
  return new Promise((resolve) => {
    const s = net.connect(srv.port, "127.0.0.1");
    let out = Buffer.alloc(0);
    const done = () => { s.destroy(); resolve(out.toString("latin1")); };
    s.on("data", (d) => { out = Buffer.concat([out, d]); });
    s.on("end", done); s.on("error", done); s.on("close", done);
    setTimeout(done, waitMs);
    s.write(data);
  });
}
const post = (path, body, extra = "") => raw(Buffer.concat([Buffer.from(
  `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\n${extra}Content-Length: ${body.length}\r\n\r\n`), body]));
const status = (resp) => Number((resp.match(/^HTTP\/1\.1 (\d+)/) || [])[1]);
const jsonBody = (resp) => JSON.parse(resp.slice(resp.indexOf("\r\n\r\n") + 4));
async function stillServing() {
  const r = await fetch(`${srv.base}/v1/chat/completions`, { method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "Ticket:" }], max_tokens: 3 }) });
  eq(r.status, 200, "a normal request afterwards");
}

try {
  await test("malformed JSON is a 400 OpenAI error object", async () => {
    const r = await post("/v1/chat/completions", Buffer.from('{"model": "tinylm-base", "messages": [}'));
    eq(status(r), 400, r.slice(0, 80));
    const e = jsonBody(r).error;
    assert(/parse the JSON body/.test(e.message) && e.type === "invalid_request_error", JSON.stringify(e));
    await stillServing();
  });

  await test("JSON that is not an object, and deeply nested JSON, are 400s", async () => {
    eq(status(await post("/v1/chat/completions", Buffer.from("[1,2,3]"))), 400);
    eq(status(await post("/v1/chat/completions", Buffer.from("[".repeat(30000) + "]".repeat(30000)))), 400);
    eq(status(await post("/api/chat", Buffer.from('"just a string"'))), 400);
    await stillServing();
  });

  await test("invalid UTF-8 in the body is a 400 naming the byte", async () => {
    const body = Buffer.concat([Buffer.from('{"model":"tinylm-base","messages":[{"role":"user","content":"a'),
      Buffer.from([0xff, 0xfe]), Buffer.from('"}]}')]);
    const r = await post("/v1/chat/completions", body);
    eq(status(r), 400);
    assert(/UTF-8/.test(jsonBody(r).error.message), r);
  });

  await test("a body over --max-body is a 413 before it is read, declared or chunked", async () => {
    const t0 = Date.now();
    const r = await raw(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000\r\n\r\n{`);
    eq(status(r), 413, r.slice(0, 60));
    assert(Date.now() - t0 < 2000, "answered at once");
    const chunk = "x".repeat(8192);
    let chunked = "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
    for (let i = 0; i < 12; i++) chunked += `2000\r\n${chunk}\r\n`;
    eq(status(await raw(chunked + "0\r\n\r\n")), 413);
    await stillServing();
  });

  await test("a huge header block is refused; unknown routes are 404, wrong methods 405", async () => {
    const r = await raw(`GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Big: ${"a".repeat(200000)}\r\n\r\n`);
    assert(status(r) >= 400 || r === "", `answered ${r.slice(0, 40)}`);
    eq(status(await raw("GET /nothing HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")), 404);
    eq(status(await raw("GET /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")), 405);
    eq(status(await raw("BREW /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")), 405);
    const garbage = await raw("\x00\x01\x02 nonsense\r\n\r\n");
    assert(garbage === "" || status(garbage) >= 400, garbage.slice(0, 40));
    await stillServing();
  });

  await test("slowloris: a client trickling headers does not hold up others", async () => {
    const s = net.connect(srv.port, "127.0.0.1");
    s.on("error", () => {});
    const head = "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Slow: ";
    let i = 0;
    const timer = setInterval(() => { if (!s.destroyed) s.write(i++ < head.length ? head[i - 1] : "a"); }, 20);
    const t0 = Date.now();
    for (let k = 0; k < 3; k++) await stillServing();
    clearInterval(timer); s.destroy();
    assert(Date.now() - t0 < 5000, `others waited ${Date.now() - t0} ms`);
  });

  await test("600 idle connections: requests are still served, and the idle ones are counted", async () => {
    const socks = [];
    for (let i = 0; i < 600; i++) {
      const s = net.connect(srv.port, "127.0.0.1");
      s.on("error", () => {});
      socks.push(s);
    }
    await new Promise((r) => setTimeout(r, 300));
    await stillServing();
    const h = await health(srv.base);
    assert(h.connections >= 500, `connections ${h.connections}`);
    for (const s of socks) s.destroy();
  });

  await test("an uncompilable schema (Ollama format, Gemini responseSchema) is a 400", async () => {
    const r = await post("/api/chat", Buffer.from(JSON.stringify({ model: MODEL, stream: false,
      messages: [{ role: "user", content: "x" }], format: { type: "object", properties: { a: { type: "string", pattern: "x" } }, required: ["a"] } })));
    eq(status(r), 400);
    assert(/pattern/.test(jsonBody(r).error), r);
    const g = await post(`/v1beta/models/${MODEL}:generateContent`, Buffer.from(JSON.stringify({
      contents: [{ parts: [{ text: "x" }] }], generationConfig: { responseMimeType: "application/json",
        responseSchema: { type: "OBJECT", properties: { a: { type: "STRING", pattern: "x" } } } } })));
    eq(status(g), 400);
    eq(jsonBody(g).error.status, "INVALID_ARGUMENT");
  });

  await test("wrong types and ranges name the field", async () => {
    const cases = [[{ temperature: "hot" }, /temperature/], [{ n: 0 }, /'n'/], [{ max_tokens: -5 }, /max_tokens/],
      [{ logit_bias: { abc: 1 } }, /logit_bias/], [{ logit_bias: { "5": 1000 } }, /logit_bias/], [{ stop: [1] }, /stop/],
      [{ messages: [{ role: "wizard", content: "x" }] }, /role/], [{ top_p: 0 }, /top_p/]];
    for (const [extra, re] of cases) {
      const r = await post("/v1/chat/completions", Buffer.from(JSON.stringify({ model: MODEL,
        messages: [{ role: "user", content: "x" }], ...extra })));
      eq(status(r), 400, JSON.stringify(extra));
      assert(re.test(jsonBody(r).error.message), jsonBody(r).error.message);
    }
  });

  await test("after all that the server is healthy and nothing is left running", async () => {
    const h = await health(srv.base);
    eq(h.running, 0, "running"); eq(h.queued, 0, "queued");
    await stillServing();
  });
} finally {
  await srv.stop();
}
finish();
