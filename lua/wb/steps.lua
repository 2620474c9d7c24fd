-- wb.steps - the full record of one generation, step by step: what the sampler saw.
--
--   local steps = require("wb.steps")
--   local rec = steps.record(model, "Customer (Ana): Hi, my", {temperature = 0.8, seed = 1})
--   rec.steps[1].stages[1].top   -- the raw model's best candidates at step 1
--
-- The tokens and timings are those of a real model:generate call. Each step's distributions
-- are then recomputed from that step's logits (a KV-cache replay of the same ids) through
-- wb.sampling.apply, the code path generation samples from, one stage of the documented order
-- at a time: raw, penalties, logit bias, constraint mask, temperature, filters. The last stage
-- is exactly the distribution the token was drawn from; `verify = true` checks that by
-- redrawing each sampled step with the request's seed (tests/lua/test_steps.lua).
--
-- With `attention = true` each step also carries the attention of the position that produced
-- its logits (the last prompt token for step 1, the previous generated token after that), as
-- step.attention[layer][head][j] over positions j = 0..step.attention_position (1-based Lua
-- lists; JSON arrays), taken from the replay's own forward passes (s:prefill / s:decode with
-- attentions = true), so it costs nothing when not asked.
local wb = require("wb")

local steps = {}

local RANK_WINDOW = 100

local OPTS = {top = true, constraint = true, verify = true, n_ctx = true, attention = true}

-- [layer][head][position] lists from an attentions Tensor [L, 1, NH, T] (one query).
local function attention_lists(t)
  local shape, out = t:shape(), {}
  for l = 0, shape[1] - 1 do
    out[l + 1] = {}
    for h = 0, shape[3] - 1 do out[l + 1][h + 1] = t:vec(l, 0, h):totable() end
  end
  return out
end

-- The stage list and which parameters each one adds, in the order of docs/sampling.md.
steps.STAGES = {
  {name = "raw", adds = {}},
  {name = "penalties", adds = {"repetition_penalty", "frequency_penalty", "presence_penalty"}},
  {name = "bias", adds = {"logit_bias"}},
  {name = "mask", adds = {}},                   -- the constraint's allowed set
  {name = "temperature", adds = {"temperature"}},
  {name = "filters", adds = {"top_k", "top_p", "min_p"}},
}

-- A constraint from a plain description (what the step explorer's picker sends):
-- {kind = "choice", choices = {...}} | {kind = "regex", pattern = "..."} |
-- {kind = "json_schema", schema = table_or_json_text}. A compiled constraint passes through.
function steps.constraint(model, spec)
  if spec == nil or spec == false then return nil end
  if type(spec) ~= "table" then error("constraint: expected a table, got " .. type(spec), 2) end
  if spec.kind == nil then return spec end      -- already compiled
  if spec.kind == "none" then return nil end
  if spec.kind == "choice" then
    if type(spec.choices) ~= "table" or #spec.choices == 0 then
      error("constraint.choices: expected a non-empty list of strings", 2)
    end
    return wb.constraint.choice(model, spec.choices)
  elseif spec.kind == "regex" then
    if type(spec.pattern) ~= "string" then error("constraint.pattern: expected a string", 2) end
    return wb.constraint.regex(model, spec.pattern)
  elseif spec.kind == "json_schema" then
    if spec.schema == nil then error("constraint.schema: missing", 2) end
    return wb.constraint.json_schema(model, spec.schema)
  end
  error(("constraint.kind: unknown kind %q (choice, regex, json_schema, none)"):format(
    tostring(spec.kind)), 2)
end

local function top_list(tok, probs, k)
  local out = {}
  for i, t in ipairs(probs:topk(k)) do
    out[i] = {id = t.id, text = tok:decode({t.id}), p = t.p, logprob = t.p > 0 and math.log(t.p) or nil}
  end
  return out
end

-- Parameters of the first `upto` stages (the others at their neutral values).
local function stage_params(params, upto)
  local p = {temperature = 1}
  for i = 1, upto do
    for _, key in ipairs(steps.STAGES[i].adds) do p[key] = params[key] end
  end
  if p.temperature == nil then p.temperature = 1 end
  return p
end

-- The ids generation may sample at all: the tokenizer's ids (a padded embedding has more rows).
local function vocab_mask(model, V)
  local n_tok = #model.tokenizer
  if n_tok >= V then return nil end
  local ids = {}
  for i = 0, n_tok - 1 do ids[#ids + 1] = i end
  return ids
end

local function intersect(a, b)
  if not a then return b end
  if not b then return a end
  local in_b, out = {}, {}
  for _, id in ipairs(b) do in_b[id] = true end
  for _, id in ipairs(a) do if in_b[id] then out[#out + 1] = id end end
  return out
end

--- steps.record(model, prompt, params [, opts]) -> record
-- opts: top (candidates kept per stage, default 10), constraint (see steps.constraint),
-- verify (redraw sampled steps and raise if a token differs), n_ctx, attention (record each
-- step's attention, see the top).
function steps.record(model, prompt, params, opts)
  params, opts = params or {}, opts or {}
  if type(prompt) ~= "string" then error("bad argument #2 to 'record' (prompt must be a string)", 2) end
  for k in pairs(opts) do
    if not OPTS[k] then error(("bad argument #4 to 'record' (unknown option '%s')"):format(k), 2) end
  end
  wb.sampling.check(params)
  local top = opts.top or 10
  local tok = model.tokenizer
  local c = steps.constraint(model, opts.constraint)
  local info = model:info()

  local t0 = wb.clock_ms()
  local ids = tok:encode(prompt, {truncation = false, padding = false}) -- as generate encodes it
  local tokenize_ms = wb.clock_ms() - t0
  local gen_opts = {constraint = c, n_ctx = opts.n_ctx}
  local gen = model:generate(prompt, params, gen_opts)

  -- The prompt the model actually saw (generation trims from the left; empty starts from eos).
  if #ids == 0 then ids = {tok.eos_id} end
  local dropped = gen.prompt_tokens_dropped or 0
  local seen = table.move(ids, dropped + 1, #ids, 1, {})

  local rec = {
    model = {dir = model.dir, model_type = info.model_type, vocab_size = info.vocab_size,
             n_layer = info.n_layer, n_head = info.n_head,
             kv_bytes_per_token = info.kv_bytes_per_token},
    prompt = prompt, prompt_ids = seen, prompt_tokens_dropped = dropped,
    prompt_tokens = (function() local t = {} for i, id in ipairs(seen) do t[i] = tok:decode({id}) end return t end)(),
    params = params, seed = gen.seed, text = gen.text, token_ids = gen.token_ids,
    stop_reason = gen.stop_reason,
    constraint = opts.constraint and (opts.constraint.kind or "compiled") or "none",
    timing = {tokenize_ms = tokenize_ms, prefill_ms = gen.prefill_ms, ttft_ms = gen.ttft_ms,
              itl_ms = gen.itl_ms, e2e_ms = gen.e2e_ms,
              decode_ms_per_token = gen.decode_ms_per_token},
    stages = {}, steps = {},
  }
  for i, s in ipairs(steps.STAGES) do rec.stages[i] = s.name end

  local s <close> = model:session({n_ctx = opts.n_ctx})
  local insp = opts.attention and {attentions = true, positions = {-1}} or nil
  local logits, inside = s:prefill(seen, insp)
  local state = c and c:start() or nil
  local vmask = vocab_mask(model, #logits)
  local said = {}
  local draws = 0
  for k, id in ipairs(gen.token_ids) do
    local allowed = intersect(vmask, state and state:allowed(said) or nil)
    local step = {index = k, id = id, text = tok:decode({id}), position = #seen + k - 1,
                  kv_tokens = #seen + k - 1, stages = {}}
    step.kv_bytes = step.kv_tokens * (info.kv_bytes_per_token or 0)
    if inside then
      step.attention = attention_lists(inside.attentions)
      step.attention_position = inside.positions[1]
    end
    local final
    for i, stage in ipairs(steps.STAGES) do
      local p = stage_params(params, i)
      local masked = i >= 4 and allowed or nil
      local probs = wb.sampling.apply(logits, p, said, masked)
      local entry = {name = stage.name, top = top_list(tok, probs, top),
                     entropy_bits = probs:entropy_bits(), survivors = probs:count_nonzero(),
                     chosen_p = probs:get(id)}
      -- The chosen token's rank in this stage (1 = most probable), looked for among the best
      -- RANK_WINDOW only: a full sort per stage would cost more than the step at 150k ids.
      if entry.chosen_p > 0 then
        for r, t in ipairs(entry.top) do
          if t.id == id then entry.chosen_rank = r break end
        end
        if not entry.chosen_rank and top < RANK_WINDOW then
          for r, t in ipairs(probs:topk(math.min(#probs, RANK_WINDOW))) do
            if t.id == id then entry.chosen_rank = r break end
          end
        end
        if not entry.chosen_rank then entry.chosen_rank_above = math.max(top, RANK_WINDOW) end
      end
      if stage.name == "mask" and allowed then
        local before = wb.sampling.apply(logits, stage_params(params, 3), said)
        step.constraint = {allowed = #allowed, removed_mass = math.max(0, 1 - before:sum_over(allowed))}
        local best = before:argmax()
        if entry.chosen_p > 0 and probs:get(best) == 0 then
          step.constraint.overruled = {id = best, text = tok:decode({best}),
                                       logprob = math.log(before:get(best))}
        end
      end
      step.stages[i] = entry
      final = probs
    end
    step.p = final:get(id)
    step.logprob = step.p > 0 and math.log(step.p) or nil
    step.entropy_bits = step.stages[#step.stages].entropy_bits
    step.rank = step.stages[#step.stages].chosen_rank
    if k == 1 then step.ms = gen.ttft_ms else step.ms = gen.itl_ms[k - 1] end
    if (params.temperature or 1) > 0 then
      draws = draws + 1
      if opts.verify and params.seed then
        local again = wb.sampling.draw(final, params.seed, draws)[draws]
        if again ~= id then
          error(("steps.record: step %d redraws id %d, generation sampled %d"):format(k, again, id))
        end
      end
    elseif opts.verify and final:get(id) ~= 1 then
      error(("steps.record: greedy step %d sampled id %d, not the argmax"):format(k, id))
    end
    rec.steps[k] = step
    said[#said + 1] = id
    if state then state:advance(id) end
    if k < #gen.token_ids and s:pos() < s:n_ctx() then
      logits, inside = s:decode(id, insp and {attentions = true} or nil)
    end
  end
  rec.max_entropy_step = nil
  local best = -1
  for k, st in ipairs(rec.steps) do
    if st.entropy_bits > best then best, rec.max_entropy_step = st.entropy_bits, k end
  end
  return rec
end

return steps
