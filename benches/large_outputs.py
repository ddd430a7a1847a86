#!/usr/bin/env python3
"""What the model reads of a large output (issue 50, item 3), over a real MCP session.

Usage: benches/large_outputs.py BINARY OUT.json [MAX_OUTPUT_BYTES]
Makes a temporary jail with a 300 KB build log (its first error in the middle, more at the
end), a 300 KB source file and a git repository of 2,000 commits; starts BINARY's terminal
server with the official Python SDK's stdio client, under a policy with the built-in
`[terminal.limits]` (or `max_output_bytes = MAX_OUTPUT_BYTES`, as `init` writes one), and
writes the text block of `cat build.log`, `read_file big.py` and `git log` to OUT.json.
`benches/count_tokens.mjs OUT.json` then counts characters and tokens (docs/PERFORMANCE.md).
"""
import asyncio
import os
import subprocess
import sys
import tempfile

from text_blocks import write_text_blocks

CALLS = [
    ("run_command", {"command": "cat build.log"}),
    ("read_file", {"path": "big.py"}),
    ("run_command", {"command": "git log"}),
]


def build_log() -> str:
    """About 300 KB of a parallel build: compile lines, one error at 45%, errors at the end."""
    lines = []
    n = 0
    while sum(len(l) + 1 for l in lines) < 300_000:
        n += 1
        lines.append(f"   Compiling crate-{n:04} v0.{n % 17}.{n % 5} (/work/src/crate-{n:04})")
        if n == 1500:
            lines.append("error[E0308]: mismatched types --> src/parse.rs:212:17 expected `u32`, found `i64`")
    lines.append("error: could not compile `crate-1500` (lib) due to 1 previous error")
    lines.append("warning: build failed, waiting for other jobs to finish...")
    return "\n".join(lines) + "\n"


def big_source() -> str:
    body = []
    n = 0
    while sum(len(l) + 1 for l in body) < 300_000:
        n += 1
        body += [f"def handler_{n}(request, *, retries=3):",
                 f'    """Serve route {n}: validate, load, render."""',
                 f"    data = load(request.args.get('id_{n}'), retries=retries)",
                 "    return render(data)", ""]
    return "\n".join(body)


def jail(base: str) -> str:
    root = os.path.join(base, "jail")
    os.makedirs(root)
    with open(os.path.join(root, "build.log"), "w") as f:
        f.write(build_log())
    with open(os.path.join(root, "big.py"), "w") as f:
        f.write(big_source())
    env = dict(os.environ, GIT_AUTHOR_NAME="A", GIT_AUTHOR_EMAIL="a@example.com",
               GIT_COMMITTER_NAME="A", GIT_COMMITTER_EMAIL="a@example.com")
    subprocess.run(["git", "init", "-q"], cwd=root, env=env, check=True)
    # 2,000 commits through fast-import: seconds, not minutes.
    stream = []
    for i in range(1, 2001):
        msg = f"Change {i}: adjust the parser's handling of case {i}\n".encode()
        stream.append(b"commit refs/heads/main\n")
        stream.append(f"committer A <a@example.com> {1700000000 + i * 60} +0000\n".encode())
        stream.append(f"data {len(msg)}\n".encode() + msg)
        stream.append(f"M 644 inline notes.txt\ndata {len(str(i))}\n{i}\n".encode())
    subprocess.run(["git", "fast-import", "--quiet"], cwd=root, env=env, check=True,
                   input=b"".join(stream))
    subprocess.run(["git", "checkout", "-q", "main"], cwd=root, env=env, check=True)
    return root


async def main(binary: str, out: str, cap: str | None) -> None:
    with tempfile.TemporaryDirectory() as base:
        root = jail(base)
        policy = os.path.join(base, "policy.toml")
        limits = f"\n[terminal.limits]\nmax_output_bytes = {cap}\n" if cap else ""
        with open(policy, "w") as f:
            f.write(f'''audit_log = "{base}/audit.jsonl"

[terminal]
jail_root = "{root}"

[terminal.allowlist]
commands = ["git", "cat"]
{limits}''')
        await write_text_blocks(binary, policy, CALLS, out)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None))
