-- expect: plain_find_bomb.lua:5: config script exceeded
-- expect: instructions
-- A plain find compares the needle at every start: "aaa...ab" in "aaa...a" costs n * m / 2 bytes.
local s, p = string.rep("a", 2000000), string.rep("a", 1000000) .. "b"
return { s:find(p, 1, true) }
