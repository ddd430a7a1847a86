"""A terminal server driven by raw JSON-RPC over stdio, for the benches: no SDK between the
bench and the server, so what is timed is the server's own round trip.
"""
import json
import os
import subprocess


class Server:
    """`BINARY terminal --config POLICY` (or any MCP server's `argv`), initialized."""

    def __init__(self, binary: str, policy: str, argv: list = None):
        argv = argv or [binary, "terminal", "--config", policy]
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                  env={"PATH": "/usr/bin:/bin"})
        self.n = 0
        self.ask("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                "clientInfo": {"name": "bench", "version": "1"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message: dict) -> None:
        self.p.stdin.write((json.dumps(message) + "\n").encode())
        self.p.stdin.flush()

    def ask(self, method: str, params: dict) -> dict:
        self.n += 1
        self.send({"jsonrpc": "2.0", "id": self.n, "method": method, "params": params})
        while True:
            reply = json.loads(self.p.stdout.readline())
            if reply.get("id") == self.n:
                return reply

    def close(self) -> None:
        self.p.stdin.close()
        self.p.wait()


def vm_rss(pid: int) -> int:
    """A process's resident set, in KiB (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def descendants(pid: int) -> list:
    """Every process below `pid`."""
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    kids = [int(c) for c in f.read().split()]
                found.extend(kids)
                todo.extend(kids)
        except OSError:
            pass
    return found
