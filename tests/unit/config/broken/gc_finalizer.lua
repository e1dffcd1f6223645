-- expect: gc_finalizer.lua:3: setmetatable: __gc metamethods are not allowed in a config
-- A finalizer would run when the state closes, outside every limit check.
setmetatable({}, { __gc = function() while true do end end })
return {}
