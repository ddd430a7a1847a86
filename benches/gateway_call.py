#!/usr/bin/env python3
"""What the gateway (`[[gateway.servers]]`) costs: per tool call, per idle downstream server,
and at start.

Usage: benches/gateway_call.py BINARY [N]
The downstream server is tests/gateway/hostile.py (plain JSON-RPC over stdio, no SDK), copied
to a directory outside the jail. Every client here is raw JSON-RPC over stdio.
- Per call: `tools/call echo {"text": "x"}` straight to hostile.py run as a plain child
  (/usr/bin/python3, unconfined) vs `tools/call hostile__echo` through the terminal server,
  which runs it confined; and, third, the floor under both (benches/floor_relay.rs, built
  with `rustc -O`): a relay that only makes a record-sized line durable (fdatasync, on the
  same disk as the terminal's trail) before passing each request on, and writes one after.
  N (default 500) calls each, in alternating blocks of 25 after a warm-up of 50 each, side
  by side in one run. Prints p50 and p99 in ms, gateway minus direct, what the floor costs
  over direct (the durable write and the hop), and gateway minus the floor (the gateway's
  own work: MCP both ways, the tool policy, two chained trail records, redaction).
- Memory: the terminal server's VmRSS with no gateway servers vs three (a, b, c, all
  hostile.py), once all are listed and idle 2 s: the server's own increase per downstream
  server, and the VmRSS of each downstream server's process (descendants whose cmdline
  holds hostile.py).
- Start: from spawning a terminal server with three gateway servers until tools/list shows
  all three echo tools (polled every 20 ms); 5 runs, median and max.
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import raw_stdio
from raw_stdio import descendants, vm_rss

HERE = os.path.dirname(os.path.abspath(__file__))
HOSTILE = os.path.join(HERE, "..", "crates", "safe-mcp", "tests", "gateway", "hostile.py")
WARMUP, BLOCK = 50, 25


def unconfined(script: str) -> raw_stdio.Server:
    """hostile.py as a plain child process, initialized: no gateway, no confinement."""
    return raw_stdio.Server("", "", argv=["/usr/bin/python3", script])


def echo(server, tool: str) -> float:
    """One `tools/call` of an echo tool, in ms; the answer must be the downstream's own."""
    started = time.perf_counter()
    reply = server.ask("tools/call", {"name": tool, "arguments": {"text": "x"}})
    took = (time.perf_counter() - started) * 1000
    result = reply.get("result") or {}
    if result.get("isError") or result.get("content") != [{"type": "text", "text": "x"}]:
        raise SystemExit(f"{tool}: unexpected reply {json.dumps(reply)[:500]}")
    return took


def tool_names(server) -> set:
    names, cursor = set(), None
    while True:
        reply = server.ask("tools/list", {"cursor": cursor} if cursor else {})
        if "result" not in reply:
            raise SystemExit(f"tools/list: {json.dumps(reply)[:500]}")
        names.update(t["name"] for t in reply["result"]["tools"])
        cursor = reply["result"].get("nextCursor")
        if not cursor:
            return names


def wait_for(server, tools: set, every: float, limit: float = 30.0) -> None:
    deadline = time.monotonic() + limit
    while True:
        names = tool_names(server)
        if tools <= names:
            return
        if time.monotonic() > deadline or server.p.poll() is not None:
            raise SystemExit(f"never listed {sorted(tools - names)} within {limit:.0f} s "
                             f"(server exit {server.p.poll()}); listed: {sorted(names)}")
        time.sleep(every)


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def percentiles(samples: list) -> tuple:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def write_policy(base: str, name: str, servers: list, script: str) -> str:
    text = ('audit_log = "audit.jsonl"\n\n[terminal]\njail_root = "jail"\n\n'
            '[terminal.allowlist]\ncommands = ["echo"]\n')
    for server in servers:
        text += (f'\n[[gateway.servers]]\nname = "{server}"\n'
                 f'command = ["python3", "{script}"]\nread_paths = ["{os.path.dirname(script)}"]\n'
                 '\n[gateway.servers.tools]\nallow = ["echo"]\n')
    path = os.path.join(base, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def floor_relay(base: str) -> str:
    """benches/floor_relay.rs, built into `base`."""
    out = os.path.join(base, "floor_relay")
    subprocess.run(["rustc", "-O", "--edition", "2024", "-o", out,
                    os.path.join(HERE, "floor_relay.rs")], check=True)
    return out


def per_call(binary: str, policy: str, script: str, n: int) -> None:
    gateway = raw_stdio.Server(binary, policy)
    wait_for(gateway, {"hostile__echo"}, 0.1)
    direct = unconfined(script)
    base = os.path.dirname(policy)
    floor = raw_stdio.Server("", "", argv=[floor_relay(base), os.path.join(base, "floor.jsonl"),
                                           "/usr/bin/python3", script])
    ways = {"direct": (direct, "echo"), "floor": (floor, "echo"),
            "gateway": (gateway, "hostile__echo")}
    for server, tool in ways.values():
        for _ in range(WARMUP):
            echo(server, tool)
    samples = {name: [] for name in ways}
    done = 0
    while done < n:
        block = min(BLOCK, n - done)
        for name, (server, tool) in ways.items():
            samples[name].extend(echo(server, tool) for _ in range(block))
        done += block
    print(f"per tool call (echo), {n} calls each, ms:")
    for name, ms in samples.items():
        p50, p99 = percentiles(ms)
        print(f"  {name:8} p50 {p50:6.2f}  p99 {p99:6.2f}")
    d, f, g = (percentiles(samples[way]) for way in ("direct", "floor", "gateway"))
    print(f"  gateway minus direct: p50 {g[0] - d[0]:+.2f} ms, p99 {g[1] - d[1]:+.2f} ms")
    print(f"  floor minus direct (the durable write and the hop): p50 {f[0] - d[0]:+.2f} ms, "
          f"p99 {f[1] - d[1]:+.2f} ms")
    print(f"  gateway minus floor (the gateway's own work): p50 {g[0] - f[0]:+.2f} ms, "
          f"p99 {g[1] - f[1]:+.2f} ms")
    for server in (direct, floor, gateway):
        server.close()


def memory(binary: str, none: str, three: str) -> None:
    rss = {}
    for label, policy, tools in (("0", none, set()),
                                 ("3", three, {"a__echo", "b__echo", "c__echo"})):
        server = raw_stdio.Server(binary, policy)
        wait_for(server, tools, 0.1)
        time.sleep(2.0)
        rss[label] = vm_rss(server.p.pid)
        if label == "3":
            downstream = {p: vm_rss(p) for p in descendants(server.p.pid)
                          if "hostile.py" in cmdline(p)}
        server.close()
    print("memory per idle downstream server:")
    print(f"  terminal server VmRSS: 0 servers {rss['0']} KiB, 3 servers {rss['3']} KiB, "
          f"{(rss['3'] - rss['0']) / 3:+.0f} KiB per server")
    if downstream:
        each = ", ".join(f"{kib}" for kib in downstream.values())
        print(f"  downstream hostile.py VmRSS: {sum(downstream.values())} KiB over "
              f"{len(downstream)} processes (each: {each} KiB)")
    else:
        print("  downstream hostile.py: no such process found below the terminal server")


def start_time(binary: str, three: str, runs: int = 5) -> None:
    tools = {"a__echo", "b__echo", "c__echo"}
    took = []
    for _ in range(runs):
        started = time.perf_counter()
        server = raw_stdio.Server(binary, three)
        wait_for(server, tools, 0.02)
        took.append((time.perf_counter() - started) * 1000)
        server.close()
    print(f"start with 3 gateway servers, spawn to all echo tools listed, {runs} runs: "
          f"median {statistics.median(took):.0f} ms, max {max(took):.0f} ms")


def main(binary: str, n: int) -> None:
    with tempfile.TemporaryDirectory() as base:
        os.makedirs(os.path.join(base, "jail"))
        srv = os.path.join(base, "srv")
        os.makedirs(srv)
        script = os.path.join(srv, "hostile.py")
        shutil.copy(HOSTILE, script)
        one = write_policy(base, "one.toml", ["hostile"], script)
        none = write_policy(base, "none.toml", [], script)
        three = write_policy(base, "three.toml", ["a", "b", "c"], script)
        print(f"binary {binary}")
        per_call(binary, one, script, n)
        memory(binary, none, three)
        start_time(binary, three)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    main(os.path.abspath(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 500)
