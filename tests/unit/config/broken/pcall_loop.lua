-- expect: config script exceeded
-- expect: instructions
-- pcall cannot swallow the instruction limit to keep looping.
while true do
  pcall(function() while true do end end)
end
