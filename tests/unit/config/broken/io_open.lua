-- expect: io_open.lua:3: attempt to index a nil value (global 'io')
-- A config must not read files: there is no io library.
local secret = io.open("/etc/shadow"):read("a")
return { secret = secret }
