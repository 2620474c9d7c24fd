-- setup.lua - Part B lab bench: load TinyLM once and the measuring tools every lesson uses.
--
--   workbench scripts/setup.lua            -- prints model size, and entropy + top tokens for an
--                                             uncertain and a certain prompt
--   local L = dofile("scripts/setup.lua")  -- from another lesson: the helpers below
--
-- WB_MODEL (or the default models/tinylm-base) names the model directory.
local wb = require("wb")
local stats = require("wb.stats")

local L = {}
L.wb = wb
L.model = wb.load()
L.tok = L.model.tokenizer
L.V = L.model.config.vocab_size
L.n_ctx = L.model:info().n_ctx

-- TinyLM memorised its templated corpus, so most prompts have one obvious continuation. After
-- "Hi," about nine different questions follow in the corpus; after "Hi, my" one word does.
L.UNCERTAIN = "Customer (Ana): Hi,"
L.CERTAIN = "Customer (Ana): Hi, my"
-- The course's TinyLM (a different training run) measured these two prompts at:
L.COURSE = {uncertain_bits = 3.06, certain_bits = 0.02}

-- Raw next-token scores after `text` (the right end of the prompt if it is too long).
function L.logits_for(text)
  local ids = L.tok:encode(text)
  while #ids > L.n_ctx do table.remove(ids, 1) end
  return L.model:logits(ids)
end

-- The distribution the sampler would draw from with these parameters: the real code path.
function L.distribution(text, params)
  return wb.sampling.apply(L.logits_for(text), params or {}, {})
end

-- The two prompts are TinyLM's: on another model they may be neither open nor sure. Measure
-- them; if they do not behave (open above 1.5 bits, sure below 0.5, as the lessons assume),
-- say so and pick the most open and the surest of a few general prompts by measured entropy,
-- or stop with a message when no pair is at least 1 bit apart.
L.CANDIDATES = {
  "The capital of France is", "Once upon a time", "1, 2, 3, 4,", "My favourite food is",
  "The opposite of hot is", "Dear Sir or Madam,", "Hello, my name is", "The sun rises in the",
  L.UNCERTAIN, L.CERTAIN,
}
function L.entropy_of(text) return L.distribution(text, {temperature = 1.0}):entropy_bits() + 0.0 end
L.shipped = L.model.dir == wb.default_model_dir()
do
  local u, c = L.entropy_of(L.UNCERTAIN), L.entropy_of(L.CERTAIN)
  if not (u > 1.5 and c < 0.5) then
    local best_u, best_c
    for _, p in ipairs(L.CANDIDATES) do
      local e = L.entropy_of(p)
      if not best_u or e > best_u[2] then best_u = {p, e} end
      if not best_c or e < best_c[2] then best_c = {p, e} end
    end
    local msg = ("these lessons were written for TinyLM's memorised prompts; on %s %q has %.2f "
      .. "bits and %q %.2f bits"):format(L.model.dir, L.UNCERTAIN, u, L.CERTAIN, c)
    if best_u[2] - best_c[2] < 1 then
      io.stderr:write(("setup: %s, and no pair of %d general prompts is 1 bit apart (most open "
        .. "%.2f, surest %.2f bits): the lessons built on setup.lua need a model with one open and one sure "
        .. "prompt, so this one stops here\n"):format(msg, #L.CANDIDATES, best_u[2], best_c[2]))
      os.exit(1)
    end
    io.stderr:write(("note: %s; using %q (%.2f bits) as the open prompt and %q (%.2f bits) as the "
      .. "sure one, picked by measured entropy\n"):format(msg, best_u[1], best_u[2], best_c[1],
      best_c[2]))
    L.UNCERTAIN, L.CERTAIN, L.prompts_picked = best_u[1], best_c[1], true
  elseif not L.shipped then
    io.stderr:write(("note: %s is not the shipped TinyLM; its two lesson prompts measured %.2f and "
      .. "%.2f bits, so they are kept\n"):format(L.model.dir, u, c))
  end
end

-- Spread in bits: 0 = one certain token, log2(V) = uniform. "+ 0.0" turns -0.0 into 0.0.
function L.entropy_bits(probs) return probs:entropy_bits() + 0.0 end

-- Tokens with non-zero probability after the filters.
function L.survivors(probs) return probs:count_nonzero() end

-- "' how' 0.27, ' I' 0.15, ..." for the n most likely tokens.
function L.top_tokens(probs, n)
  local out = {}
  for _, e in ipairs(probs:topk(n or 5)) do
    if e.p > 0 then
      out[#out + 1] = ("%q %.3f"):format(L.tok:decode({e.id}), e.p):gsub("\\\n", "\\n")
    end
  end
  return table.concat(out, ", ")
end

-- "median (min to max)": every timing with its noise.
function L.median_and_spread(xs)
  return ("%.2f (%.2f to %.2f)"):format(stats.median(xs), stats.min(xs), stats.max(xs))
end

-- The raw model's probability (temperature 1, no filters) of each token of a continuation.
function L.token_probs(prompt, continuation_ids)
  local ids = L.tok:encode(prompt)
  local n_prompt = #ids
  for _, id in ipairs(continuation_ids) do ids[#ids + 1] = id end
  while #ids > L.n_ctx do table.remove(ids, 1); n_prompt = n_prompt - 1 end
  local rows = L.model:logits(ids, {all = true})
  local out = {}
  for i, id in ipairs(continuation_ids) do
    local p = rows[n_prompt + i - 1]:softmax()
    out[i] = p:get(id)
  end
  return out
end

function L.is_main(name)
  return arg and arg[0] and arg[0]:match(name .. "$") ~= nil
end

-- Measurements of this lesson, for tests and for printing.
function L.measure()
  local r = {params = L.model:num_parameters(), n_ctx = L.n_ctx, V = L.V,
             max_entropy = math.log(L.V, 2), prompts = {}}
  for _, prompt in ipairs({L.UNCERTAIN, L.CERTAIN}) do
    local p = L.distribution(prompt, {temperature = 1.0})
    r.prompts[#r.prompts + 1] = {prompt = prompt, entropy = L.entropy_bits(p),
                                 top = L.top_tokens(p, 3), top_id = p:argmax(), top_p = p:get(p:argmax())}
  end
  return r
end

if L.is_main("setup.lua") then
  require("wb.cli").parse(arg, "scripts/setup.lua", {}, { about = "load TinyLM and show the entropy of two next-token distributions" })
  local r = L.measure()
  print(("TinyLM loaded: %d parameters, context %d tokens, vocabulary %d"):format(r.params, r.n_ctx, r.V))
  for _, row in ipairs(r.prompts) do
    print(("%-28s entropy %5.2f bits, top: %s"):format(("%q"):format(row.prompt), row.entropy, row.top))
  end
  print(("max possible entropy: %.2f bits (all %d tokens equally likely)"):format(r.max_entropy, r.V))
  local lesson = require("wb.lesson")
  lesson.course(("entropy %.2f bits after %q and %.2f bits after %q (ours: %.2f and %.2f)"):format(
    L.COURSE.uncertain_bits, L.UNCERTAIN, L.COURSE.certain_bits, L.CERTAIN, r.prompts[1].entropy,
    r.prompts[2].entropy))
  local rec = {lesson = "setup", prompts = r.prompts}
  lesson.conclude(rec, "spread_apart", r.prompts[1].entropy > r.prompts[2].entropy + 1,
    ("The open prompt is spread over several tokens (%.2f bits, about %.0f live options) and the "
     .. "sure one is not (%.2f bits), as in the course."):format(r.prompts[1].entropy,
      2 ^ r.prompts[1].entropy, r.prompts[2].entropy),
    ("The two prompts are not far apart on this model (%.2f and %.2f bits): the lessons built "
     .. "on them will show little."):format(r.prompts[1].entropy, r.prompts[2].entropy))
  lesson.print_conclusions(rec)
  lesson.emit(rec)
end

return L
