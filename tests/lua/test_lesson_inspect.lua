-- test_lesson_inspect.lua - scripts/attention.lua and scripts/logit_lens.lua on the shipped
-- TinyLM: every number they record is recomputed here through model:forward / model:head, every
-- conclusion's `holds` from those numbers with this file's own code, every sentence is printed,
-- the heatmap's cells carry the recorded weights, and both answer --help and refuse unknown
-- options through wb.cli.
local T = dofile((arg[0]:match("^(.*)/") or ".") .. "/helpers.lua")
local wb = require("wb")

T.require_tinylm()

local exe = T.EXE
local dir = T.tmpdir()
local model = wb.load()
local tok = model.tokenizer

local function run(script, args)
  local path = dir .. "/record.json"
  os.remove(path)
  local out, errf = dir .. "/out.txt", dir .. "/err.txt"
  local ok, _, code = os.execute(("WB_MODEL= WB_OUT=%s WB_LESSON_RECORD=%s %s %s %s > %s 2> %s"):format(
    dir, path, exe, script, args or "", out, errf))
  return ok, code, T.read_file(out), T.read_file(errf), path
end

local function record(script, args)
  local ok, _, out, err, path = run(script, args)
  T.check(ok, ("%s failed:\n%s\n%s"):format(script, out, err), 2)
  return out, wb.json.decode(T.read_file(path))
end

local conclusion = T.conclusion

local function printed(out, rec)
  local flat = out:gsub("%s+", " ")
  for _, c in ipairs(rec.conclusions or {}) do
    T.check(#c.text > 0, "empty conclusion " .. c.id)
    T.check(flat:find(c.text:gsub("%s+", " "), 1, true), "conclusion not printed: " .. c.text)
  end
end

T.test("attention.lua: the recorded rows are the model's, and each sentence holds as computed", function()
  local out, rec = record("scripts/attention.lua")
  printed(out, rec)
  T.eq(#rec.prompts, 2)
  T.eq(rec.prompts[1].prompt, "Agent (")
  T.eq(rec.prompts[2].prompt, "Customer (Ana): Hi, my")
  local L, NH = model:info().n_layer, model:info().n_head
  for pi, p in ipairs(rec.prompts) do
    local ids = tok:encode(p.prompt)
    T.same_list(p.ids, ids)
    local n = #ids
    local r = model:forward(ids, { attentions = true, positions = { n - 1 } })
    T.eq(p.next.id, r.logits:argmax(), "next token")
    local on_first, on_self, middle = 0, 0, 0
    local mean = {}
    for j = 1, n do mean[j] = 0 end
    local ent = {}
    T.eq(#p.heads, L * NH)
    for k, hd in ipairs(p.heads) do
      local l, h = (k - 1) // NH, (k - 1) % NH
      T.eq(hd.layer, l); T.eq(hd.head, h)
      local row = r.attentions:vec(l, 0, h)
      local sum, best, e = 0, 0, 0
      for j = 0, n - 1 do
        T.near(hd.weights[j + 1], row:get(j), 1e-6, "weight")
        sum = sum + row:get(j)
        if row:get(j) > row:get(best) then best = j end
        if row:get(j) > 0 then e = e - row:get(j) * math.log(row:get(j), 2) end
        mean[j + 1] = mean[j + 1] + row:get(j) / (L * NH)
      end
      T.near(sum, 1, 1e-5, "a row sums to 1")
      T.eq(hd.argmax, best, "argmax")
      T.near(hd.entropy_bits, e, 1e-6)
      if best == 0 then on_first = on_first + 1 elseif best == n - 1 then on_self = on_self + 1 else middle = middle + 1 end
      ent[l + 1] = (ent[l + 1] or 0) + e / NH
    end
    local most = 0
    for j = 1, n - 1 do if mean[j + 1] > mean[most + 1] then most = j end end
    T.eq(p.most, most, "most attended")
    T.eq(p.on_first, on_first); T.eq(p.on_self, on_self); T.eq(p.middle, middle)
    local tag = "p" .. pi .. "_"
    T.eq(conclusion(rec, tag .. "first").holds, on_first * 2 > L * NH)
    T.check(conclusion(rec, tag .. "first").text:find(("%d on the last token itself"):format(on_self), 1, true))
    T.eq(conclusion(rec, tag .. "spread").holds, ent[1] > ent[L])
    if n > 2 then T.eq(conclusion(rec, tag .. "middle").holds, middle > 0) end
    T.check(conclusion(rec, tag .. "most").text:find(("%q"):format(tok:token(ids[most + 1])), 1, true), "most names the token")
  end
  -- The heatmap: one cell per (row, column) of each panel, carrying the recorded weight.
  T.eq(rec.svg, dir .. "/attention.svg", "written into $WB_OUT")
  local svg = T.read_file(rec.svg)
  T.check(out:find("heatmap: " .. rec.svg, 1, true), "prints the path")
  local cells = {}
  for v in svg:gmatch('class="cell"[^>]-data%-value="([^"]+)"') do cells[#cells + 1] = tonumber(v) end
  local k = 0
  for _, p in ipairs(rec.prompts) do
    for _, hd in ipairs(p.heads) do
      for j = 1, #p.ids do
        k = k + 1
        T.near(cells[k], hd.weights[j], 1e-5, "cell " .. k)
      end
    end
  end
  T.eq(#cells, k, "cell count")
end)

T.test("attention.lua: --prompt replaces the defaults, --output names the file", function()
  local target = dir .. "/mine.svg"
  local out, rec = record("scripts/attention.lua", ("--prompt 'Hi there' --output %s"):format(target))
  printed(out, rec)
  T.eq(#rec.prompts, 1)
  T.eq(rec.svg, target)
  T.check(T.read_file(target):find("<svg", 1, true))
end)

T.test("logit_lens.lua: each layer's lens is recomputed, and the sure-from layer follows", function()
  local out, rec = record("scripts/logit_lens.lua")
  printed(out, rec)
  local ids = tok:encode(rec.prompt)
  T.same_list(rec.prompt_ids, ids)
  T.eq(rec.target_id, tok:id(" account"))
  local L = model:info().n_layer
  local r = model:forward(ids, { hidden_states = true })
  T.eq(#rec.layers, L + 1)
  local sure_from
  for l = 0, L do
    local probs = model:head(r.hidden_states:vec(l, #ids - 1)):softmax()
    local row = rec.layers[l + 1]
    T.near(row.p_target, probs:get(rec.target_id), 1e-6, "p(target) at layer " .. l)
    local rank = 1
    for i = 0, #probs - 1 do
      if probs:get(i) > probs:get(rec.target_id) or (probs:get(i) == probs:get(rec.target_id) and i < rec.target_id) then rank = rank + 1 end
    end
    T.eq(row.rank_target, rank, "rank at layer " .. l)
    T.eq(row.top[1].id, (probs:argmax()), "top at layer " .. l)
  end
  for l = L, 0, -1 do
    local row = rec.layers[l + 1]
    if row.rank_target == 1 and row.p_target >= rec.sure then sure_from = l else break end
  end
  T.eq(conclusion(rec, "sure_from").holds, sure_from ~= nil)
  T.eq(rec.sure_from == wb.json.null and nil or rec.sure_from, sure_from)
  if sure_from then
    T.check(conclusion(rec, "sure_from").text:find(("after %d of its %d layers"):format(sure_from, L), 1, true)
      or sure_from == 0, "names the layer")
  end
  T.eq(conclusion(rec, "layer0_reads_input").holds, rec.layers[1].top[1].id == ids[#ids])
  local real = r.logits:softmax()
  T.eq(conclusion(rec, "final_is_model").holds, rec.final_max_diff < 1e-5 and rec.layers[L + 1].top[1].id == real:argmax())
  -- On TinyLM this prompt is one it has memorised: the claim the issue asks to show.
  T.check(sure_from ~= nil and sure_from < L, "TinyLM becomes sure of ' account' inside the stack")
end)

T.test("logit_lens.lua: another target that never wins says so", function()
  local out, rec = record("scripts/logit_lens.lua", "--target ' billing'")
  printed(out, rec)
  T.eq(conclusion(rec, "sure_from").holds, false)
  T.check(conclusion(rec, "sure_from").text:find("never becomes sure", 1, true))
end)

T.test("both scripts answer --help and refuse unknown options with status 2", function()
  for _, s in ipairs({ "scripts/attention.lua", "scripts/logit_lens.lua" }) do
    local ok, code, out = run(s, "--help")
    T.check(ok and out:find("usage: workbench " .. s, 1, true), s .. " --help")
    ok, code = run(s, "--no-such-option")
    T.eq(code, 2, s .. " unknown option")
  end
  local ok, code, _, err = run("scripts/logit_lens.lua", "--target 'not one token at all'")
  T.eq(code, 2)
  T.check(err:find("not one token", 1, true), err)
end)

T.rmdir(dir)
T.done()
