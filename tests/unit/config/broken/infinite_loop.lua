-- expect: infinite_loop.lua:3: config script exceeded
-- expect: instructions
while true do end
return {}
