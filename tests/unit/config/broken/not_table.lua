-- expect: not_table.lua: the config script must return a table, got number
return 42
