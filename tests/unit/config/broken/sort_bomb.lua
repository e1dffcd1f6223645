-- expect: sort_bomb.lua:6: config script exceeded
-- expect: instructions
-- The default comparison of 4000 references to one 16 MiB string: each comparison reads 16 MiB.
local s, t = string.rep("x", 1 << 24), {}
for i = 1, 4000 do t[i] = s end
table.sort(t)
return {}
