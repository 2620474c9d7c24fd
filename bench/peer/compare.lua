-- compare.lua - one model, two implementations: the workbench on a model directory and llama.cpp
-- (through bench/peer/llama_probe) on the GGUF the workbench wrote from it.
--   workbench bench/peer/compare.lua PROBE MODEL_DIR FILE.gguf [weights] [strings.txt]
-- weights: as_stored (default), q8_0 or q4_0 (how the workbench loads the directory, matching
-- the GGUF's type). Prints one line per check: token ids of every line of strings.txt, then the
-- logits of a prompt's last position and of 8 greedy steps (the workbench is fed llama.cpp's
-- greedy tokens so both see the same sequence): max |difference|, the logit range, top-1 agreement.
local wb = require("wb")
local probe, dir, gguf, weights, strings = arg[1], arg[2], arg[3], arg[4] or "as_stored", arg[5]
assert(probe and dir and gguf, "usage: compare.lua PROBE MODEL_DIR FILE.gguf [weights] [strings.txt]")

local function run(cmd)
  local f = assert(io.popen(cmd, "r"))
  local s = f:read("a")
  local ok = f:close()
  assert(ok, "failed: " .. cmd)
  return s
end

local m = wb.load(dir, { weights = weights })
local tok = m.tokenizer
local name = gguf:match("[^/]+$")

if strings then
  local lines = {}
  for line in io.lines(strings) do lines[#lines + 1] = line end
  local got = run(string.format("'%s' '%s' tok '%s'", probe, gguf, strings))
  local same, n, first_bad = 0, 0, nil
  local i = 0
  for l in got:gmatch("[^\n]+") do
    i = i + 1
    local theirs = wb.json.decode(l)
    local text = lines[i]:gsub("\\(.)", { n = "\n", t = "\t", r = "\r", ["\\"] = "\\" })
    local ours = tok:encode(text)
    local eq = #ours == #theirs
    for k = 1, #ours do eq = eq and ours[k] == theirs[k] end
    n = n + 1
    if eq then same = same + 1 elseif not first_bad then first_bad = i end
    if not eq and os.getenv("VERBOSE") then
      print(string.format("  line %d %q\n    workbench %s\n    llama.cpp %s", i, text,
        table.concat(ours, ","), table.concat(theirs, ",")))
    end
  end
  print(string.format("%-22s tokenize: %d/%d strings give identical ids%s", name, same, n,
    first_bad and (" (first difference: line " .. first_bad .. ")") or ""))
end

-- longer than the Phi-3 fixture's 48-token sliding window
local prompt = tok:encode("The little robot looked at the sky and said that the stars were "
  .. "bright tonight. Then it walked to the garden, counted seven flowers, and asked its friend "
  .. "why the moon looked so small when the lake was so")
local steps = 8
local ids = table.concat(prompt, ",")
local res = wb.json.decode(run(string.format("'%s' '%s' run %s %d", probe, gguf, ids, steps)))
-- the workbench at `weights`, and (for quantized runs) at the stored weights as the reference
local function follow(model)
  local s = model:session()
  local lg = s:prefill(prompt)
  local max_d, range, top1 = 0, 0, 0
  for k, step in ipairs(res.steps) do
    local theirs = step.logits
    local hi, lo = -math.huge, math.huge
    for id = 0, #lg - 1 do
      local d = math.abs(lg:get(id) - theirs[id + 1])
      if d > max_d then max_d = d end
      hi, lo = math.max(hi, theirs[id + 1]), math.min(lo, theirs[id + 1])
    end
    range = math.max(range, hi - lo)
    if lg:argmax() == step.next then top1 = top1 + 1 end
    if k <= steps then lg = s:decode(step.next) end
  end
  return max_d, range, top1
end
local max_d, range, top1 = follow(m)
print(string.format("%-22s logits over %d positions: max |diff| %.3g (logit range %.3g, %.2g of it); "
  .. "top-1 equal at %d/%d", name, #res.steps, max_d, range, max_d / range, top1, #res.steps))
if weights ~= "as_stored" then
  local ref_d = follow(wb.load(dir))
  print(string.format("%-22s   llama.cpp %s vs workbench unquantized: max |diff| %.3g", "", weights, ref_d))
end
