-- expect: format_bomb.lua:7: config script exceeded
-- expect: instructions
-- A precision makes string.format measure each string and print none of it: 40000 x 16 MiB.
local s, t = string.rep("x", 1 << 24), {}
for i = 1, 40000 do t[i] = s end
local fmt = string.rep("%.0s", #t)
return { eal_args = { string.format(fmt, table.unpack(t)) } }
