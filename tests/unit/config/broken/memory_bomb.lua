-- expect: config script exceeded
-- expect: bytes of memory
local t = {}
for i = 1, 1e9 do t[i] = { i, i, i, i } end
return t
