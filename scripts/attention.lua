-- attention.lua - where the last position looks: attention weights by layer and head.
--
--   workbench scripts/attention.lua [--prompt TEXT]... [--output FILE.svg]
--
-- Each head of each layer mixes the values of earlier positions with weights
-- softmax(q . k / sqrt(head_dim)) over those positions. model:forward with attentions = true and
-- positions = {-1} returns those weights for the last position, the one whose output predicts
-- the next token: one row per (layer, head), one column per earlier token, each row summing to 1.
--
-- For each prompt (on TinyLM by default "Agent (" and "Customer (Ana): Hi, my") this prints the
-- rows as a table, draws them as a heatmap (SVG, written where --output says, else
-- $WB_OUT/attention.svg), and says what the numbers show: which token gets the most weight on
-- average, how many heads rest on the first token, how many look at the middle of the prompt,
-- and whether the first layer spreads its attention wider than the last. Every sentence is
-- chosen from this run's numbers; WB_LESSON_RECORD=FILE writes them with the weights
-- (tests/lua/test_lesson_inspect.lua recomputes them).
local wb = require("wb")
local cli = require("wb.cli")
local lesson = require("wb.lesson")
local plot = require("wb.plot")

local o = cli.parse(arg, "scripts/attention.lua", {
  { "prompt", "string", nil, "a prompt (repeatable; default \"Agent (\" and \"Customer (Ana): Hi, my\")", many = true },
  { "output", "string", nil, "where the SVG heatmap goes (default $WB_OUT/attention.svg)" },
}, { about = "which earlier tokens the last position attends to, per layer and head" })
local prompts = (o.prompt and #o.prompt > 0) and o.prompt or { "Agent (", "Customer (Ana): Hi, my" }

local model = wb.load()
local tok = model.tokenizer
local info = model:info()
local L, NH = info.n_layer, info.n_head

local function shown(id) return ("%q"):format(tok:token(id)) end
local function entropy_bits(row)
  local h = 0
  for _, w in ipairs(row) do if w > 0 then h = h - w * math.log(w, 2) end end
  return h
end

local rec = { lesson = "attention", model = model.dir, n_layer = L, n_head = NH, prompts = {} }
local panels = {}
print(("model %s (%s): %d layers x %d heads; the weights of the last position over the prompt's "
  .. "tokens (each row sums to 1)"):format(model.dir, info.model_type, L, NH))

for pi, prompt in ipairs(prompts) do
  local ids = tok:encode(prompt)
  if #ids == 0 then io.stderr:write("attention.lua: a --prompt is empty\n") os.exit(2) end
  if #ids > info.n_ctx then
    io.stderr:write(("attention.lua: a --prompt has %d tokens, more than the context of %d\n"):format(#ids, info.n_ctx))
    os.exit(2)
  end
  local n = #ids
  local r = model:forward(ids, { attentions = true, positions = { -1 } })
  local next_id = r.logits:argmax()
  local p = { prompt = prompt, ids = ids, tokens = {}, next = { id = next_id, text = tok:token(next_id) },
              heads = {} }
  for j = 1, n do p.tokens[j] = tok:token(ids[j]) end
  print(("\n%q: %d tokens; the model's next token: %s"):format(prompt, n, shown(next_id)))
  local cols = {}
  for j = 1, n do cols[j] = ("%q"):format(p.tokens[j]):sub(1, 10) end
  local fmt_cell = "%10s"
  print(("%-7s "):format("layer.h") .. table.concat((function()
    local t = {} for j = 1, n do t[j] = fmt_cell:format(cols[j]) end return t end)(), " ") .. "   most")
  local rows, values = {}, {}
  for l = 0, L - 1 do
    for h = 0, NH - 1 do
      local row = r.attentions:vec(l, 0, h):totable()
      local best = 1
      for j = 2, n do if row[j] > row[best] then best = j end end
      local head = { layer = l, head = h, weights = row, argmax = best - 1, entropy_bits = entropy_bits(row) }
      p.heads[#p.heads + 1] = head
      local cells = {}
      for j = 1, n do cells[j] = fmt_cell:format(("%.3f"):format(row[j])) end
      print(("%-7s "):format(("%d.%d"):format(l, h)) .. table.concat(cells, " ") .. "   " .. cols[best])
      rows[#rows + 1] = ("L%d H%d"):format(l, h)
      values[#values + 1] = row
    end
  end
  panels[#panels + 1] = { title = ("%q -> %s"):format(prompt, shown(next_id)), rows = rows, cols = cols, values = values }

  -- The numbers the sentences are chosen from.
  local mean = {}
  for j = 1, n do
    local s = 0
    for _, hd in ipairs(p.heads) do s = s + hd.weights[j] end
    mean[j] = s / #p.heads
  end
  local most = 1
  for j = 2, n do if mean[j] > mean[most] then most = j end end
  local on_first, on_self, middle, sharpest = 0, 0, {}, p.heads[1]
  for _, hd in ipairs(p.heads) do
    if hd.argmax == 0 then on_first = on_first + 1
    elseif hd.argmax == n - 1 then on_self = on_self + 1
    else middle[#middle + 1] = hd end
    if hd.weights[hd.argmax + 1] > sharpest.weights[sharpest.argmax + 1] then sharpest = hd end
  end
  local layer_entropy = {}
  for l = 0, L - 1 do
    local s = 0
    for h = 0, NH - 1 do s = s + p.heads[l * NH + h + 1].entropy_bits end
    layer_entropy[l + 1] = s / NH
  end
  p.mean_weight, p.most = mean, most - 1
  p.on_first, p.on_self, p.middle = on_first, on_self, #middle
  p.layer_entropy_bits = layer_entropy
  rec.prompts[pi] = p

  local tag, H = "p" .. pi .. "_", #p.heads
  lesson.conclude(rec, tag .. "most", true,
    ("After %q the last position attends most, averaged over the %d heads, to %s (position %d, "
     .. "mean weight %.2f); the sharpest head is layer %d head %d, with %.2f on %s."):format(
      prompt, H, shown(ids[most]), most - 1, mean[most], sharpest.layer, sharpest.head,
      sharpest.weights[sharpest.argmax + 1], shown(ids[sharpest.argmax + 1])), "")
  if n > 1 then
    local counts = ("%d on the last token itself, %d on a token in between"):format(on_self, #middle)
    lesson.conclude(rec, tag .. "first", on_first * 2 > H,
      ("Most heads, %d of %d, put their largest weight on the first token %s (%s)."):format(
        on_first, H, shown(ids[1]), counts),
      (on_first == 0 and "None of the %d heads puts its largest weight on the first token %s (%s)."
        or ("Only " .. on_first .. " of %d heads put their largest weight on the first token %s (%s).")):format(
        H, shown(ids[1]), counts))
  end
  if n > 2 then
    local ex = middle[1]
    for _, hd in ipairs(middle) do if hd.weights[hd.argmax + 1] > ex.weights[ex.argmax + 1] then ex = hd end end
    lesson.conclude(rec, tag .. "middle", #middle > 0,
      ex and ("%d of %d heads look past both ends of the prompt, most strongly layer %d head %d at %s "
        .. "(%.2f)."):format(#middle, H, ex.layer, ex.head, shown(ids[ex.argmax + 1]), ex.weights[ex.argmax + 1]) or "",
      ("No head looks past both ends: every head's largest weight is on the first token or the "
       .. "last one."))
  end
  if n > 1 and L > 1 then
    lesson.conclude(rec, tag .. "spread", layer_entropy[1] > layer_entropy[L],
      ("The first layer spreads its attention wider than the last: %.2f bits of entropy per head "
       .. "against %.2f."):format(layer_entropy[1], layer_entropy[L]),
      ("The last layer spreads its attention at least as wide as the first: %.2f bits of entropy "
       .. "per head against %.2f."):format(layer_entropy[L], layer_entropy[1]))
  end
end

local path = cli.output_path(o.output, "attention.svg")
plot.write(path, plot.heatmap{ title = ("Attention of the last position (%s, %d layers x %d heads)"):format(
  info.model_type, L, NH), panels = panels })
rec.svg = path
print()
lesson.print_conclusions(rec)
print("heatmap: " .. path)
lesson.emit(rec)
