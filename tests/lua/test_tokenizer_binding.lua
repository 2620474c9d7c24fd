-- wb.Tokenizer, wb.bpe_train and the detokenizer as seen from Lua.
local T = dofile((arg[0]:match("^(.*)/") or ".") .. "/helpers.lua")
local wb = require("wb")

local EOT = "<|endoftext|>"
local tok = wb.bpe_train(T.TEXT:rep(4), {vocab_size = 300, special_tokens = {EOT}})

T.test("bpe_train builds a tokenizer of the requested size with the special token", function()
  T.eq(tok.vocab_size, 300)
  T.eq(#tok, 300)
  T.eq(tok:str(tok.eos_id), EOT)
  T.eq(tok:id_of_str(EOT), tok.eos_id)
  T.check(tok:is_special(tok.eos_id))
  T.check(not tok:is_special(72))
  T.eq(tostring(tok), "Tokenizer (300 tokens)")
end)

T.test("bpe_train rejects unknown options and bad values", function()
  T.checkerror("unknown option 'vocab'", wb.bpe_train, "abc", {vocab = 300})
  T.checkerror("option 'vocab_size' must be an integer", wb.bpe_train, "abc", {vocab_size = "x"})
  T.checkerror("vocab_size must be in", wb.bpe_train, "abc", {vocab_size = 10})
  T.checkerror("special_tokens[1] must be a string", wb.bpe_train, "abc", {special_tokens = {1}})
  T.checkerror("min_pair_count must be at least 1", wb.bpe_train, "abc", {min_pair_count = 0})
end)

T.test("ids are 0-based tokenizer.json ids: byte tokens come first", function()
  -- the 256 byte symbols take ids 0..255 in GPT-2's byte-to-unicode order; "H" is byte 72
  T.eq(tok:token(tok:encode("H")[1]), "H")
  T.eq(math.type(tok:encode("H")[1]), "integer")
end)

T.test("encode then decode gives back the exact bytes of valid UTF-8", function()
  for _, s in ipairs({"Hello world! How are you?", "", " ", "héllo wörld ✓",
                      "a\0b", "x" .. EOT .. "y", "\n\n  \t"}) do
    T.eq(tok:decode(tok:encode(s)), s)
  end
end)

T.test("invalid UTF-8 is accepted by encode (the core reads it as U+FFFD)", function()
  local ids = tok:encode("\255 b")
  T.check(#ids >= 2)
  T.eq(tok:decode(ids), "\239\191\189 b")
end)

T.test("special tokens are matched as one id", function()
  local ids = tok:encode("hi" .. EOT)
  T.eq(ids[#ids], tok.eos_id)
end)

T.test("token, str and id map between ids and bytes", function()
  local id = tok:id(" How")
  T.check(id ~= nil, "' How' is a merged token of the training text")
  T.eq(tok:token(id), " How")
  T.eq(tok:str(id), "\196\160How") -- "ĠHow"
  T.eq(tok:id("no such token at all"), nil)
  T.eq(tok:id_of_str("nope nope"), nil)
end)

T.test("ids out of range are argument errors", function()
  T.checkerror("token id 300 out of range [0, 300)", function() return tok:token(300) end)
  T.checkerror("bad argument #1 to 'str'", function() return tok:str(-1) end)
  T.checkerror("token id 300 at index 2 out of range [0, 300)",
    function() return tok:decode({1, 300}) end)
  T.checkerror("not an integer", function() return tok:decode({1.5}) end)
  T.checkerror("bad argument #1 to 'encode' (string expected", function() return tok:encode({}) end)
  T.checkerror("Tokenizer expected", tok.encode, {}, "x")
end)

T.test("save and tokenizer_load round-trip the tokenizer", function()
  local dir = T.tmpdir()
  local path = dir .. "/tokenizer.json"
  T.eq(tok:save(path), tok)
  local t2 = wb.tokenizer_load(path)
  T.eq(t2.vocab_size, tok.vocab_size)
  T.eq(t2.eos_id, tok.eos_id)
  local s = "How is the weather? " .. EOT .. " fine"
  T.same_list(t2:encode(s), tok:encode(s))
  local j = wb.json.decode(T.read_file(path))
  T.eq(j.model.type, "BPE")
  T.rmdir(dir)
end)

T.test("loading a missing or malformed file raises the core's message naming the path", function()
  T.checkerror("/nonexistent/tokenizer.json", wb.tokenizer_load, "/nonexistent/tokenizer.json")
  local dir = T.tmpdir()
  T.write_file(dir .. "/bad.json", "{ not json")
  T.checkerror("bad.json", wb.tokenizer_load, dir .. "/bad.json")
  T.rmdir(dir)
end)

T.test("the detokenizer releases only complete UTF-8 characters", function()
  local d = tok:detokenizer()
  local text = "héllo wörld ✓ done"
  local pieces = {}
  for _, id in ipairs(tok:encode(text)) do
    local p = d:push(id)
    T.check(utf8.len(p) ~= nil, "piece is valid UTF-8")
    pieces[#pieces + 1] = p
  end
  pieces[#pieces + 1] = d:flush()
  T.eq(table.concat(pieces), text)
  -- reset forgets a held partial character
  d:push(tok:encode("é")[1])
  d:reset()
  T.eq(d:flush(), "")
  T.eq(d:push(tok:encode("A")[1]), "A")
end)

T.test("a flushed incomplete character becomes U+FFFD", function()
  local d = tok:detokenizer()
  local first = tok:id("\195") -- first byte of "é"
  T.eq(d:push(first), "")
  T.eq(d:flush(), "\239\191\189")
end)

T.test("closing a tokenizer makes it and its detokenizers unusable", function()
  local t = wb.bpe_train("abc abc abd", {vocab_size = 260})
  local d = t:detokenizer()
  t:close()
  t:close() -- idempotent
  T.checkerror("attempt to use a closed Tokenizer", function() return t:encode("a") end)
  T.checkerror("closed Tokenizer", function() return d:push(1) end)
  T.eq(tostring(t), "Tokenizer (closed)")
  do
    local t3 <close> = wb.bpe_train("abc", {vocab_size = 256})
    T.eq(#t3, 256)
  end
end)

T.test("a detokenizer keeps its tokenizer alive", function()
  local d = wb.bpe_train("xyz xyz", {vocab_size = 258}):detokenizer()
  collectgarbage(); collectgarbage()
  T.eq(d:push(120), "x")
end)

-- tokenizer.json's truncation and padding, against HF's ids and attention masks
-- (tests/vectors/tokenizer_post_vectors.json, made by gen_tokenizer_post_vectors.js)
local ROOT = os.getenv("WB_SOURCE_DIR") or "."
local function unhex(h) return (h:gsub("..", function(x) return string.char(tonumber(x, 16)) end)) end

T.test("tok:encode applies truncation and padding as Hugging Face does, and returns the mask when asked", function()
  local v = wb.json.decode(T.read_file(ROOT .. "/tests/vectors/tokenizer_post_vectors.json"))
  local dir = T.tmpdir()
  local bases, n_cases, n_refused = {}, 0, 0
  for k, set in ipairs(v.sets) do
    bases[set.base] = bases[set.base] or T.read_file(ROOT .. "/tests/vectors/" .. set.base)
    local json = bases[set.base]
    local function put(key, val)
      local pat = '"' .. key .. '": null'
      T.check(json:find(pat, 1, true), set.base .. " has " .. pat)
      local s = val == wb.json.null and "null" or wb.json.encode(val)
      json = json:gsub(pat, function() return '"' .. key .. '": ' .. s end, 1)
    end
    put("truncation", set.truncation)
    put("padding", set.padding)
    local path = ("%s/t%d.json"):format(dir, k)
    T.write_file(path, json)
    if set.load_error then
      n_refused = n_refused + 1
      local ok, err = pcall(wb.tokenizer_load, path)
      T.check(not ok and (err:find("truncation", 1, true) or err:find("padding", 1, true)),
              "refused like HF (" .. set.hf_error .. "): " .. tostring(err))
    else
      local tok = wb.tokenizer_load(path)
      for _, c in ipairs(set.cases) do
        n_cases = n_cases + 1
        local text = unhex(c.hex)
        if c.error then
          T.checkerror("truncation", function() return tok:encode(text) end)
        else
          local ids, mask = tok:encode(text, {attention_mask = true})
          T.same_list(ids, c.ids, "ids of " .. c.hex)
          T.same_list(mask, c.mask, "mask of " .. c.hex)
          T.same_list(tok:encode(text), c.ids, "ids without the mask")
          T.eq(select("#", tok:encode(text)), 1, "one result unless the mask is asked for")
        end
        -- both off: the ids of the text alone, all attended
        local raw, rmask = tok:encode(text, {truncation = false, padding = false, attention_mask = true})
        for i = 1, #rmask do T.eq(rmask[i], 1) end
        T.eq(#raw, #rmask)
      end
      tok:close()
    end
  end
  T.check(n_cases >= 1500 and n_refused >= 40, ("%d cases, %d refused"):format(n_cases, n_refused))
  T.rmdir(dir)
end)

T.test("tok:encode rejects unknown options and non-boolean switches", function()
  T.checkerror("unknown option 'truncate'", function() return tok:encode("a", {truncate = false}) end)
  T.checkerror("truncation", function() return tok:encode("a", {truncation = 1}) end)
end)

T.done()
