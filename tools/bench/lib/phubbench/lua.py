"""Writing phub-server Lua configs from Python values."""


def lua(value, indent=0):
    """A Python value (dict, list, str, number, bool) as Lua source."""
    pad = "  " * (indent + 1)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, dict):
        items = ["%s%s = %s" % (pad, k, lua(v, indent + 1)) for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + "  " * indent + "}"
    if isinstance(value, (list, tuple)):
        return "{ " + ", ".join(lua(v, indent + 1) for v in value) + " }"
    raise TypeError("cannot write %r as Lua" % (value,))


def write_config(path, table, comment=""):
    with open(path, "w") as f:
        if comment:
            f.write("-- %s\n" % comment)
        f.write("return " + lua(table) + "\n")
    return path
