-- prompt_cache.lua - a shared system prompt, paid once: prefix reuse across requests.
--
--   workbench scripts/prompt_cache.lua [--requests N] [--rounds N] [--threads N]
--
-- Many requests to one assistant start with the same long instructions and differ only in the
-- user's message. Without reuse, every request prefills the whole prompt again. With reuse, a
-- session prefills the shared prefix once and keeps its keys and values; each request forks that
-- session and prefills only its own tokens. This is what hosted providers sell as prompt
-- caching (the course's Module 2 price tables bill cached input tokens at a discount), and why a
-- cache hit needs the prefix to match token for token.
--
-- For each request the token ids come from tokenizing the WHOLE prompt; the reused prefix is
-- the part of those ids that equals the shared prompt's own ids (a merge across the seam would
-- shorten it). Both ways then decode the same greedy reply, and the lesson checks the ids are
-- identical. It reports prefill tokens and prefill time per request, median (min to max) over
-- interleaved rounds, and says the time comparison only when the ranges are apart.
local wb = require("wb")
local stats = require("wb.stats")
local lesson = require("wb.lesson")

local o = require("wb.cli").parse(arg, "scripts/prompt_cache.lua", {
  { "requests", "count", 6, "different user messages" },
  { "rounds", "count", 7, "timed rounds over all requests" },
  { "threads", "count", 1, "compute threads" },
})
wb.threads(o.threads)

local model = wb.load()
local tok = model.tokenizer
local info = model:info()
local MAX_NEW = 16

local QUESTIONS = {
  "Hi, I was charged twice for the Team plan this month. Can you refund the duplicate?",
  "Hi, how do I export my board data?",
  "Hi, my account is locked after too many login attempts.",
  "Hi, can you add recurring cards?",
  "Hi, the board shows a blank page since the last update.",
  "Hi, please cancel my subscription.",
  "Hi, how do I invite a guest to a board?",
  "Hi, I need our VAT number on my invoices.",
}

-- The shared part: for a chat model its template with a system message; for TinyLM (a
-- completion model) a transcript of earlier turns, the closest thing it knows to instructions.
local chat_ok, chat = pcall(wb.chat_template, model.dir)
if not chat_ok then chat = nil end
local SYSTEM = "You are the Brightlane support assistant. Answer billing, account, bug and how-to "
  .. "questions in two sentences, name the setting or page involved, never promise refunds, and "
  .. "hand cancellations and security issues to a human agent."
local HISTORY = ("Customer (Bo): Hi, my board export stopped working after the update.\n"
  .. "Agent (Sam): Sorry about that. Clear the cache and try the export again.\n"):rep(2)

local function prompt_for(question)
  if chat then
    return chat:render({ { role = "system", content = SYSTEM }, { role = "user", content = question } },
                       { add_generation_prompt = true })
  end
  return HISTORY .. "Customer (Ana): " .. question .. "\nAgent (Lena):"
end
local SHARED = chat and chat:render({ { role = "system", content = SYSTEM } }) or HISTORY
local shared_ids = tok:encode(SHARED)

local n_req = math.min(o.requests, #QUESTIONS)
local requests = {}
for i = 1, n_req do
  local ids = tok:encode(prompt_for(QUESTIONS[i]))
  while #ids + MAX_NEW > info.n_ctx do table.remove(ids, 1) end -- (only a tiny context needs this)
  local k = 0
  while k < #shared_ids and k < #ids - 1 and ids[k + 1] == shared_ids[k + 1] do k = k + 1 end
  requests[i] = { question = QUESTIONS[i], prompt = prompt_for(QUESTIONS[i]), ids = ids, prefix = k }
end
local P = math.huge
for _, r in ipairs(requests) do P = math.min(P, r.prefix) end -- one cached prefix for all
if P < 1 then
  io.stderr:write(("prompt_cache: the prompts share no token prefix on %s (context %d tokens is "
    .. "too short for the shared part and a question?)\n"):format(model.dir, info.n_ctx))
  os.exit(1)
end
local prefix_ids = { table.unpack(shared_ids, 1, P) }

-- Greedy decode of MAX_NEW tokens from a session whose last logits are `logits`.
local function decode(s, logits)
  local out = {}
  for i = 1, MAX_NEW do
    local id = logits:argmax()
    out[i] = id
    if i < MAX_NEW then logits = s:decode(id) end
  end
  return out
end

local fresh = model:session()
local base = model:session()
local t_prefix = wb.clock_ms()
base:prefill(prefix_ids)
t_prefix = wb.clock_ms() - t_prefix

-- One request each way; returns prefill ms, tokens prefilled and the reply's ids.
local function without_reuse(r)
  fresh:reset()
  local t0 = wb.clock_ms()
  local logits = fresh:prefill(r.ids)
  local ms = wb.clock_ms() - t0
  return ms, #r.ids, decode(fresh, logits)
end
-- The reused side works in one fork of the prefix session, cut back to the prefix before each
-- request (as a server keeps a warm cache): a fresh fork per request would time first-touch page
-- faults of its new buffers, which the fresh side, reset and reused, does not pay either.
local warm = base:fork()
local function with_reuse(r)
  warm:truncate(P)
  local t0 = wb.clock_ms()
  local logits = warm:prefill({ table.unpack(r.ids, P + 1) })
  local ms = wb.clock_ms() - t0
  return ms, #r.ids - P, decode(warm, logits)
end

without_reuse(requests[1]); with_reuse(requests[1]) -- warm-up: buffers, first-touch pages
local noise = lesson.noise()
local t_off, t_on, same = {}, {}, true
for i = 1, n_req do t_off[i], t_on[i] = {}, {} end
for round = 1, o.rounds do
  for i, r in ipairs(requests) do
    local ms_a, n_a, ids_a = without_reuse(r)
    local ms_b, n_b, ids_b = with_reuse(r)
    t_off[i][round], t_on[i][round] = ms_a, ms_b
    r.tokens_without, r.tokens_with = n_a, n_b
    if round == 1 then r.reply_ids = ids_a end
    for k = 1, MAX_NEW do if ids_a[k] ~= ids_b[k] then same = false end end
  end
end
local load = noise:finish(true)
fresh:close()
warm:close()
base:close()

-- Per round, the prefill time of all requests together: the cost a server pays for the batch.
local sum_off, sum_on = {}, {}
for round = 1, o.rounds do
  sum_off[round], sum_on[round] = 0, 0
  for i = 1, n_req do
    sum_off[round] = sum_off[round] + t_off[i][round]
    sum_on[round] = sum_on[round] + t_on[i][round]
  end
end

print(("model %s (%s); %d thread(s); %d requests, %d rounds, %d new tokens each")
      :format(model.dir, info.model_type, wb.threads(), n_req, o.rounds, MAX_NEW))
print(("shared prefix: %d tokens (%s), reused from one session by fork\n"):format(P,
      chat and "chat template with a system message" or "a transcript of earlier turns"))
local fmt = "%-52s %6s %6s | %-24s | %-24s"
print(fmt:format("request", "tokens", "reused", "prefill ms, no reuse", "prefill ms, reuse"))
print(("-"):rep(120))
local tok_off, tok_on = 0, 0
local rec = { lesson = "prompt_cache", model = model.dir, model_type = info.model_type,
              prefix_tokens = P, requests = {}, same_ids = same, load = load,
              round_ms_without = sum_off, round_ms_with = sum_on }
for i, r in ipairs(requests) do
  tok_off, tok_on = tok_off + r.tokens_without, tok_on + r.tokens_with
  print(fmt:format(r.question:sub(1, 52), #r.ids, P, stats.format(t_off[i], "%.3f"),
                   stats.format(t_on[i], "%.3f")))
  rec.requests[i] = { question = r.question, prompt = r.prompt, tokens = #r.ids, prefilled_without = r.tokens_without,
                      prefilled_with = r.tokens_with, ms_without = t_off[i], ms_with = t_on[i],
                      reply_ids = r.reply_ids }
end
rec.tokens_without, rec.tokens_with = tok_off, tok_on + P -- the prefix itself is paid once
print(("\nprefill tokens over all %d requests: %d without reuse, %d with (%d for the prefix once + %d)")
      :format(n_req, tok_off, tok_on + P, P, tok_on))
print(("prefill ms per round of %d requests: %s without reuse, %s with (plus %.3f ms for the "
       .. "prefix, once)\n"):format(n_req, stats.format(sum_off, "%.3f"), stats.format(sum_on, "%.3f"),
       t_prefix))
rec.prefix_ms = t_prefix

lesson.conclude(rec, "same_ids", same,
  ("Every reply had the same %d token ids with and without reuse: the cached keys and values are "
   .. "the ones a fresh prefill computes."):format(MAX_NEW),
  "Some reply's ids differed with reuse: the cached prefix is not equivalent to a fresh prefill.")
lesson.conclude(rec, "fewer_tokens", rec.tokens_with < rec.tokens_without,
  ("Reuse prefilled %d tokens instead of %d (%.0f%% less): the shared prompt was paid once instead "
   .. "of %d times."):format(rec.tokens_with, rec.tokens_without,
    100 * (1 - rec.tokens_with / rec.tokens_without), n_req),
  "Reuse did not prefill fewer tokens: the prompts share no prefix.")
local cmp = lesson.compare_ranges(sum_on, sum_off)
lesson.conclude(rec, "faster", cmp == "below",
  ("With reuse every round's prefill was faster than every round without (medians %.3f and %.3f "
   .. "ms, %.1fx)."):format(stats.median(sum_on), stats.median(sum_off),
    stats.median(sum_off) / stats.median(sum_on)),
  ("Prefill time with and without reuse could not be told apart on this run (medians %.3f and "
   .. "%.3f ms, ranges %s): fewer tokens did not show as less time here."):format(
    stats.median(sum_on), stats.median(sum_off), cmp))
lesson.print_conclusions(rec)
lesson.print_load(load)
lesson.emit(rec)

if not same then
  io.stderr:write("prompt_cache: replies differ with prefix reuse\n")
  os.exit(1)
end
