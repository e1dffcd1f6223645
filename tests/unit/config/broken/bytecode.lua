-- expect: attempt to load a binary chunk (mode is 't')
-- load() only takes text: precompiled bytecode could break out of the VM's checks.
local f, err = load("\27LuaT\0\25\147\13\10\26\10\4\8\8", "blob", "b")
assert(f, err)
return f()
