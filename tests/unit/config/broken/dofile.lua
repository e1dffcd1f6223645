-- expect: dofile.lua:2: attempt to call a nil value (global 'dofile')
return dofile("/etc/phub/other.lua")
