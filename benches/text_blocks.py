#!/usr/bin/env python3
"""What the model reads: the text block of ten typical calls, over a real MCP session.

Usage: benches/text_blocks.py BINARY OUT.json
Makes a temporary jail (a git repository with a small file), a policy for it, starts
BINARY's terminal server with the official Python SDK's stdio client, makes ten calls a
coding agent makes in its first minutes, and writes each call's text block to OUT.json.
`benches/count_tokens.mjs OUT.json` then counts characters and tokens. Run it with the
binary before and after a change to compare (docs/PERFORMANCE.md).
"""
import asyncio
import json
import os
import subprocess
import sys
import tempfile

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

CALLS = [
    ("run_command", {"command": "echo hi"}),
    ("run_command", {"command": "git log --oneline -3"}),
    ("run_command", {"command": "ls -la"}),
    ("run_command", {"command": "cat src/main.py"}),
    ("run_command", {"command": "ls missing-file"}),
    ("run_command", {"command": "rm -rf src"}),
    ("run_command", {"command": "grep -rn def src"}),
    ("explain_command", {"command": "git status"}),
    ("read_file", {"path": "src/main.py"}),
    ("edit_file", {"path": "src/main.py", "edits": [{"old_text": "return 1", "new_text": "return 2"}]}),
]


def jail(base: str) -> str:
    root = os.path.join(base, "jail")
    os.makedirs(os.path.join(root, "src"))
    with open(os.path.join(root, "src", "main.py"), "w") as f:
        f.write('def main():\n    """Entry point."""\n    return 1\n\n\nif __name__ == "__main__":\n    main()\n')
    env = dict(os.environ, GIT_AUTHOR_NAME="A", GIT_AUTHOR_EMAIL="a@example.com",
               GIT_COMMITTER_NAME="A", GIT_COMMITTER_EMAIL="a@example.com")
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "first: a main"],
                 ["commit", "-q", "--allow-empty", "-m", "second: nothing yet"],
                 ["commit", "-q", "--allow-empty", "-m", "third: still nothing"]):
        subprocess.run(["git", *args], cwd=root, env=env, check=True)
    return root


async def main(binary: str, out: str) -> None:
    with tempfile.TemporaryDirectory() as base:
        root = jail(base)
        policy = os.path.join(base, "policy.toml")
        with open(policy, "w") as f:
            f.write(f'''audit_log = "{base}/audit.jsonl"

[terminal]
jail_root = "{root}"

[terminal.allowlist]
commands = ["echo", "git", "ls", "cat", "grep"]
''')
        await write_text_blocks(binary, policy, CALLS, out)


async def write_text_blocks(binary: str, policy: str, calls: list, out: str) -> None:
    """Makes `calls` on BINARY's terminal server under `policy` over one session of the
    official Python SDK's stdio client, and writes each call's text block to `out`."""
    params = StdioServerParameters(command=binary, args=["terminal", "--config", policy])
    results = []
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            for name, args in calls:
                result = await session.call_tool(name, args)
                results.append({"tool": name, "args": args, "text": result.content[0].text})
    with open(out, "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
