#!/usr/bin/env python3
"""Fails when source files import each other in a circle, or a module imports one above it.

Reads every `crates/*/src/**/*.rs` with comments, string and char literals and every item
under `#[cfg(test)]` left out (a `mod tests;` line or a braced block, not the rest of the
file), and draws an edge from a file to each module file it names: `crate::a::b`,
`super::…`, a child module it uses (`child::Item`, `pub use child::…`). A parent that only
declares a child (`mod child;`) draws no edge.

Two checks:
- circles: any cycle among files is printed;
- floors: every crate has its top-level modules on numbered floors (FLOORS), and a module
  may import only modules on its own floor or below. A top-level module of such a
  crate that is on no floor is an error too, so a new module gets a place on purpose.

Exits 1 if either finds anything. Usage: scripts/check_imports.py [CRATES_DIR]
"""
import os
import re
import sys

# The floors of each crate, lowest first. The docs of `crates/core/src/lib.rs` say the same.
FLOORS = {
    "core": [
        # Leaves: import nothing of the crate but each other.
        ["beneath", "untrusted", "random",
         "protected", "held", "home", "nested", "programs", "usage", "jail", "testing",
         "credentials", "fleet", "agent_dir"],
        # The policy file and its settings types.
        ["config"],
        # What is built from a loaded policy.
        ["audit", "preflight", "lint", "policy"],
        ["approval", "tickets", "scopes", "sessions", "progress", "load"],
        # The request flow, which uses everything below.
        ["terminal", "file_tools"],
    ],
    "contract": [["confinement", "script"], ["plan"]],
    # The decisions with no I/O (NO_IO below holds them to it).
    "rules": [["paths", "cut", "env_prefix", "envelope", "egress", "tools", "redact", "protected", "credentials"], ["config", "syntax", "reader", "args", "jail", "gitdir", "scopes", "gateway"], ["policy"]],
    "exec": [
        # The pieces: directories, the filter, a child's steps, the view of the machine.
        ["fault", "rundir", "seccomp", "step", "execlog", "tmp", "view", "egress", "capture"],
        # The confinement each child applies, built once.
        ["confine"],
        # Children made and reaped, then a plan run.
        ["spawn", "reap"],
        ["inner", "run"],
    ],
    "http": [["jwks", "limits", "page"], ["oauth"]],
    "organizer": [["fsroot"], ["journal", "rules"], ["service"]],
    "proxy": [["request", "splice", "tls"], ["context", "relay"], ["ingress", "terminate"]],
    # The binary: its MCP handlers and the shim below the commands that wire them.
    "safe-mcp": [["exit", "runtime"], ["gateway", "logging", "mcp", "shim", "ssh_agent", "ssh_bind", "ssh_keys", "ssh_login"], ["cli"]],
}

root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "crates")
nodes = {}
for crate in sorted(os.listdir(root)):
    src = os.path.join(root, crate, "src")
    if not os.path.isdir(src):
        continue
    for dirpath, _, files in os.walk(src):
        for f in files:
            if f.endswith(".rs"):
                path = os.path.join(dirpath, f)
                parts = os.path.relpath(path, src)[:-3].split("/")
                if parts[-1] in ("mod", "lib", "main"):
                    parts = parts[:-1]
                nodes[(crate, tuple(parts))] = path


def resolve(crate, parts):
    for i in range(len(parts), -1, -1):
        key = (crate, tuple(parts[:i]))
        if key in nodes:
            return key
    return None


def without_tests(text):
    """Drops each item under `#[cfg(test)]`: up to its `;`, or its braced block."""
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]", text):
        if m.start() < i:
            continue
        out.append(text[i:m.start()])
        semi, brace = text.find(";", m.end()), text.find("{", m.end())
        if brace == -1 or (semi != -1 and semi < brace):
            i = semi + 1
            continue
        depth, k = 0, brace
        while k < len(text):
            depth += {"{": 1, "}": -1}.get(text[k], 0)
            if depth == 0:
                break
            k += 1
        i = k + 1
    out.append(text[i:])
    return "".join(out)


def use_groups(text):
    """Takes out each `crate::a::{…}` / `super::{…}` group (nested braces too) and returns
    the text without them and, per group, its anchor, its path and the first name of each
    of its items (a group's `self` and glob stand for the path itself)."""
    groups, out, i = [], [], 0
    for m in re.finditer(r"\b(crate|super)((?:::[a-z_0-9]+)*)::\{", text):
        if m.start() < i:
            continue
        depth, k = 0, m.end() - 1
        while k < len(text):
            depth += {"{": 1, "}": -1}.get(text[k], 0)
            if depth == 0:
                break
            k += 1
        inner, level, items, item = text[m.end():k], 0, [], ""
        for ch in inner + ",":
            if ch == "," and level == 0:
                items.append(item.strip().split("::")[0].split(" ")[0])
                item = ""
                continue
            level += {"{": 1, "}": -1}.get(ch, 0)
            item += ch
        path = [p for p in m.group(2).strip(":").split("::") if p]
        groups.append((m.group(1), path, [x if x not in ("self", "*", "") else "" for x in items]))
        out.append(text[i:m.start()])
        i = k + 1
    out.append(text[i:])
    return "".join(out), groups


def source(path):
    text = open(path, encoding="utf-8").read()
    text = re.sub(r'r#+"(?:.|\n)*?"#+', '""', text)
    # A backslash escapes any character, a line end too (a string continued on the next line).
    text = re.sub(r'"(?:[^"\\]|\\[\s\S])*"', '""', text)
    text = re.sub(r"'(?:[^'\\\n]|\\.)'", "' '", text)
    text = "\n".join(l.split("//")[0] for l in text.split("\n"))
    return without_tests(text)


# Files that exist only for tests: a `#[cfg(test)] mod x;` declaration, and what is under them.
test_only = set()
for (crate, mod), path in nodes.items():
    raw = open(path, encoding="utf-8").read()
    for m in re.finditer(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+([a-z_0-9]+)\s*;", raw):
        test_only.add((crate, mod + (m.group(1),)))
for key in list(nodes):
    if any(key[0] == c and key[1][:len(m)] == m for c, m in test_only):
        del nodes[key]

edges = {}
for (crate, mod), path in nodes.items():
    text = source(path)
    deps = set()
    text = re.sub(r"\bpub\((?:in )?(?:crate|super|self)[^)]*\)", "pub", text)
    text, groups = use_groups(text)
    for anchor, prefix, items in groups:
        base = list(mod[:-1]) if anchor == "super" else []
        base += prefix
        for item in items:
            key = (crate, tuple(base + [item]))
            deps.add(key if key in nodes else resolve(crate, base))
    for m in re.finditer(r"\bcrate\b((?:::[A-Za-z_0-9]+)+)", text):
        deps.add(resolve(crate, m.group(1).strip(":").split("::")))
    for m in re.finditer(r"\bsuper\b((?:::[A-Za-z_0-9]+)*)", text):
        rest = [p for p in m.group(1).strip(":").split("::") if p]
        deps.add(resolve(crate, list(mod[:-1]) + rest))
    for m in re.finditer(r"\b([a-z_0-9]+)::[A-Za-z_{]", text):
        if (crate, mod + (m.group(1),)) in nodes:
            deps.add((crate, mod + (m.group(1),)))
    deps.discard(None)
    deps.discard((crate, mod))
    edges[(crate, mod)] = deps

state, stack, cycles = {}, [], []


def visit(u):
    state[u] = 1
    stack.append(u)
    for v in sorted(edges.get(u, ())):
        if state.get(v) == 1:
            cycles.append(stack[stack.index(v):] + [v])
        elif not state.get(v):
            visit(v)
    stack.pop()
    state[u] = 2


sys.setrecursionlimit(10000)
for u in sorted(edges):
    if not state.get(u):
        visit(u)
name = lambda k: f"{k[0]}:{'/'.join(k[1]) or '<root>'}"
for c in cycles:
    print("import cycle: " + " -> ".join(name(k) for k in c))

floor_of = {
    (crate, module): n
    for crate, floors in FLOORS.items()
    for n, modules in enumerate(floors)
    for module in modules
}
upward, unplaced = [], set()
for (crate, mod), deps in sorted(edges.items()):
    if not mod:
        continue
    if crate not in FLOORS:
        unplaced.add((crate, mod[0]))
        continue
    here = floor_of.get((crate, mod[0]))
    if here is None:
        unplaced.add((crate, mod[0]))
        continue
    for dep_crate, dep in sorted(deps):
        if not dep or dep[0] == mod[0]:
            continue
        there = floor_of.get((dep_crate, dep[0]))
        if there is None:
            unplaced.add((dep_crate, dep[0]))
        elif there > here:
            upward.append(f"upward import: {name((crate, mod))} (floor {here}) -> "
                          f"{name((dep_crate, dep))} (floor {there})")
for line in upward:
    print(line)
for crate, module in sorted(unplaced):
    print(f"unplaced module: {crate}:{module} is on no floor in scripts/check_imports.py")
# The rules crate does no I/O: no file, socket, thread, process, environment, clock or
# system call, in any of its code but its tests.
NO_IO = {"rules"}
FORBIDDEN = re.compile(
    r"\bstd::(fs|thread|process|env|time::(SystemTime|Instant))\b"
    r"|\bstd::net::(TcpStream|TcpListener|UdpSocket|ToSocketAddrs)\b"
    r"|\bstd::io::(stdin|stdout|stderr)\b|\b(println|eprintln|print|eprint)!"
    r"|\b(rustix|libc|tokio|nix)::"
    r"|\bstd::\{[^}]*\b(fs|thread|process|env|net)\b"
)
io = []
for (crate, mod), path in sorted(nodes.items()):
    if crate in NO_IO:
        for m in FORBIDDEN.finditer(source(path)):
            io.append(f"I/O in a crate that may do none: {path}: {m.group(0)}")
for line in io:
    print(line)
print(f"{len(nodes)} files, {len(cycles)} import cycles, {len(upward)} upward imports, "
      f"{len(unplaced)} unplaced modules, {len(io)} uses of I/O in the rules crate")
sys.exit(1 if cycles or upward or unplaced or io else 0)
