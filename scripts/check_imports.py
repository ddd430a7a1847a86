#!/usr/bin/env python3
"""Fails when source files import each other in a circle.

Reads every `crates/*/src/**/*.rs` (test modules, comments and string literals left out),
and draws an edge from a file to each module file it names: `crate::a::b`, `super::…`, a
child module it uses (`child::Item`, `pub use child::…`). A parent that only declares a
child (`mod child;`) draws no edge. Prints every cycle and exits 1 if there is one.
Usage: scripts/check_imports.py [CRATES_DIR]
"""
import os
import re
import sys

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


edges = {}
for (crate, mod), path in nodes.items():
    text = open(path, encoding="utf-8").read()
    text = re.split(r"#\[cfg\(test\)\]", text)[0]
    text = "\n".join(l for l in text.split("\n") if not l.strip().startswith("//"))
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', text)
    deps = set()
    for m in re.finditer(r"\bcrate((?:::[a-z_0-9]+)+)", text):
        deps.add(resolve(crate, m.group(1).strip(":").split("::")))
    for m in re.finditer(r"\bsuper((?:::[a-z_0-9]+)*)", text):
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
print(f"{len(nodes)} files, {len(cycles)} import cycles")
sys.exit(1 if cycles else 0)
