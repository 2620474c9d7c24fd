-- reasoning_cost.lua - cost and latency per reasoning effort level, for a triage call, a reply
-- draft and a hard escalation, per 1,000 tickets a day; where reasoning pays; a plot.
--
--   workbench scripts/reasoning_cost.lua
--   workbench scripts/reasoning_cost.lua --provider gemini --model gemini-2.5-flash --gain 0.08
--   workbench scripts/reasoning_cost.lua --tokenizer o200k/tokenizer.json --p90 --svg cost.svg
--
-- Prices: presets/pricing.lua. Effort levels, tasks and latency assumptions: presets/effort.lua.
-- Both are data files: edit and rerun. --gain is the accuracy the level adds over `none`
-- (0.05 = five points); the break-even is the value of one more correct answer at which the
-- extra spend is repaid.
local cost = require("wb.cost")
local presets = require("wb.presets")
local plot = require("wb.plot")
local util = require("wb.util")

local cli = require("wb.cli")
local o = cli.parse(arg, "scripts/reasoning_cost.lua", {
  { "provider", "string", "groq", "price and latency row (presets/pricing.lua)" },
  { "model", "string", nil, "model name in presets/pricing.lua (default: the provider's reasoning model)" },
  { "gain", "number", 0.05, "accuracy the level adds over `none` (0.05 = five points)" },
  { "tokenizer", "string", nil, "tokenizer.json to count tokens with (default: a labelled estimate)" },
  { "svg", "string", nil, "where the plot goes (default $WB_OUT/reasoning_cost.svg)" },
  { "tickets", "count", nil, "tickets a day" },
  { "p90", "flag", nil, "use the p90 token counts instead of the median" },
}, { about = "cost and latency per reasoning effort level; where reasoning pays; a plot" })
local opts = { provider = o.provider, model = o.model or "openai/gpt-oss-120b", model_set = o.model ~= nil,
  gain = o.gain, tokenizer = o.tokenizer, tickets = o.tickets, which = o.p90 and "p90" or "median",
  svg = cli.output_path(o.svg, "reasoning_cost.svg") }
if not opts.model_set then
  opts.model = ({ groq = "openai/gpt-oss-120b", gemini = "gemini-2.5-flash", ollama = "gpt-oss:20b" })[opts.provider]
    or opts.model
end

local pricing, pricing_path = cost.pricing()
local effort, effort_path = presets.data("effort")
local row = cost.price(pricing, opts.provider, opts.model)
local link = effort.latency[opts.provider] or error("no latency assumptions for " .. opts.provider .. " in " .. effort_path)
local counter = cost.counter(opts.tokenizer)
local per_day = opts.tickets or effort.tickets_per_day or 1000

print(("%s/%s: input %.3f, cached %s, output %.3f USD per million tokens (%s, %s)"):format(
  opts.provider, opts.model, row.input, row.cached and ("%.3f"):format(row.cached) or "n/a (billed as input)",
  row.output, row.source, row.as_of))
print("token counts: " .. counter.label)
print(("thinking tokens: %s per level from %s (assumptions: replace with harness measurements)"):format(
  opts.which, effort_path))
print(("latency model: network %g ms + prefill %g ms per 1k prompt tokens + ITL %g ms per token\n"):format(
  link.network_ms, link.prefill_ms_per_1k, link.itl_ms))

local rows, series, results = {}, {}, {}
for _, task in ipairs(effort.tasks) do
  local p = presets.load(task.preset)
  local prompt_tokens = counter.count((p.system or "") .. "\n" .. task.input)
  local cached = math.floor(prompt_tokens * (task.cached_fraction or 0))
  local s = { name = task.name, x = {}, y = {}, markers = true }
  series[#series + 1] = s
  results[task.name] = {}
  for _, level in ipairs(effort.order) do
    local thinking = cost.thinking_tokens(effort.levels, level, task.difficulty, opts.which)
    local tokens = { input = prompt_tokens - cached, cached = cached, thinking = thinking, output = task.output }
    local usd = cost.call_cost(row, tokens)
    local lat = cost.latency(link, tokens)
    results[task.name][level] = { usd = usd, lat = lat }
    rows[#rows + 1] = {
      task = task.name, level = level, prompt = prompt_tokens, cached = cached, thinking = thinking,
      output = task.output, usd_per_call = usd, usd_per_day = usd * per_day,
      ttft_s = lat.ttft / 1000, total_s = lat.total / 1000,
    }
    s.x[#s.x + 1] = lat.total / 1000
    s.y[#s.y + 1] = usd * per_day
  end
end

util.print_table(rows, { "task", "level", "prompt", "cached", "thinking", "output", "usd_per_call",
  "usd_per_day", "ttft_s", "total_s" }, { fmt = { usd_per_call = "%.6f", usd_per_day = "%.3f",
  ttft_s = "%.2f", total_s = "%.2f" } })
print(("(usd_per_day: %d tickets a day; prompt tokens: %s)"):format(per_day,
  counter.estimated and "ESTIMATE" or "counted"))

print(("\nbreak-even: with %.1f accuracy points gained over 'none', a level pays when one more "
  .. "correct answer is worth more than:"):format(opts.gain * 100))
local be_rows = {}
for _, task in ipairs(effort.tasks) do
  local base = results[task.name].none
  for _, level in ipairs(effort.order) do
    if level ~= "none" then
      local r = results[task.name][level]
      be_rows[#be_rows + 1] = { task = task.name, level = level,
        extra_usd_per_day = (r.usd - base.usd) * per_day,
        extra_ttft_s = (r.lat.ttft - base.lat.ttft) / 1000,
        break_even_usd = cost.break_even(base.usd, r.usd, opts.gain) }
    end
  end
end
util.print_table(be_rows, { "task", "level", "extra_usd_per_day", "extra_ttft_s", "break_even_usd" },
  { fmt = { extra_usd_per_day = "%.3f", extra_ttft_s = "%.2f", break_even_usd = "%.5f" } })
print("A triage label that is wrong costs a misrouted ticket; compare the break-even with that, "
  .. "and the extra TTFT with what the agent UI can absorb.")

local svg = plot.lines{
  title = ("%s/%s: cost vs latency per effort level (none, low, medium, high)"):format(opts.provider, opts.model),
  xlabel = "total latency per call (s)", ylabel = ("USD per day at %d calls"):format(per_day),
  series = series,
}
plot.write(opts.svg, svg)
print("\nplot: " .. opts.svg .. (counter.estimated and " (token counts estimated)" or ""))
