#!/usr/bin/env python3
"""What a stage's own mounts and the counters' namespace cost (issue 49), side by side.

Usage: benches/stage_groups.py BASELINE_BINARY BINARY [CALLS]
Starts both binaries' terminal servers on one jail (a git repository), each under the same
policy (git with an argument rule, so its stages bind git and its exec-path executable in
their own mount namespace; echo, which binds nothing), and times `run_command` of
`echo hi` and `git status` through raw JSON-RPC over stdio, in alternating blocks of CALLS
(default 100) per binary per round, five rounds after a warm-up. Prints p50 and p99 in ms.
"""
import os
import statistics
import subprocess
import sys
import tempfile
import time

import raw_stdio


class Server(raw_stdio.Server):
    """The raw client, timing `run_command`."""

    def run(self, command: str) -> float:
        started = time.perf_counter()
        reply = self.ask("tools/call", {"name": "run_command", "arguments": {"command": command}})
        took = time.perf_counter() - started
        if reply["result"]["structuredContent"]["code"] != "OK":
            raise SystemExit(f"{command}: {reply}")
        return took * 1000


def main(baseline: str, binary: str, calls: int) -> None:
    with tempfile.TemporaryDirectory() as base:
        jail = os.path.join(base, "jail")
        os.makedirs(jail)
        subprocess.run(["git", "init", "-q"], cwd=jail, check=True)
        policy = os.path.join(base, "policy.toml")
        with open(policy, "w") as f:
            f.write(f'''audit_log = "{base}/audit.jsonl"
[terminal]
jail_root = "{jail}"
path = ["/usr/bin", "/bin"]
[terminal.allowlist]
commands = ["echo", "git"]
[[terminal.rules]]
command = "git"
deny_args = ["push"]
[terminal.sandbox]
namespaces = "required"
''')
        servers = {"baseline": Server(baseline, policy), "this": Server(binary, policy)}
        times = {(s, c): [] for s in servers for c in ("echo hi", "git status")}
        for server in servers.values():
            for _ in range(20):
                server.run("echo hi")
                server.run("git status")
        for _ in range(5):
            for name, server in servers.items():
                for command in ("echo hi", "git status"):
                    times[(name, command)] += [server.run(command) for _ in range(calls)]
        for server in servers.values():
            server.close()
    print("| binary | command | p50 ms | p99 ms |\n|---|---|---:|---:|")
    for (name, command), t in times.items():
        t.sort()
        p99 = t[min(len(t) - 1, int(len(t) * 0.99))]
        print(f"| {name} | `{command}` | {statistics.median(t):.3f} | {p99:.3f} |")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 100)
