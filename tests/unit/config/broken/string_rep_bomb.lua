-- expect: string_rep_bomb.lua:3: resulting string too large
-- string.rep checks the result's size before it allocates or loops: a huge repetition fails at once.
local s = string.rep("phub", 1e12)
return { eal_args = s }
