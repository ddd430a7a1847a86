#!/usr/bin/env python3
"""The house's size rules, checked on every Rust file of the workspace (library code, tests,
benches, test data): no file over 800 lines, no function over 120; and in library code
(`src/`), no type whose inherent `impl` blocks span more than two files, so that a reader of
a type finds all of it in one place or two.

A function is counted from its `fn` line to the brace that closes its body, found by
matching braces outside comments, strings, raw strings and character literals. Exits 1
naming every file and function over its limit.

    python3 scripts/check_sizes.py [ROOT]   (ROOT: the crates directory, by default)
"""

import os
import re
import sys

MAX_FILE_LINES = 800
MAX_FN_LINES = 120
MAX_IMPL_FILES = 2

IMPL = re.compile(r"^\s*impl(?:<[^>]*>)?\s+([A-Za-z_]\w*)(?:<[^>]*>)?\s*\{")

FN = re.compile(
    r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:const\s+)?(?:async\s+)?(?:unsafe\s+)?"
    r"(?:extern\s+\"[^\"]*\"\s+)?fn\s+(\w+)"
)


def code_only(text):
    """`text` with comments, strings and character literals blanked (newlines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            i = j
            continue
        if text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
            continue
        raw = re.match(r'b?r(#*)"', text[i:i + 260])
        if raw and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            end = '"' + raw.group(1)
            j = text.find(end, i + raw.end())
            j = n if j < 0 else j + len(end)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
            continue
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(re.sub(r"[^\n]", " ", text[i:j + 1]))
            i = j + 1
            continue
        if c == "'":
            lit = re.match(r"'(?:\\(?:u\{[0-9a-fA-F]+\}|x[0-9a-fA-F]{2}|.)|[^\\'])'", text[i:i + 12])
            if lit:
                out.append(" " * len(lit.group(0)))
                i += len(lit.group(0))
                continue
        out.append(c)
        i += 1
    return "".join(out)


def long_functions(path):
    text = open(path, encoding="utf-8").read()
    lines = code_only(text).split("\n")
    found = []
    for start, line in enumerate(lines):
        m = FN.match(line)
        if not m:
            continue
        depth, opened = 0, False
        for k in range(start, len(lines)):
            for ch in lines[k]:
                if ch == "{":
                    depth, opened = depth + 1, True
                elif ch == "}":
                    depth -= 1
                elif ch == ";" and not opened and depth == 0:
                    break  # a declaration without a body
            else:
                if opened and depth == 0:
                    length = k - start + 1
                    if length > MAX_FN_LINES:
                        found.append((m.group(1), start + 1, length))
                    break
                continue
            break
    return found


def impl_files(root):
    """Each type's inherent impl files, by crate and type name, in library code."""
    found = {}
    for dirpath, _, files in os.walk(root):
        parts = dirpath.split(os.sep)
        if "src" not in parts:
            continue
        crate = parts[parts.index("src") - 1]
        for f in files:
            if f.endswith(".rs"):
                path = os.path.join(dirpath, f)
                for line in code_only(open(path, encoding="utf-8").read()).split("\n"):
                    m = IMPL.match(line)
                    if m:
                        found.setdefault((crate, m.group(1)), set()).add(path)
    return found


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "crates")
    problems = []
    for dirpath, _, files in os.walk(root):
        if "/target" in dirpath:
            continue
        for f in sorted(files):
            if not f.endswith(".rs"):
                continue
            path = os.path.join(dirpath, f)
            count = sum(1 for _ in open(path, encoding="utf-8"))
            if count > MAX_FILE_LINES:
                problems.append(f"{path}: {count} lines (at most {MAX_FILE_LINES})")
            for name, at, length in long_functions(path):
                problems.append(f"{path}:{at}: fn {name} is {length} lines (at most {MAX_FN_LINES})")
    for (crate, name), paths in sorted(impl_files(root).items()):
        if len(paths) > MAX_IMPL_FILES:
            problems.append(
                f"{crate}: the impl of {name} spans {len(paths)} files (at most {MAX_IMPL_FILES}): "
                + ", ".join(sorted(paths))
            )
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} over the size rules: split by what each part decides")
        return 1
    print(
        f"sizes: every file at most {MAX_FILE_LINES} lines, every function at most {MAX_FN_LINES}, "
        f"every type's impl in at most {MAX_IMPL_FILES} files"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
