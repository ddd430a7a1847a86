"""A terminal server driven by raw JSON-RPC over stdio, for the benches: no SDK between the
bench and the server, so what is timed is the server's own round trip.
"""
import json
import subprocess


class Server:
    """`BINARY terminal --config POLICY`, initialized."""

    def __init__(self, binary: str, policy: str):
        self.p = subprocess.Popen([binary, "terminal", "--config", policy], stdin=subprocess.PIPE,
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
