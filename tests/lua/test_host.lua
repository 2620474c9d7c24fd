-- The `workbench` executable: options, script arguments, the REPL on piped input, wb.so.
local T = dofile((arg[0]:match("^(.*)/") or ".") .. "/helpers.lua")
local wb = require("wb")

local build = os.getenv("WB_BUILD_DIR")
local exe = build and (build .. "/workbench") or arg[-1]
local tmp = T.tmpdir()

local function q(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

-- Run the host with arguments (already quoted) and optional stdin text; returns stdout, stderr
-- and the exit code.
local function run(args, input, env)
  local inpath, errpath = tmp .. "/in", tmp .. "/err"
  T.write_file(inpath, input or "")
  local cmd = ("%s %s %s < %s 2> %s"):format(env or "", q(exe), args, q(inpath), q(errpath))
  local p = assert(io.popen(cmd, "r"))
  local out = p:read("a")
  local _, how, code = p:close()
  if how == "signal" then code = 128 + code end -- the shell exec'd the host, which died of it
  return out, T.read_file(errpath), code
end

T.test("the test runs inside workbench: wb is a global and preloaded", function()
  T.eq(wb, _G.wb)
  T.eq(package.loaded.wb, wb)
  T.eq(type(wb.version), "string")
end)

T.test("--version and -v print the version; --help prints usage", function()
  local out, _, code = run("--version")
  T.eq(code, 0)
  T.check(out:find("^workbench " .. wb.version:gsub("%.", "%%.") .. " %(Lua 5%.4") ~= nil, out)
  T.eq(run("-v"), out)
  local help, _, hcode = run("--help")
  T.eq(hcode, 0)
  T.check(help:find("usage:", 1, true) and help:find("-m dir", 1, true), help)
end)

T.test("-e runs chunks in order and does not start the REPL", function()
  local out, err, code = run("-e 'x = 20' -e 'print(x + 22)'")
  T.eq(out, "42\n")
  T.eq(err, "")
  T.eq(code, 0)
end)

T.test("an error in -e is reported with a traceback and exit status 1", function()
  local out, err, code = run("-e 'error(\"boom\")'")
  T.eq(out, "")
  T.check(err:find("boom", 1, true) and err:find("stack traceback", 1, true), err)
  T.eq(code, 1)
end)

T.test("bad options are reported with the usage and exit status 1", function()
  local _, err, code = run("-x")
  T.eq(code, 1)
  T.check(err:find("unrecognized option '-x'", 1, true) and err:find("usage:", 1, true), err)
  local _, err2, code2 = run("-e")
  T.eq(code2, 1)
  T.check(err2:find("'-e' needs argument", 1, true), err2)
  local _, err3, code3 = run("--bogus")
  T.eq(code3, 1)
  T.check(err3:find("unrecognized option '--bogus'", 1, true), err3)
end)

T.test("a script gets its arguments in arg, with arg[0] the script", function()
  local script = tmp .. "/args.lua"
  T.write_file(script, "print(arg[0], #arg, arg[1], arg[2], ...)\nprint(arg[-1] ~= nil)\n")
  local out, err, code = run(q(script) .. " a 'b c'")
  T.eq(err, "")
  T.eq(code, 0)
  T.eq(out, script .. "\t2\ta\tb c\ta\tb c\ntrue\n")
end)

T.test("a script's error exits with status 1; os.exit codes pass through", function()
  local script = tmp .. "/fail.lua"
  T.write_file(script, "local x = nil\nreturn x.y\n")
  local _, err, code = run(q(script))
  T.eq(code, 1)
  T.check(err:find("fail.lua:2", 1, true), err)
  local _, _, code2 = run("-e 'os.exit(3)'")
  T.eq(code2, 3)
  local _, err3, code3 = run(q(tmp .. "/missing.lua"))
  T.eq(code3, 1)
  T.check(err3:find("cannot open", 1, true), err3)
end)

T.test("'-' runs stdin as a script", function()
  local out, _, code = run("- x y", "print(#arg, arg[1], ...)\n")
  T.eq(code, 0)
  T.eq(out, "2\tx\tx\ty\n")
end)

T.test("-m and WB_MODEL choose the default model directory", function()
  T.eq(run("-m /some/dir -e 'print(wb.default_model_dir())'"), "/some/dir\n")
  T.eq(run("-m/other -e 'print(wb.default_model_dir())'"), "/other\n")
  T.eq(run("-e 'print(wb.default_model_dir())'", nil, "WB_MODEL=/env/dir"), "/env/dir\n")
  local out = run("-e 'print(wb.default_model_dir())'", nil, "WB_MODEL=")
  T.check(out:find("models/tinylm%-base\n$") ~= nil, out)
end)

T.test("require finds the pure-Lua library without any path setup", function()
  local out, err = run("-e 'print(require(\"wb.stats\").median({3, 1, 2}))'")
  T.eq(err, "")
  T.eq(out, "2\n")
end)

T.test("the REPL on piped input prints expressions and =expr, without prompts", function()
  local out, err, code = run("", "1+1\n=2*3\nx = 5\nx\n'str'\n")
  T.eq(out, "2\n6\n5\nstr\n")
  T.eq(err, "")
  T.eq(code, 0)
end)

T.test("the REPL joins multi-line chunks until they are complete", function()
  local out = run("", "for i = 1, 3 do\n  io.write(i, ' ')\nend\nprint()\nfunction f(a,\nb)\nreturn a + b end\nf(1, 2)\n")
  T.eq(out, "1 2 3 \n3\n")
end)

T.test("an error in the REPL shows a traceback and the REPL goes on; piped, the run exits 1", function()
  local out, err, code = run("", "error('first')\nprint('after')\nlocal t = nil; t.x = 1\n=1\n")
  T.eq(out, "after\n1\n")
  T.check(err:find("first", 1, true) and err:find("stack traceback", 1, true), err)
  T.check(err:find("attempt to index a nil value", 1, true), err)
  T.eq(code, 1)
  local _, err2, code2 = run("", 'error("x")\n')
  T.eq(code2, 1)
  T.check(err2:find("stdin:1: x", 1, true), err2)
  local _, _, code3 = run("", "x = 1\n")
  T.eq(code3, 0)
end)

T.test("a top-level local at the prompt is a REPL variable; locals in blocks stay local", function()
  local out, err, code = run("", table.concat({
    "local a, b <const> = 20, 22", "print(a + b)", "local function f(x) local y = x return y * 2 end",
    "print(f(a))", "do local hidden = 1 end", "print(hidden)", "local n", "print(n)",
    "local s = 'local z = 1' -- local w", "print(s, z, w)", "local v =", "  7", "print(v)",
  }, "\n") .. "\n")
  T.eq(err, "")
  T.eq(code, 0)
  T.eq(out, "42\n40\nnil\nnil\nlocal z = 1\tnil\tnil\n7\n")
  T.eq(require("wb.repl").rewrite("local x <close> = f()"), "x = f()")
end)

T.test("exit, quit and :q leave the REPL; a variable named exit is still a variable", function()
  for _, w in ipairs({ "exit", "quit", ":q", "exit()", "  quit  " }) do
    local out, _, code = run("", "print(1)\n" .. w .. "\nprint(2)\n")
    T.eq(out, "1\n", w)
    T.eq(code, 0)
  end
  T.eq(run("", "exit = 5\nexit\nprint(2)\n"), "5\n2\n")
end)

T.test("a syntax error in the REPL is reported and an unfinished chunk at EOF too", function()
  local out, err = run("", "x = = 1\nprint('ok')\nfor i = 1, 2 do\n")
  T.eq(out, "ok\n")
  T.check(err:find("unexpected symbol", 1, true), err)
  T.check(err:find("<eof>", 1, true), err)
end)

T.test("the REPL prints tables with wb.util.repr", function()
  T.eq(run("", "{1, 2, x = 'y'}\n"), '{1, 2, x = "y"}\n')
end)

T.test("the REPL loads `model` and `tok` on first use only", function()
  local d = T.tmpdir()
  local config = T.make_tiny_model(d)
  local out, err = run("-m " .. q(d), "rawget(_G, 'model') == nil\nmodel:num_parameters()\n#tok\nrawget(_G, 'tok') == tok\nundefined_global\n")
  T.eq(err, "")
  T.eq(out, "true\n11904\n" .. config.vocab_size .. "\ntrue\nnil\n")
  T.rmdir(d)
end)

-- The chunk sends SIGINT to its own process (popen: system() would ignore it) and then spins.
local SELF_INTERRUPT = "local pid = io.open('/proc/self/stat'):read('n'); " ..
  "io.popen('kill -INT ' .. pid):close(); while true do end"

T.test("SIGINT interrupts a running script with an error and status 130", function()
  local script = tmp .. "/spin.lua"
  T.write_file(script, SELF_INTERRUPT .. "\n")
  local _, err, code = run(q(script))
  T.eq(code, 130)
  T.check(err:find("interrupted!", 1, true), err)
end)

T.test("SIGINT interrupts a REPL chunk and the REPL goes on, any number of times", function()
  local out, err = run("", (SELF_INTERRUPT .. "\n"):rep(4) .. "print('after')\n")
  T.eq(out, "after\n")
  local _, count = err:gsub("interrupted!", "")
  T.eq(count, 4)
end)

-- A killer in the background sends one SIGINT while a loop of generations runs: the whole loop
-- stops (not just the generation it was in), long before its 20 s are up.
local GEN_LOOP = "local pid = io.open('/proc/self/stat'):read('n'); " ..
  "io.popen('(sleep 0.3; kill -INT ' .. pid .. ') &'):close(); n = 0; " ..
  "local t0 = wb.clock_ms(); while wb.clock_ms() - t0 < 20000 do " ..
  "model:generate('Customer (Ana): Hi', {max_tokens = 48, temperature = 0}, {ignore_eos = true}); " ..
  "n = n + 1 end; print('loop finished')"

T.test("one Ctrl-C stops a whole loop of model:generate calls; the REPL keeps its globals", function()
  local d = T.tmpdir()
  T.make_tiny_model(d)
  local out, err, code = run("-m " .. q(d), "kept = 41\n" .. GEN_LOOP .. "\nprint(kept + 1, n > 0)\n" ..
    GEN_LOOP .. "\nprint('twice', n > 0)\n")
  T.eq(out, "42\ttrue\ntwice\ttrue\n")
  local _, count = err:gsub("interrupted!", "")
  T.eq(count, 2)
  T.eq(code, 1) -- piped: the interrupted chunks failed
  local script = tmp .. "/genloop.lua"
  T.write_file(script, "model = wb.load()\n" .. GEN_LOOP .. "\n")
  local out2, err2, code2 = run("-m " .. q(d) .. " " .. q(script))
  T.eq(out2, "")
  T.eq(code2, 130)
  T.check(err2:find("interrupted!", 1, true), err2)
  T.rmdir(d)
end)

T.test("helper processes of a script end when it is interrupted (threads.lua's busy loops)", function()
  -- The busy loops watch the script's pid; after the interrupted run none is left.
  local d = T.tmpdir()
  T.make_tiny_model(d)
  local script = tmp .. "/busy.lua"
  local src = T.read_file("scripts/threads.lua")
  T.check(src:find("while kill -0 %d", 1, true), "threads.lua's busy loops watch the parent")
  T.write_file(script, "local pid = io.open('/proc/self/stat'):read('n')\n" ..
    "io.popen(('sh -c \"exec sh -c \\\\\"while kill -0 %d 2>/dev/null; do :; done\\\\\"\" >/dev/null 2>&1 &'):format(pid)):close()\n" ..
    "print(pid)\n" .. SELF_INTERRUPT .. "\n")
  local out, _, code = run(q(script))
  T.eq(code, 130)
  local pid = tonumber(out:match("%d+"))
  local left
  for _ = 1, 50 do
    local p = io.popen(("pgrep -f '[w]hile kill -0 %d ' | wc -l"):format(pid))
    left = tonumber(p:read("a"))
    p:close()
    if left == 0 then break end
    os.execute("sleep 0.1")
  end
  T.eq(left, 0)
  T.rmdir(d)
end)

T.test("-i enters the REPL after a script", function()
  local script = tmp .. "/pre.lua"
  T.write_file(script, "answer = 41\n")
  T.eq(run("-i " .. q(script), "answer + 1\n"), "42\n")
end)

T.test("wb.so loads in a plain lua5.4 without the host", function()
  if not build then return end -- needs to know where wb.so is
  -- A sanitizer build's wb.so cannot load into an uninstrumented lua5.4 (ASan must come first).
  if os.getenv("ASAN_OPTIONS") then return end
  local script = tmp .. "/plain.lua"
  T.write_file(script, ("package.cpath = %q .. '/?.so;' .. package.cpath\n"):format(build) ..
    "local wb = require 'wb'\nprint(wb.version, #wb.vec(3), wb.json.encode({1}), _G.wb)\n")
  local p = io.popen(("lua5.4 %s 2>&1"):format(q(script)))
  local out = p:read("a")
  p:close()
  T.eq(out, wb.version .. "\t3\t[1]\tnil\n")
end)

T.test("--repl runs a script and keeps its globals, even after the script fails", function()
  local script = tmp .. "/repl.lua"
  T.write_file(script, "answer = 41\n")
  local out, err, code = run("--repl " .. q(script), "answer + 1\n")
  T.eq(out, "42\n")
  T.eq(err, "")
  T.eq(code, 0)
  T.write_file(script, "partial = 7\nerror('half way')\n")
  local out2, err2, code2 = run("--repl " .. q(script), "partial * 6\n")
  T.eq(out2, "42\n")
  T.check(err2:find("half way", 1, true), err2)
  T.eq(code2, 1) -- the script's failure is still the exit status
  local help = run("--help")
  T.check(help:find("--repl", 1, true), help)
end)

T.test(":help in the REPL prints help for wb functions, methods and presets", function()
  local out, err, code = run("", ":help wb.load\n:help Vec:topk\n:help presets\n:nope\n1+1\n")
  T.eq(code, 0)
  T.eq(err, "")
  T.check(out:find("wb.load([dir [, opts]]) -> Model", 1, true), out)
  T.check(out:find("v:topk([k=10])", 1, true), out)
  T.check(out:find("triage", 1, true), out)
  T.check(out:find("unknown command ':nope'", 1, true), out)
  T.check(out:find("\n2\n$"), out)
  T.eq(run("", "help('wb.json.decode')\n"):match("^wb%.json%.decode%(s%)") ~= nil, true)
end)

T.test("every wb function and method has help text", function()
  local help = require("wb.help")
  local missing = {}
  local function check(name)
    if not help.TEXT[name] then missing[#missing + 1] = name end
  end
  for k, v in pairs(wb) do if type(v) == "function" then check("wb." .. k) end end
  for _, lib in ipairs({ "json", "sampling", "http", "httpd" }) do
    for k, v in pairs(wb[lib] or {}) do if type(v) == "function" then check("wb." .. lib .. "." .. k) end end
  end
  for _, cls in ipairs({ "Vec", "Tokenizer", "Model", "Session", "Trainer", "Tensor" }) do
    for k, v in pairs(wb[cls]) do
      if type(v) == "function" and not k:match("^__") then check(cls .. ":" .. k) end
    end
  end
  table.sort(missing)
  T.eq(table.concat(missing, ", "), "")
  -- Anything else still answers, pointing at the docs.
  T.check(help.text("wb.clock_ms"):find("monotonic", 1, true))
  T.check(help.text("no.such.thing"):find("no help", 1, true))
end)

T.test("help, help(value), help 'name' and :help print signature, options and an example", function()
  local out, err, code = run("", "help\nhelp(wb.load)\nhelp(model)\nhelp 'Model:generate'\n:help tok:encode\n" ..
    "help(wb.json.encode)\nhelp(print)\nhelp(42)\n")
  T.eq(err, "")
  T.eq(code, 0)
  T.check(out:find("^help topics"), out)
  T.check(out:find("wb.load([dir [, opts]]) -> Model\n", 1, true), out)
  T.check(out:find("opts: compute_f32", 1, true) and out:find("example: local m = wb.load(", 1, true), out)
  T.check(out:find("Model methods", 1, true) and out:find("model:generate(prompt, params [, opts])", 1, true), out)
  T.check(out:find("params: temperature", 1, true) and out:find("opts: cache, holdback", 1, true), out)
  T.check(out:find("tok:encode(text [, opts]) -> {ids} [, mask]", 1, true), out)
  T.check(out:find("opts: indent = true", 1, true), out)
  T.check(out:find("no help for this function (not part of wb)", 1, true), out)
  T.check(out:find("help(x) takes a name or a wb value, got a number", 1, true), out)
end)

T.test("every help entry has an example, and every example runs on TinyLM", function()
  local help = require("wb.help")
  local saved = { model = rawget(_G, "model"), tok = rawget(_G, "tok") }
  _G.model = wb.load()
  _G.tok = _G.model.tokenizer
  local names = {}
  for k in pairs(help.TEXT) do names[#names + 1] = k end
  table.sort(names)
  local bad = {}
  local print0, write0 = print, io.write
  for _, k in ipairs(names) do
    local ex = help.TEXT[k].ex
    if not ex then
      bad[#bad + 1] = k .. " (no example)"
    elseif not ex:find("/path/to", 1, true) and not ex:match("^%-%-") then -- needs another model
      local fn, lerr = load(ex, "=" .. k)
      print, io.write = function() end, function() end
      local ok, msg = pcall(fn or error, lerr)
      print, io.write = print0, write0
      if not ok then bad[#bad + 1] = k .. ": " .. tostring(msg) end
    end
  end
  _G.model, _G.tok = saved.model, saved.tok
  T.eq(table.concat(bad, "\n"), "")
end)

T.test("Tab completion offers wb names, library modules, methods and preset names", function()
  local help = require("wb.help")
  local function has(list, x)
    for _, v in ipairs(list) do if v == x then return true end end
    return false
  end
  T.check(has(help.complete("wb.sampling.ap"), "wb.sampling.apply"))
  T.check(has(help.complete("wb.pre"), "wb.presets"))     -- before wb.presets was ever used
  T.check(has(help.complete("wb.Vec:to"), "wb.Vec:topk"))
  local v = wb.vec(3)
  _G.__v_for_test = v
  T.check(has(help.complete("__v_for_test:arg"), "__v_for_test:argmax"))
  _G.__v_for_test = nil
  T.same_list(help.complete("tri", 'wb.presets.load("tri'), { "triage" })
  T.same_list(help.complete("dr", "wb.providers.request('groq', 'dr"), { "drafts" })
  T.check(has(help.complete("mo"), "model"))              -- the lazy global, not loaded by Tab
  T.eq(rawget(_G, "model"), nil)
  T.check(has(help.complete(":he", ":he"), ":help"))
  -- Userdata with a function __index: methods after ':', fields after '.', before and after load.
  T.check(has(help.complete("model:ge"), "model:generate"))
  T.check(has(help.complete("tok:enc"), "tok:encode"))
  T.check(has(help.complete("model.tok"), "model.tokenizer"))
  T.check(has(help.complete("model.tokenizer:de"), "model.tokenizer:decode"))
  T.eq(rawget(_G, "model"), nil)
  local d = T.tmpdir()
  T.make_tiny_model(d)
  _G.__m_for_test = wb.load(d)
  T.check(has(help.complete("__m_for_test:stre"), "__m_for_test:stream"))
  T.check(has(help.complete("__m_for_test.di"), "__m_for_test.dir"))
  T.check(has(help.complete("__m_for_test.tokenizer:is"), "__m_for_test.tokenizer:is_special"))
  _G.__m_for_test = nil
  T.rmdir(d)
end)

T.test("library modules under lua/wb appear as fields of wb on first use", function()
  T.eq(wb.presets, require("wb.presets"))
  T.eq(wb.providers, require("wb.providers"))
  T.eq(wb.cost, require("wb.cost"))
  T.eq(wb.no_such_module, nil)
end)

T.test("model:chat on a model without a chat template says so in one line", function()
  local d = T.tmpdir()
  T.make_tiny_model(d)
  local m = wb.load(d)
  local ok, err = pcall(m.chat, m, { { role = "user", content = "Hi" } }, { max_tokens = 2 })
  T.eq(ok, false)
  T.check(tostring(err):find("has no chat template (a base model): use model:generate", 1, true), err)
  T.check(not tostring(err):find("\n", 1, true), err)
  m:close()
  T.rmdir(d)
end)

T.test("a bare word names a shipped script: workbench generate, workbench serve", function()
  local out, err, code = run("generate -p 'Hi, my' -n 3 --seed 1 --temperature 0")
  T.eq(code, 0, err)
  local want = wb.load():generate("Hi, my", {max_tokens = 3, temperature = 0}).text
  T.check(out:find(want, 1, true), "generate printed the greedy text: " .. out)
  local _, _, c2 = run("serve --help")
  T.eq(c2, 0, "serve --help")
  local _, err3, c3 = run("no_such_script")
  T.eq(c3, 1)
  T.check(err3:find("cannot open no_such_script", 1, true), err3)
end)

-- A Ctrl-C whose interruption error is caught on the way (here by the server's pcall around a
-- request handler, as when it lands while a handler runs) must still end `serve`'s loop, and
-- the server exits normally. The background client is bash's /dev/tcp (no HTTP tool needed).
local SERVE_INT = [==[
local serve = require("wb.serve")
local srv <close> = serve.new{model = wb.load(), port = 0}
local handled = 0
srv:route("GET", "/int", function(_, req)
  handled = handled + 1
  req:respond(200, {["Content-Type"] = "text/plain"}, "ok\n")
  local pid = io.open('/proc/self/stat'):read('n')
  io.popen('kill -INT ' .. pid):close()
  local t0 = wb.clock_ms()
  while wb.clock_ms() - t0 < 200 do end -- the hook raises in here, inside the server's pcall
end)
io.popen(("bash -c 'sleep 0.3; exec 3<>/dev/tcp/127.0.0.1/%d; " ..
  "printf \"GET /int HTTP/1.0\\r\\n\\r\\n\" >&3; cat <&3 >/dev/null' &"):format(srv.port)):close()
local t0 = wb.clock_ms()
local ok, err = pcall(srv.run, srv, {duration_s = 8})
print(handled, ok or tostring(err):find("interrupted") ~= nil, wb.interrupts(), wb.clock_ms() - t0 < 5000)
]==]

T.test("Ctrl-C caught by a pcall inside `serve`'s loop still ends the loop, long before its duration", function()
  local d = T.tmpdir()
  T.make_tiny_model(d)
  local script = tmp .. "/serve_int.lua"
  T.write_file(script, SERVE_INT)
  local out, err, code = run("-m " .. q(d) .. " " .. q(script))
  T.eq(out, "1\ttrue\t1\ttrue\n", err)
  T.eq(code, 0, err)
  T.rmdir(d)
end)

T.rmdir(tmp)
T.done()
