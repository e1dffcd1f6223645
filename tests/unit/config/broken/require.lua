-- expect: require.lua:3: attempt to call a nil value (global 'require')
-- No modules: require, package, dofile and loadfile are absent.
local socket = require("socket")
return {}
