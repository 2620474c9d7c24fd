-- model:save_gguf(path, {type=, name=, chat_template=}): the binding's options and errors, and
-- the file's header (the contents are checked in tests/c/test_gguf_save.c; that llama.cpp loads
-- them in bench/peer/check.sh).
local T = dofile((arg[0]:match("^(.*)/") or ".") .. "/helpers.lua")
local wb = require("wb")
local m = wb.load()
local dir = T.tmpdir()

T.test("every type writes a GGUF file, quantized ones smaller", function()
  local sizes = {}
  for _, t in ipairs({ "f32", "f16", "bf16", "q8_0", "q4_0" }) do
    local p = dir .. "/m-" .. t .. ".gguf"
    T.eq(m:save_gguf(p, { type = t }), p)
    local s = T.read_file(p)
    T.eq(s:sub(1, 4), "GGUF")
    T.eq(string.unpack("<I4", s, 5), 3, "version")
    sizes[t] = #s
  end
  T.check(sizes.f16 < sizes.f32 * 0.55 and sizes.q8_0 < sizes.f16 * 0.6 and sizes.q4_0 < sizes.q8_0,
    "sizes follow the types")
  T.eq(m:save_gguf(dir .. "/d.gguf"), dir .. "/d.gguf", "F32 by default")
end)

T.test("the chat template is written unless false, or replaced by a string", function()
  local p = dir .. "/tpl.gguf"
  m:save_gguf(p, { chat_template = "{{ MARKER_TEMPLATE }}", name = "NAME_MARKER" })
  local s = T.read_file(p)
  T.check(s:find("MARKER_TEMPLATE", 1, true) and s:find("NAME_MARKER", 1, true))
  m:save_gguf(p, { chat_template = false })
  T.check(not T.read_file(p):find("tokenizer.chat_template", 1, true))
end)

T.test("a model loaded from a GGUF saves again, with the file's own chat template", function()
  local a, b, c = dir .. "/g1.gguf", dir .. "/g2.gguf", dir .. "/g3.gguf"
  m:save_gguf(a, { chat_template = "{{ FILE_TEMPLATE_MARKER }}" })
  local g = wb.load(a)
  T.eq(g:save_gguf(b), b) -- the template comes from g's metadata, not from a directory
  T.check(T.read_file(b):find("FILE_TEMPLATE_MARKER", 1, true), "template kept")
  local ids = m.tokenizer:encode("Customer (Ana): Hi, my")
  local x, y = g:logits(ids), wb.load(b):logits(ids)
  for i = 0, #x - 1, 97 do T.eq(y:get(i), x:get(i)) end
  m:save_gguf(a, { chat_template = false })
  wb.load(a):save_gguf(c) -- no template in the file: none written, no error
  T.check(not T.read_file(c):find("tokenizer.chat_template", 1, true))
  wb.load(a, { weights = "q8_0" }):save_gguf(c, { type = "q8_0" })
end)

T.test("options and paths are checked", function()
  T.checkerror("unknown option 'typ'", m.save_gguf, m, dir .. "/x.gguf", { typ = "f16" })
  T.checkerror("q4_k", m.save_gguf, m, dir .. "/x.gguf", { type = "q4_k" })
  T.checkerror("'type' must be a string", m.save_gguf, m, dir .. "/x.gguf", { type = 8 })
  T.checkerror("chat_template", m.save_gguf, m, dir .. "/x.gguf", { chat_template = true })
  T.checkerror("/nonexistent-dir/x.gguf", m.save_gguf, m, "/nonexistent-dir/x.gguf")
  T.checkerror("string expected", m.save_gguf, m)
  local closed = wb.load()
  closed:close()
  T.checkerror("closed", closed.save_gguf, closed, dir .. "/x.gguf")
end)

T.rmdir(dir)
T.done()
