-- Issue 12 from Lua: atomic writes (a full disk keeps the old file and raises an error naming the
-- path), training logs that survive kill -9, stale temporary files, the train script's default
-- output directory, preset files bounded in time and memory, safetensors_write validation.
local T = dofile((arg[0]:match("^(.*)/") or ".") .. "/helpers.lua")
local wb = require("wb")

local build = os.getenv("WB_BUILD_DIR")
local exe = build and (build .. "/workbench") or arg[-1]
local function q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

-- Run a Lua snippet in a child workbench whose file size limit is 8 KB (ulimit -f counts
-- 1024-byte blocks in bash, 512 in dash: small either way). SIGXFSZ is ignored so the write fails
-- with EFBIG exactly as on a full disk. Returns ok, output.
local function run_with_small_fsize(code)
  local cmd = ("sh -c %s 2>&1"):format(q("trap '' XFSZ; ulimit -f 8; exec " .. q(exe) .. " -e " .. q(code)))
  local p = io.popen(cmd)
  local out = p:read("a")
  local ok = p:close()
  return ok, out
end

T.test("wb.write_file replaces a file and keeps it on a failed write", function()
  local dir = T.tmpdir()
  local path = dir .. "/f.txt"
  wb.write_file(path, "old\n")
  T.eq(T.read_file(path), "old\n")
  wb.write_file(path, "a\0b")
  T.eq(T.read_file(path), "a\0b")
  local ok, out = run_with_small_fsize(("wb.write_file(%q, string.rep('x', 100000))"):format(path))
  T.check(not ok, "the failed write must raise an error: " .. out)
  T.check(out:find(path, 1, true), "error names the path: " .. out)
  T.eq(T.read_file(path), "a\0b")
  T.checkerror("cannot create a temporary file", wb.write_file, dir .. "/no/such/dir/x", "y")
  T.checkerror("is a directory", wb.write_file, dir, "y")
  T.rmdir(dir)
end)

T.test("wb.trace.write keeps the good record when the disk is full", function()
  local dir = T.tmpdir()
  local path = dir .. "/trace.json"
  local trace = require("wb.trace")
  local good = { version = 1, runs = { { name = "a", samples = {} } } }
  trace.write(path, good)
  local before = T.read_file(path)
  local code = ([[
    local trace = require("wb.trace")
    local big = {}
    for i = 1, 20000 do big[i] = i end
    trace.write(%q, { version = 1, runs = { { name = "b", samples = big } } })
  ]]):format(path)
  local ok, out = run_with_small_fsize(code)
  T.check(not ok, "trace.write must fail loudly: " .. out)
  T.check(out:find(path, 1, true), "error names the path: " .. out)
  T.eq(T.read_file(path), before)
  T.eq(wb.json.decode(T.read_file(path)).runs[1].name, "a")
  T.rmdir(dir)
end)

T.test("the model card and plots are written through the atomic writer", function()
  local dir = T.tmpdir()
  os.execute("cp models/tinylm-base/summary.json models/tinylm-base/config.json " .. q(dir))
  require("wb.modelcard").write(dir)
  local before = T.read_file(dir .. "/README.md")
  local code = ([[
    local mc = require("wb.modelcard")
    local r = mc.render
    mc.render = function(...) return r(...) .. string.rep("padding ", 5000) end
    mc.write(%q)
  ]]):format(dir)
  local ok, out = run_with_small_fsize(code)
  T.check(not ok, "modelcard.write must fail loudly: " .. out)
  T.check(out:find(dir .. "/README.md", 1, true), out)
  T.eq(T.read_file(dir .. "/README.md"), before)
  local plot = require("wb.plot")
  plot.write(dir .. "/p.svg", "<svg/>")
  local ok2, out2 = run_with_small_fsize(("require('wb.plot').write(%q, string.rep('x', 100000))"):format(dir .. "/p.svg"))
  T.check(not ok2, out2)
  T.eq(T.read_file(dir .. "/p.svg"), "<svg/>")
  -- nothing left behind
  local p = io.popen("ls -a " .. q(dir))
  local names = p:read("a")
  p:close()
  T.check(not names:find("%.tmp"), "temporary files left: " .. names)
  T.rmdir(dir)
end)

T.test("safetensors_write rejects duplicate and NUL-containing names before touching the file", function()
  local dir = T.tmpdir()
  local path = dir .. "/w.safetensors"
  wb.safetensors_write(path, { { name = "a", shape = { 2 }, data = { 1, 2 } } })
  local before = T.read_file(path)
  T.checkerror("appears twice", wb.safetensors_write, path, {
    { name = "a", shape = { 2 }, data = { 1, 2 } }, { name = "a", shape = { 2 }, data = { 3, 4 } } })
  T.checkerror("NUL", wb.safetensors_write, path, {
    { name = "a\0b", shape = { 2 }, data = { 1, 2 } }, { name = "a\0c", shape = { 2 }, data = { 3, 4 } } })
  T.checkerror("NUL", wb.safetensors_write, path, { { name = "x\0", shape = { 1 }, data = { 1 } } })
  T.eq(T.read_file(path), before)
  T.check(wb.safetensors_read(path).a ~= nil, "the old file still reads")
  T.rmdir(dir)
end)

-- ---- training: kill -9, stale temporaries, default output ----------------------------------------

local function loss_rows(path)
  local rows = {}
  local f = io.open(path, "rb")
  if not f then return rows end
  f:read("l")
  for line in f:lines() do
    local s, tl = line:match("^(%d+),([^,]*),")
    if s then rows[#rows + 1] = { step = tonumber(s), train = tonumber(tl) } end
  end
  f:close()
  return rows
end

T.test("the loss log survives kill -9 and stale temporary files are removed on resume", function()
  local dir = T.tmpdir()
  local base = q(exe) .. " scripts/train_tinylm.lua --smoke --threads 1 --out " .. q(dir) ..
    " --checkpoint-every 3"
  -- Start, kill -9 at some point during training (checkpoints every 3 steps), resume; twice.
  os.execute(base .. " >/dev/null 2>&1 & pid=$!; sleep 0.6; kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null")
  T.write_file(dir .. "/checkpoint.safetensors.tmp.99999999", "left by a killed run")
  T.write_file(dir .. "/loss.csv.tmp.99999998", "left by a killed run")
  local have_ckpt = io.open(dir .. "/checkpoint.safetensors") ~= nil
  local resume = have_ckpt and " --resume" or ""
  os.execute(base .. resume .. " >/dev/null 2>&1 & pid=$!; sleep 0.6; kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null")
  have_ckpt = io.open(dir .. "/checkpoint.safetensors") ~= nil
  T.check(os.execute(base .. (have_ckpt and " --resume" or "") .. " >/dev/null 2>&1"), "the final run must finish")
  T.check(io.open(dir .. "/checkpoint.safetensors.tmp.99999999") == nil, "stale checkpoint temp removed")
  T.check(io.open(dir .. "/loss.csv.tmp.99999998") == nil, "stale loss.csv temp removed")
  local rows = loss_rows(dir .. "/loss.csv")
  T.eq(#rows, 60, "one row per step")
  for i, r in ipairs(rows) do
    T.eq(r.step, i, "rows are steps 1..60 in order")
  end
  T.rmdir(dir)
end)

T.test("train_tinylm without --out writes to $WB_OUT/tinylm, never over models/tinylm-base", function()
  local dir = T.tmpdir()
  local shipped = T.read_file("models/tinylm-base/model.safetensors")
  local ok = os.execute("WB_OUT=" .. q(dir) .. " " .. q(exe) ..
    " scripts/train_tinylm.lua --steps 1 --eval-every 1 --eval-batches 1 --threads 1 " ..
    "--conversations 40 --tickets 20 >/dev/null 2>&1")
  T.check(ok, "the run must succeed")
  T.check(io.open(dir .. "/tinylm/model.safetensors") ~= nil, "output in $WB_OUT/tinylm")
  T.check(T.read_file("models/tinylm-base/model.safetensors") == shipped, "shipped model untouched")
  T.rmdir(dir)
end)

-- ---- presets: bounded in instructions and memory ---------------------------------------------------

local presets = require("wb.presets")

local function preset_file(dir, name, body)
  local path = dir .. "/" .. name .. ".lua"
  T.write_file(path, body)
  return path
end

T.test("a preset that loops, or allocates gigabytes, is an error naming the file", function()
  local dir = T.tmpdir()
  local cases = {
    { "loop", "while true do end", "instructions" },
    { "rep", "return { system = ('x'):rep(2^30) }", "memory" },
    { "concat", "local s = 'x' for i = 1, 40 do s = s .. s end return { system = s }", "memory" },
    { "table", "local t = {} for i = 1, 1e9 do t[i] = i end return t", "" },
    { "gsub", "return { system = ('x'):rep(1000):gsub('x', ('y'):rep(100000)) }", "gsub" },
    { "find", "return { system = ('a'):rep(5e5):find('.-.-.-.-.-x') }", "find" },
    { "cycle", "local t = { why = {} } t.why.t = t.why return t", "appears twice" },
    { "func", "return { system = function() end }", "function" },
    { "deep", "local t = {} local c = t for i = 1, 100 do c.why = {} c = c.why end return t", "deeper" },
  }
  for _, c in ipairs(cases) do
    local path = preset_file(dir, c[1], c[2])
    local t0 = wb.clock_ms()
    local ok, err = pcall(presets.load, path)
    T.check(not ok, c[1] .. " must fail")
    T.check(tostring(err):find(path, 1, true), c[1] .. ": error names the file: " .. tostring(err))
    T.check(tostring(err):find(c[3], 1, true), c[1] .. ": " .. tostring(err))
    T.check(wb.clock_ms() - t0 >= 0)
  end
  -- shared subtables would multiply when copied: refused too
  local path = preset_file(dir, "dag", "local a = {'x'} return { stop = a, tinylm = { stop = a } }")
  T.checkerror("appears twice", presets.load, path)
  -- what a data file may still do
  path = preset_file(dir, "fine", "local n = 3 return { max_tokens = n * 10, system = ('%d'):format(n) .. ('-'):rep(3) }")
  local p = presets.load(path)
  T.eq(p.max_tokens, 30); T.eq(p.system, "3---")
  T.rmdir(dir)
end)

T.test("a FIFO named like a preset is an error, not a hang", function()
  local dir = T.tmpdir()
  os.execute("mkfifo " .. q(dir .. "/f.lua"))
  T.checkerror("FIFO", presets.load, dir .. "/f.lua")
  T.rmdir(dir)
end)

T.test("a preset with a 100k-character label loads, and its constraint is an error, not a crash", function()
  local dir = T.tmpdir()
  local label = string.rep("ab-", 34000)
  local path = preset_file(dir, "long", ("return { constraint = { kind = 'choice', labels = { %q, 'short' } } }"):format(label))
  local p = presets.load(path)
  T.eq(#p.constraint.labels[1], #label)
  local tok = wb.tokenizer_load("models/tinylm-base/tokenizer.json")
  local ok, err = pcall(presets.local_constraint, p, tok)
  T.check(not ok and tostring(err):find("states", 1, true), tostring(err))
  T.rmdir(dir)
end)

-- ---- analyze_trace: bad fields are named, never raw Lua errors --------------------------------------

T.test("analyze_trace names a bad field instead of failing inside Lua", function()
  local dir = T.tmpdir()
  local function record()
    return { model = { dir = "x" }, generation = {}, environment = {}, limits = "test",
      prefix_reuse = {}, batch_sweep = wb.json.array(),
      runs = { { name = "r", samples = { { prompt_tokens = 3, generated_token_ids = { 1, 2 },
        generated_tokens = 2, ttft_ms = 1, itl_ms = { 0.5 }, e2e_ms = 1.5 } } } } }
  end
  local cases = {
    { function(r) r.model = 5 end, "field 'model' must be an object" },
    { function(r) r.environment = "busy" end, "field 'environment' must be an object" },
    { function(r) r.batch_sweep = { { batch_size = 1, elapsed_ms = "slow", output_tokens_per_s = 3 } } end,
      "field 'batch_sweep[1].elapsed_ms' must be a finite number, got string" },
    { function(r) r.batch_sweep = { 7 } end, "field 'batch_sweep[1]' must be an object" },
    { function(r) r.batch_sweep = { { elapsed_ms = 1, output_tokens_per_s = 3, output_tokens_per_s_all = { 1, "x" } } } end,
      "output_tokens_per_s_all[2]" },
    { function(r) r.prefix_reuse = { cold_prefill_ms = 1, suffix_prefill_ms = 1, max_abs_last_logit_diff = 0,
      cached_prefix_tokens = 2.5, total_tokens = 4 } end, "field 'prefix_reuse.cached_prefix_tokens' must be an integer" },
    { function(r) r.conclusions = { "text" } end, "field 'conclusions[1].text' must be a string" },
    { function(r) r.runs[1].samples[1].itl_ms = { "fast" } end, "itl_ms[1]" },
    { function(r) r.runs[1].samples[1].generated_token_ids = 4 end, "generated_token_ids" },
  }
  local good = dir .. "/good.json"
  wb.write_file(good, wb.json.encode(record()))
  local p = io.popen(q(exe) .. " scripts/analyze_trace.lua " .. q(good) .. " 2>&1")
  local out = p:read("a")
  T.check(p:close(), "a good record is accepted: " .. out)
  for i, c in ipairs(cases) do
    local r = record()
    c[1](r)
    local path = ("%s/bad%d.json"):format(dir, i)
    wb.write_file(path, wb.json.encode(r))
    p = io.popen(q(exe) .. " scripts/analyze_trace.lua " .. q(path) .. " 2>&1")
    out = p:read("a")
    local ok = p:close()
    T.check(not ok, "case " .. i .. " must fail: " .. out)
    T.check(out:find(c[2], 1, true), ("case %d: want %q in: %s"):format(i, c[2], out))
    T.check(out:find(path, 1, true), "names the file: " .. out)
    T.check(not out:find("attempt to") and not out:find("bad argument") and not out:find("traceback"),
      "no internal Lua error: " .. out)
  end
  os.execute("mkfifo " .. q(dir .. "/fifo.json"))
  p = io.popen(q(exe) .. " scripts/analyze_trace.lua " .. q(dir .. "/fifo.json") .. " 2>&1")
  out = p:read("a")
  T.check(not p:close() and out:find("FIFO"), "a FIFO record is an error, not a hang: " .. out)
  T.rmdir(dir)
end)

T.done()
