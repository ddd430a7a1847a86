#!/usr/bin/env python3
"""Keystroke to updated screen, and memory per idle session on a terminal (issue 55).

Usage: benches/pty_keystroke.py BINARY [KEYS]
Three ways of typing one key into `cat` and seeing it come back, side by side in one run,
KEYS (default 200) keys each, in alternating blocks of 20 after a warm-up:
- direct: a pty of this script's own with `cat` on it, unconfined: write the key to the
  master, read the echo back (the program's and the kernel's own time);
- pipe: the terminal server's pipe session of `cat`: write_process_input of the key and a
  newline, then read_process_output (wait_seconds 1) until cat's line is back;
- pty: the server's session on a terminal: write_process_input of the key, then
  read_process_output (wait_seconds 1) until the screen shows it.
Each server round trip is raw JSON-RPC over stdio. Prints p50 and p99 in ms, and how far
the pty's are above direct's. Then starts 10 idle sessions on a terminal and prints the
server's resident memory before and after, per session, and the resident memory of each
session's program (its init runs in the server's memory).
"""
import os
import statistics
import subprocess
import sys
import tempfile
import time

import raw_stdio
from raw_stdio import descendants, vm_rss


class Server(raw_stdio.Server):
    """The raw client, with a tool call that must answer OK and the server's memory."""

    def tool(self, name: str, arguments: dict) -> dict:
        reply = self.ask("tools/call", {"name": name, "arguments": arguments})
        envelope = reply["result"]["structuredContent"]
        if envelope["code"] != "OK":
            raise SystemExit(f"{name}: {envelope}")
        return envelope

    def rss_kib(self) -> int:
        return vm_rss(self.p.pid)


def comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


class Direct:
    """`cat` on a pty of our own: the key's echo is the kernel's and cat's own time."""

    def __init__(self):
        self.master, slave = os.openpty()
        self.p = subprocess.Popen(["cat"], stdin=slave, stdout=slave, stderr=slave,
                                  start_new_session=True)
        os.close(slave)

    def key(self) -> float:
        started = time.perf_counter()
        os.write(self.master, b"x")
        seen = b""
        while b"x" not in seen:
            seen += os.read(self.master, 64)
        return (time.perf_counter() - started) * 1000

    def close(self) -> None:
        self.p.kill()
        self.p.wait()
        os.close(self.master)


class Session:
    """A session of the server's: on a terminal (`pty`) or on pipes."""

    def __init__(self, server: Server, pty: bool):
        self.server, self.pty, self.typed = server, pty, 0
        args = {"command": ["cat"]}
        if pty:
            args["pty"] = {"rows": 24, "cols": 80}
        self.handle = server.tool("start_process", args)["detail"]["handle"]

    def key(self) -> float:
        started = time.perf_counter()
        data = "x" if self.pty else "x\n"
        self.server.tool("write_process_input", {"handle": self.handle, "data": data})
        self.typed += 1
        if self.pty:
            self.wait_for_column(self.typed)
        else:
            while "x" not in self.read()["stdout"]:
                pass
        took = (time.perf_counter() - started) * 1000
        if self.pty and self.typed == 60:
            # Erase the line before the row fills (the line discipline's kill, Ctrl-U).
            self.server.tool("write_process_input", {"handle": self.handle, "keys": ["Ctrl-U"]})
            self.typed = 0
            self.wait_for_column(0)
        return took

    def read(self) -> dict:
        return self.server.tool("read_process_output",
                                {"handle": self.handle, "wait_seconds": 1})["detail"]

    def wait_for_column(self, col: int) -> None:
        """Reads until the screen's cursor stands at `col`: the echo has been drawn."""
        while self.read()["cursor"]["col"] != col:
            pass

    def stop(self) -> None:
        self.server.tool("stop_process", {"handle": self.handle})


def percentiles(samples: list) -> tuple:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def main(binary: str, keys: int) -> None:
    with tempfile.TemporaryDirectory() as base:
        jail = os.path.join(base, "jail")
        os.makedirs(jail)
        policy = os.path.join(base, "policy.toml")
        with open(policy, "w") as f:
            f.write('audit_log = "audit.jsonl"\n\n[terminal]\njail_root = "jail"\n'
                    'path = ["/usr/bin", "/bin"]\n\n[terminal.allowlist]\ncommands = ["cat"]\n\n'
                    '[terminal.sessions]\nmax_sessions = 16\nmax_sessions_per_caller = 16\n')
        server = Server(binary, policy)
        ways = {"direct": Direct(), "pipe": Session(server, False), "pty": Session(server, True)}
        # The pty session reads a screen, not a line: clear cat's line of x now and then.
        for way in ways.values():
            for _ in range(20):
                way.key()
        samples = {name: [] for name in ways}
        for _ in range(max(1, keys // 20)):
            for name, way in ways.items():
                samples[name].extend(way.key() for _ in range(20))
        print(f"keystroke to what a reader sees, {keys} keys each, ms:")
        for name, ms in samples.items():
            p50, p99 = percentiles(ms)
            print(f"  {name:7} p50 {p50:6.2f}  p99 {p99:6.2f}")
        direct = percentiles(samples["direct"])
        pty = percentiles(samples["pty"])
        print(f"  pty above direct: p50 {pty[0] - direct[0]:.2f} ms, p99 {pty[1] - direct[1]:.2f} ms")
        ways["direct"].close()
        ways["pipe"].stop()
        ways["pty"].stop()
        time.sleep(0.5)
        before = server.rss_kib()
        idle = [Session(server, True) for _ in range(10)]
        time.sleep(1.0)
        after = server.rss_kib()
        listing = server.tool("list_processes", {})["detail"]["processes"]
        print(f"10 idle sessions on a terminal: server VmRSS {before} -> {after} KiB, "
              f"{(after - before) / 10:.0f} KiB per session")
        programs = [vm_rss(p) for p in descendants(server.p.pid) if comm(p) == "cat"]
        if programs:
            print(f"  each session's program (cat): VmRSS median {statistics.median(programs):.0f} KiB "
                  f"over {len(programs)} ({len(listing)} sessions listed); its init runs in the "
                  "server's memory (CLONE_VM), so it adds only its stack to the server's")
        for s in idle:
            s.stop()
        server.close()


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 200)
