-- expect: os_execute.lua:3: attempt to index a nil value (global 'os')
-- A config must not run programs: there is no os library.
os.execute("touch /tmp/phub-pwned")
return {}
