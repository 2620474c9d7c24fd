-- The shipped model behaves the way the lessons need (issue: TinyLM).
-- Runs against models/tinylm-base exactly as committed.

local T = dofile((arg[0]:match("^(.*)/") or ".") .. "/helpers.lua")
local wb = require("wb")

local dir = (os.getenv("WB_SOURCE_DIR") or ".") .. "/models/tinylm-base"
local model = wb.load(dir)
local tok = model.tokenizer

local function next_probs(text)
  return model:logits(tok:encode(text)):softmax()
end

T.test("the shipped model has exactly 1,071,872 parameters and the documented shape", function()
  T.eq(model:num_parameters(), 1071872)
  local c = model.config
  T.eq(c.vocab_size, 2048); T.eq(c.n_positions, 128); T.eq(c.n_embd, 128)
  T.eq(c.n_layer, 4); T.eq(c.n_head, 4)
  T.eq(#tok, 2048, "tokenizer vocabulary")
  T.eq(tok:str(tok.eos_id), "<|endoftext|>")
end)

T.test("the shipped tokenizer gives Hugging Face tokenizers' ids on 414 committed vectors", function()
  local f = assert(io.open((os.getenv("WB_SOURCE_DIR") or ".") .. "/tests/vectors/tinylm_vectors.json"))
  local vectors = wb.json.decode(f:read("a"))
  f:close()
  T.check(#vectors >= 400, "vector count")
  for i, v in ipairs(vectors) do
    local got = table.concat(tok:encode(v.text), ",")
    local want = table.concat(v.ids, ",")
    if got ~= want then error(("vector %d %q: got %s, want %s"):format(i, v.text:sub(1, 60), got, want)) end
    T.eq(tok:decode(tok:encode(v.text)), v.text, "round trip of vector " .. i)
  end
end)

T.test("after 'Hi,' the next word is genuinely uncertain", function()
  local p = next_probs("Customer (Ana): Hi,")
  local h = p:entropy_bits()
  T.check(h >= 2 and h <= 4.5, ("entropy %.2f bits, want 2 to 4.5"):format(h))
  local words = 0
  for _, t in ipairs(p:topk(10)) do
    if tok:token(t.id):match("^ %a+$") then words = words + 1 end
  end
  T.check(words >= 6, ("only %d plausible words in the top 10"):format(words))
end)

T.test("after 'Hi, my' the model is nearly certain", function()
  local top = next_probs("Customer (Ana): Hi, my"):topk(1)[1]
  T.check(top.p >= 0.95, ("top token %q has p=%.3f"):format(tok:token(top.id), top.p))
end)

T.test("after 'Agent (' the 16 agent names are the 16 most likely tokens, none above 20%", function()
  local corpus = require("wb.corpus")
  local agents = corpus.AGENTS
  T.eq(#agents, 16)
  local first = {}
  for _, name in ipairs(agents) do first[tok:encode(name)[1]] = name end
  -- The context is exactly "Agent (": which of the 16 agents answers is a coin with 16 sides.
  -- (After a whole customer line the memorised model often recalls who answered that line.)
  local top = next_probs("Agent ("):topk(16)
  for i, t in ipairs(top) do
    T.check(first[t.id], ("rank %d is %q, not an agent name"):format(i, tok:token(t.id)))
    T.check(t.p <= 0.20, ("%q has p=%.3f > 0.20"):format(tok:token(t.id), t.p))
  end
end)

T.test("greedy reply to the export question is on topic, ends its line and starts a new customer turn", function()
  local prompt = "Customer (Ana): Hi, how do I export my board data?\nAgent (Lena):"
  local s <close> = model:session()
  local id = s:prefill(tok:encode(prompt)):argmax()
  local out = {}
  for _ = 1, 60 do
    out[#out + 1] = id
    id = s:decode(id):argmax()
  end
  local text = tok:decode(out)
  local reply, rest = text:match("^([^\n]*)\n(.*)$")
  T.check(reply, "no line break in " .. ("%q"):format(text))
  T.check(reply:lower():find("export"), "reply is not about exporting: " .. reply)
  T.check(rest:match("^Customer %("), "next turn is not a customer turn: " .. ("%q"):format(rest))
end)

T.test("a charged-twice ticket is triaged as billing", function()
  local top = next_probs("Ticket: I was charged twice this month\nCategory:"):topk(1)[1]
  T.eq(tok:token(top.id), " billing")
end)

T.test("the loss log shows memorisation: validation bottoms out well before the end", function()
  local f = assert(io.open(dir .. "/loss.csv"))
  local header = f:read("l")
  T.check(header:find("val_loss"), "loss.csv has a val_loss column")
  local cols = {}
  for name in header:gmatch("[^,]+") do cols[#cols + 1] = name end
  local rows = {}
  for line in f:lines() do
    local r, i = {}, 0
    for v in (line .. ","):gmatch("([^,]*),") do i = i + 1; r[cols[i]] = tonumber(v) end
    rows[#rows + 1] = r
  end
  f:close()
  local best, best_step, last_step, first_train, last_train = math.huge, nil, 0, nil, nil
  for _, r in ipairs(rows) do
    if r.val_loss and r.val_loss < best then best, best_step = r.val_loss, r.step end
    last_step = math.max(last_step, r.step)
    if r.train_loss then first_train = first_train or r.train_loss; last_train = r.train_loss end
  end
  T.check(best_step and best_step < 0.6 * last_step,
          ("validation minimum at step %s of %d"):format(tostring(best_step), last_step))
  local window = {}
  for _, r in ipairs(rows) do
    if r.train_loss and r.step >= best_step then window[#window + 1] = r.train_loss end
  end
  -- training loss keeps falling after the validation minimum
  T.check(last_train < window[1] - 0.05, ("train loss %.3f at the validation minimum, %.3f at the end")
          :format(window[1], last_train))
end)

T.done()
