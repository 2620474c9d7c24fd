-- wb.plot: line plots and heatmaps (plot.heatmap) as standalone SVG, in pure Lua (no wb module
-- needed).
--
--   local plot = require("wb.plot")
--   local svg = plot.lines{
--     title = "TinyLM training", xlabel = "step", ylabel = "loss",
--     series = {
--       { name = "train", x = steps, y = train_losses },
--       { name = "validation", x = eval_steps, y = val_losses, markers = true },
--     },
--   }
--   plot.write("loss.svg", svg)
--
-- Axes get "nice" ticks (1, 2 or 5 times a power of ten) that cover the data, a light grid, tick
-- labels, axis labels and a legend. Non-finite points are skipped, so a series may have holes.

local M = {}

M.COLORS = { "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf" }

local function finite(v) return type(v) == "number" and v == v and v ~= math.huge and v ~= -math.huge end

local function escape(s)
  return (tostring(s):gsub("[&<>\"]", { ["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;", ['"'] = "&quot;" }))
end

-- A step of 1, 2 or 5 x 10^k that splits span into about n intervals.
local function nice_step(span, n)
  if span <= 0 then return 1 end
  local raw = span / n
  local mag = 10 ^ math.floor(math.log(raw, 10))
  local r = raw / mag
  local f = r < 1.5 and 1 or r < 3 and 2 or r < 7 and 5 or 10
  return f * mag
end

--- Ticks covering [lo, hi]: returns lo', hi' (widened to whole steps), the step and the list.
function M.ticks(lo, hi, n)
  n = n or 6
  if hi < lo then lo, hi = hi, lo end
  if hi == lo then
    local pad = lo == 0 and 1 or math.abs(lo) * 0.1
    lo, hi = lo - pad, hi + pad
  end
  local step = nice_step(hi - lo, n)
  local a, b = math.floor(lo / step + 1e-9) * step, math.ceil(hi / step - 1e-9) * step
  local list = {}
  for i = 0, math.floor((b - a) / step + 0.5) do list[#list + 1] = a + i * step end
  return a, b, step, list
end

-- A tick label with just the decimals the step needs.
local function fmt_tick(v, step)
  if step >= 1 and math.abs(v) < 1e15 then return string.format("%d", math.floor(v + 0.5)) end
  local decimals = math.max(0, math.ceil(-math.log(step, 10) - 1e-9))
  return string.format("%." .. decimals .. "f", v)
end

--- Render series as an SVG document (a string). opts: series (required: {name, x, y, color?,
--- markers?, dash?}), title, xlabel, ylabel, width (800), height (480), xmin/xmax/ymin/ymax
--- (override the data range).
function M.lines(opts)
  assert(type(opts) == "table" and type(opts.series) == "table", "plot.lines: opts.series required")
  local W, H = opts.width or 800, opts.height or 480
  local ml, mr, mt, mb = 70, 20, opts.title and 40 or 20, 55
  local pw, ph = W - ml - mr, H - mt - mb

  local xlo, xhi, ylo, yhi = math.huge, -math.huge, math.huge, -math.huge
  for _, s in ipairs(opts.series) do
    assert(#s.x == #s.y, "plot.lines: series '" .. tostring(s.name) .. "' has #x ~= #y")
    for i = 1, #s.x do
      if finite(s.x[i]) and finite(s.y[i]) then
        xlo, xhi = math.min(xlo, s.x[i]), math.max(xhi, s.x[i])
        ylo, yhi = math.min(ylo, s.y[i]), math.max(yhi, s.y[i])
      end
    end
  end
  if xlo > xhi then xlo, xhi, ylo, yhi = 0, 1, 0, 1 end -- no data: an empty frame
  xlo, xhi = opts.xmin or xlo, opts.xmax or xhi
  ylo, yhi = opts.ymin or ylo, opts.ymax or yhi
  local xt, yt
  xlo, xhi, _, xt = M.ticks(xlo, xhi, 8)
  local ystep
  ylo, yhi, ystep, yt = M.ticks(ylo, yhi, 6)
  local xstep = #xt > 1 and xt[2] - xt[1] or 1

  local function px(x) return ml + (x - xlo) / (xhi - xlo) * pw end
  local function py(y) return mt + ph - (y - ylo) / (yhi - ylo) * ph end

  local out = {}
  local function add(fmt, ...) out[#out + 1] = string.format(fmt, ...) end
  add('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" '
    .. 'font-family="sans-serif" font-size="12">', W, H, W, H)
  add('<rect width="%d" height="%d" fill="white"/>', W, H)
  if opts.title then
    add('<text x="%.1f" y="24" text-anchor="middle" font-size="15">%s</text>', ml + pw / 2, escape(opts.title))
  end
  -- grid and ticks
  for _, v in ipairs(xt) do
    local x = px(v)
    add('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#e5e5e5"/>', x, mt, x, mt + ph)
    add('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="black"/>', x, mt + ph, x, mt + ph + 5)
    add('<text x="%.1f" y="%d" text-anchor="middle">%s</text>', x, mt + ph + 18, fmt_tick(v, xstep))
  end
  for _, v in ipairs(yt) do
    local y = py(v)
    add('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e5e5e5"/>', ml, y, ml + pw, y)
    add('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="black"/>', ml - 5, y, ml, y)
    add('<text x="%d" y="%.1f" text-anchor="end">%s</text>', ml - 8, y + 4, fmt_tick(v, ystep))
  end
  add('<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="black"/>', ml, mt, pw, ph)
  if opts.xlabel then
    add('<text x="%.1f" y="%d" text-anchor="middle">%s</text>', ml + pw / 2, H - 12, escape(opts.xlabel))
  end
  if opts.ylabel then
    add('<text x="16" y="%.1f" text-anchor="middle" transform="rotate(-90 16 %.1f)">%s</text>',
      mt + ph / 2, mt + ph / 2, escape(opts.ylabel))
  end
  -- series, clipped to the plot area
  add('<clipPath id="plotarea"><rect x="%d" y="%d" width="%d" height="%d"/></clipPath>', ml, mt, pw, ph)
  for k, s in ipairs(opts.series) do
    local color = s.color or M.COLORS[(k - 1) % #M.COLORS + 1]
    local pts, seg = {}, {}
    local function flush()
      if #seg > 1 then pts[#pts + 1] = table.concat(seg, " ") end
      seg = {}
    end
    for i = 1, #s.x do
      if finite(s.x[i]) and finite(s.y[i]) then
        seg[#seg + 1] = string.format("%.1f,%.1f", px(s.x[i]), py(s.y[i]))
      else
        flush()
      end
    end
    flush()
    for _, p in ipairs(pts) do
      add('<polyline clip-path="url(#plotarea)" fill="none" stroke="%s" stroke-width="%s"%s points="%s"/>',
        color, s.width or 1.5, s.dash and (' stroke-dasharray="' .. s.dash .. '"') or "", p)
    end
    if s.markers then
      for i = 1, #s.x do
        if finite(s.x[i]) and finite(s.y[i]) then
          add('<circle clip-path="url(#plotarea)" cx="%.1f" cy="%.1f" r="2.5" fill="%s"/>',
            px(s.x[i]), py(s.y[i]), color)
        end
      end
    end
  end
  -- legend, top right inside the plot
  local lw, lh = 0, #opts.series * 18 + 8
  for _, s in ipairs(opts.series) do lw = math.max(lw, #tostring(s.name or "") * 7 + 40) end
  local lx, ly = ml + pw - lw - 10, mt + 10
  add('<rect x="%d" y="%d" width="%d" height="%d" fill="white" fill-opacity="0.85" stroke="#999"/>', lx, ly, lw, lh)
  for k, s in ipairs(opts.series) do
    local color = s.color or M.COLORS[(k - 1) % #M.COLORS + 1]
    local y = ly + 4 + k * 18 - 9
    add('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/>', lx + 8, y, lx + 28, y, color,
      s.dash and (' stroke-dasharray="' .. s.dash .. '"') or "")
    add('<text x="%d" y="%d">%s</text>', lx + 34, y + 4, escape(s.name or ("series " .. k)))
  end
  add("</svg>")
  return table.concat(out, "\n") .. "\n"
end

--- Heatmaps as one standalone SVG, panels stacked top to bottom:
---   plot.heatmap{ title = "...", panels = {
---     { title = "...", rows = {"L0 H0", ...}, cols = {"tok", ...}, values = {{v, ...}, ...} } } }
--- values[r][c] in [0, vmax] (vmax defaults to 1) shade a cell from white to blue; each cell also
--- carries its value in a <title> tooltip and data-row / data-col / data-value attributes, so a
--- test can read the picture back.
function M.heatmap(opts)
  assert(type(opts) == "table" and type(opts.panels) == "table", "plot.heatmap: opts.panels required")
  local vmax = opts.vmax or 1
  local cw, ch, lw, top_pad = opts.cell_width or 56, opts.cell_height or 16, 64, 64
  local W = lw + 20
  for _, p in ipairs(opts.panels) do W = math.max(W, lw + #p.cols * cw + 20) end
  local out, y = {}, opts.title and 34 or 10
  local function add(fmt, ...) out[#out + 1] = string.format(fmt, ...) end
  local body = {}
  for pi, p in ipairs(opts.panels) do
    assert(#p.values == #p.rows, "plot.heatmap: panel " .. pi .. " has #values ~= #rows")
    if p.title then
      body[#body + 1] = string.format('<text x="%d" y="%d" font-size="14">%s</text>', 8, y + 14, escape(p.title))
      y = y + 22
    end
    local y0 = y + top_pad
    for c, name in ipairs(p.cols) do -- column labels, slanted
      local x = lw + (c - 0.5) * cw
      body[#body + 1] = string.format('<text x="%.1f" y="%d" transform="rotate(-35 %.1f %d)">%s</text>',
        x, y0 - 6, x, y0 - 6, escape(name))
    end
    for r, name in ipairs(p.rows) do
      local yy = y0 + (r - 1) * ch
      body[#body + 1] = string.format('<text x="%d" y="%.1f" text-anchor="end">%s</text>', lw - 6, yy + ch - 4, escape(name))
      for c = 1, #p.cols do
        local v = p.values[r][c] or 0
        local a = finite(v) and math.max(0, math.min(1, v / vmax)) or 0
        body[#body + 1] = string.format(
          '<rect class="cell" x="%.1f" y="%.1f" width="%d" height="%d" fill="rgb(%d,%d,%d)" stroke="#ddd" '
          .. 'data-row="%d" data-col="%d" data-value="%.6g"><title>%s / %s: %.4f</title></rect>',
          lw + (c - 1) * cw, yy, cw, ch, math.floor(255 - 208 * a + 0.5), math.floor(255 - 144 * a + 0.5),
          math.floor(255 - 33 * a + 0.5), r, c, v, escape(name), escape(p.cols[c]), v)
      end
    end
    y = y0 + #p.rows * ch + 24
  end
  add('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" '
    .. 'font-family="sans-serif" font-size="11">', W, y, W, y)
  add('<rect width="%d" height="%d" fill="white"/>', W, y)
  if opts.title then add('<text x="8" y="22" font-size="15">%s</text>', escape(opts.title)) end
  for _, b in ipairs(body) do out[#out + 1] = b end
  add("</svg>")
  return table.concat(out, "\n") .. "\n"
end

--- Write text to path atomically (wb.write_file: temp file in the same directory, every write
--- checked, fsync, rename; a failure leaves the old file and raises an error naming the path).
function M.write(path, text)
  local wb = package.loaded.wb or require("wb")
  wb.write_file(path, text)
end

return M
