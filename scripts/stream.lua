-- stream.lua - streaming: time to first token, inter-token latency, and the stop-sequence leak.
--
--   workbench scripts/stream.lua [--threads N]
--
-- A stream hands over each piece of text as soon as it is decoded. That does not make the model
-- faster; it moves the moment the reader sees something from the end of the reply to the first
-- token (TTFT). Later pieces arrive one decode step apart (inter-token latency, ITL).
--
-- Part 1 streams a greedy reply and stamps every piece with the ms since the request started.
-- Part 2 asks it to stop at "\nCustomer" with hold-back off, the way a naive streaming loop
-- works: the loop notices the stop only after the text that completes it has gone out, and a
-- stream cannot take text back. With hold-back on (the default), text that could still turn into
-- the start of a stop string waits until the next token rules that out, so nothing of the stop
-- string is ever sent and the pieces add up to exactly the final text.
local wb = require("wb")
local stats = require("wb.stats")
local lesson = require("wb.lesson")

local threads = require("wb.cli").parse(arg, "scripts/stream.lua", {
  { "threads", "count", 1, "compute threads" },
}, { about = "streaming: time to first token, inter-token latency, and the stop-sequence leak" }).threads
wb.threads(threads)

local model = wb.load()
local PROMPT = "Customer (Ana): Hi, how do I export my board data?\nAgent (Lena):"
local STOP = "\nCustomer"

-- <|endoftext|> is an ordinary token here so the reply runs on into the next conversation, which
-- is what makes the stop string appear.
local function stream(holdback)
  local s = model:stream(PROMPT, { temperature = 0, max_tokens = 48, stop = STOP },
                         { holdback = holdback, ignore_eos = true })
  local events = {}
  for piece, ms in s do events[#events + 1] = { piece = piece, ms = ms } end
  return events, s:result()
end

model:generate(PROMPT, { temperature = 0, max_tokens = 4 }) -- warm-up
local noise = lesson.noise()

local function quote(s) return '"' .. s:gsub("\n", "\\n") .. '"' end
local function show(e) print(("%8.3f ms  %s"):format(e.ms, quote(e.piece))) end

print("Part 1: timestamps per piece (hold-back on)\n")
local events, result = stream(true)
for i = 1, math.min(6, #events) do show(events[i]) end
if #events > 9 then print("   ...") end
for i = math.max(7, #events - 2), #events do show(events[i]) end
local times = {}
for i, e in ipairs(events) do times[i] = e.ms end
local gaps = {}
for i = 2, #times do gaps[#gaps + 1] = times[i] - times[i - 1] end
print(("\n%d pieces from %d tokens; time to first piece %.3f ms; last piece at %.3f ms")
      :format(#events, #result.token_ids, times[1], times[#times]))
if #gaps > 0 then
  print(("gaps between pieces: median %.3f ms, p90 %.3f ms, max %.3f ms")
        :format(stats.median(gaps), stats.percentile(gaps, 90), stats.max(gaps)))
end
if #result.itl_ms > 0 then
  print(("per token (the generator's own clock): TTFT %.3f ms, ITL median %.3f ms, p90 %.3f ms, "
         .. "max %.3f ms"):format(result.ttft_ms, stats.median(result.itl_ms),
         stats.percentile(result.itl_ms, 90), stats.max(result.itl_ms)))
end
print(("without streaming the reader waits %.1f ms for anything; with it, %.1f ms")
      :format(result.e2e_ms, times[1]))

print(("\nPart 2: stop at %s, hold-back off then on (the last three pieces)\n"):format(quote(STOP)))
local leaked
for _, hb in ipairs({ false, true }) do
  local ev, r = stream(hb)
  local sent = {}
  for i, e in ipairs(ev) do sent[i] = e.piece end
  local streamed = table.concat(sent)
  print(("hold-back %-3s stop_reason %-6s"):format(hb and "on" or "off", r.stop_reason))
  for i = math.max(1, #ev - 2), #ev do show(ev[i]) end
  local leak = streamed:find(STOP, 1, true) ~= nil
  print(("  the reader saw the stop string: %s; streamed text == final text: %s\n")
        :format(tostring(leak), tostring(streamed == r.text)))
  if not hb then leaked = leak end
  if hb and leak then
    io.stderr:write("stream: hold-back on still leaked the stop string\n")
    os.exit(1)
  end
end
if leaked == false then
  print("(the stop string did not appear in this reply, so there was nothing to leak)")
end
local load = noise:finish(true)
lesson.print_load(load)
lesson.emit({ lesson = "stream", ttft_ms = result.ttft_ms, e2e_ms = result.e2e_ms,
              first_piece_ms = times[1], leaked_without_holdback = leaked, load = load })
