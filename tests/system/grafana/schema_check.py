"""tools/grafana/phub.json against Grafana's own published types (npm @grafana/schema, installed with the TypeScript
compiler by tools/setup.sh into tools/grafana/schema/node_modules): the dashboard as an object literal of type
Dashboard, and each panel's options and custom field config as those of its panel plugin (timeseries, stat), all
compiled with `tsc --strict --noEmit`, so a missing required field, an unknown key or a wrong type is an error.
Grafana's types name some values by TypeScript enums (ThresholdsMode.Absolute = "absolute"), which a JSON file
holds as their strings: the check takes each type in its JSON form (AsJson below: a string enum as the union of
its values), and nothing else is loosened."""
import json
import os
import subprocess
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
SCHEMA_DIR = os.path.join(ROOT, "tools", "grafana", "schema")
TSC = os.path.join(SCHEMA_DIR, "node_modules", "typescript", "bin", "tsc")
# Panel plugins whose option types @grafana/schema publishes, by the module that holds them.
# Panel plugins whose types @grafana/schema publishes: the module, and whether it has a FieldConfig (the panel's
# fieldConfig.defaults.custom) besides its Options.
PLUGIN_TYPES = {
    "timeseries": ("@grafana/schema/dist/esm/raw/composable/timeseries/panelcfg/x/TimeSeriesPanelCfg_types.gen", True),
    "stat": ("@grafana/schema/dist/esm/raw/composable/stat/panelcfg/x/StatPanelCfg_types.gen", False),
}
# A type as a JSON document holds it: string enums become the union of their values; objects and arrays member
# by member (optional members stay optional, and object literals keep TypeScript's excess-property check).
AS_JSON = ("type AsJson<T> = T extends string ? `${T}` : T extends number | boolean | null | undefined ? T :"
           " T extends ReadonlyArray<infer U> ? Array<AsJson<U>> : T extends object ? { [K in keyof T]: AsJson<T[K]> } : T;")


def installed():
    """A reason the check cannot run, or None."""
    for path in (TSC, os.path.join(SCHEMA_DIR, "node_modules", "@grafana", "schema", "package.json")):
        if not os.path.exists(path):
            return "%s is missing: tools/setup.sh installs Grafana's schema and TypeScript with npm ci" % path
    return None


def schema_version():
    with open(os.path.join(SCHEMA_DIR, "node_modules", "@grafana", "schema", "package.json")) as f:
        return json.load(f)["version"]


def typescript(dashboard):
    """The TypeScript program that states `dashboard` (a dict) has Grafana's types."""
    lines = ["import type { Dashboard } from '@grafana/schema';"]
    for name, (module, _) in sorted(PLUGIN_TYPES.items()):
        lines.append("import type * as %s from '%s';" % (name, module))
    lines.append(AS_JSON)
    lines.append("export const dashboard: AsJson<Dashboard> = %s;" % json.dumps(dashboard, indent=1))
    for i, p in enumerate(dashboard.get("panels", [])):
        kind = p.get("type")
        if kind in PLUGIN_TYPES:
            lines.append("export const options_%d: AsJson<%s.Options> = %s;" % (i, kind, json.dumps(p.get("options", {}))))
            if PLUGIN_TYPES[kind][1]:
                custom = p.get("fieldConfig", {}).get("defaults", {}).get("custom", {})
                lines.append("export const custom_%d: AsJson<%s.FieldConfig> = %s;" % (i, kind, json.dumps(custom)))
    return "\n".join(lines) + "\n"


def check(dashboard, timeout_s=180):
    """(ok, tsc's output, panels checked against their plugin's types)."""
    with tempfile.TemporaryDirectory(prefix="phub-grafana-") as d:
        os.symlink(os.path.join(SCHEMA_DIR, "node_modules"), os.path.join(d, "node_modules"))
        with open(os.path.join(d, "dashboard.ts"), "w") as f:
            f.write(typescript(dashboard))
        with open(os.path.join(d, "tsconfig.json"), "w") as f:
            json.dump({"compilerOptions": {"strict": True, "noEmit": True, "module": "esnext",
                                           "moduleResolution": "bundler", "target": "es2020", "skipLibCheck": False,
                                           "types": []},
                       "files": ["dashboard.ts"]}, f)
        r = subprocess.run(["node", TSC, "-p", d], capture_output=True, text=True, timeout=timeout_s)
    typed = sum(1 for p in dashboard.get("panels", []) if p.get("type") in PLUGIN_TYPES)
    return r.returncode == 0, (r.stdout + r.stderr).strip(), typed
