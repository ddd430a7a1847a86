#!/usr/bin/env python3
"""Checks server.json for the official MCP Registry.

    python3 scripts/check_registry.py SCHEMA [SERVER_JSON]

SCHEMA is the registry's server.schema.json of the version server.json names in `$schema`
(CI takes it from a PyPI package that bundles the released schemas byte for byte; see
.ci/run). Checked:
- server.json is valid against SCHEMA (the JSON Schema draft it declares, formats checked);
- `$schema` is the schema's own `$id`;
- its version, and its cargo package's version, are the workspace's (Cargo.toml);
- its cargo package's identifier is the binary crate's name;
- the README has the visible `mcp-name: <name>` line that proves the crate to the registry.
Exits 0 when all hold, 1 with each failure named otherwise.
"""

import json
import pathlib
import re
import sys
import tomllib

import jsonschema

ROOT = pathlib.Path(__file__).resolve().parent.parent


def main() -> int:
    schema_path = pathlib.Path(sys.argv[1])
    server_path = pathlib.Path(sys.argv[2]) if len(sys.argv) > 2 else ROOT / "server.json"
    schema = json.loads(schema_path.read_text())
    server = json.loads(server_path.read_text())
    failures = []

    # The validator of the draft the schema declares (draft 7 for 2025-12-11).
    cls = jsonschema.validators.validator_for(schema)
    validator = cls(schema, format_checker=cls.FORMAT_CHECKER)
    for error in sorted(validator.iter_errors(server), key=lambda e: list(e.path)):
        where = "/".join(str(p) for p in error.absolute_path) or "(top)"
        failures.append(f"schema: {where}: {error.message}")

    if server.get("$schema") != schema.get("$id"):
        failures.append(f"$schema is {server.get('$schema')!r}, the schema is {schema.get('$id')!r}")

    workspace = tomllib.loads((ROOT / "Cargo.toml").read_text())
    version = workspace["workspace"]["package"]["version"]
    crate = tomllib.loads((ROOT / "crates/safe-mcp/Cargo.toml").read_text())["package"]["name"]
    if server.get("version") != version:
        failures.append(f"version {server.get('version')!r}, the workspace's is {version!r}")
    cargo = [p for p in server.get("packages", []) if p.get("registryType") == "cargo"]
    if len(cargo) != 1:
        failures.append(f"{len(cargo)} cargo packages; there must be one")
    for p in cargo:
        if p.get("identifier") != crate:
            failures.append(f"cargo identifier {p.get('identifier')!r}, the crate is {crate!r}")
        if p.get("version") != version:
            failures.append(f"cargo version {p.get('version')!r}, the workspace's is {version!r}")

    readme = (ROOT / "README.md").read_text()
    names = re.findall(r"^mcp-name: (\S+)$", readme, re.MULTILINE)
    if names != [server.get("name")]:
        failures.append(f"README mcp-name lines {names}, server.json names {server.get('name')!r}")
    if re.search(r"<!--[^>]*mcp-name", readme):
        failures.append("the README's mcp-name is inside an HTML comment, which crates.io strips")

    for f in failures:
        print(f"server.json: {f}")
    if not failures:
        print(f"server.json: valid against {schema.get('$id')}; {server['name']} {version}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
