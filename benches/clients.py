#!/usr/bin/env python3
"""Benchmark safe-mcp beside the Python peer through the official Python MCP clients.

usage: benches/clients.py [--calls N] [--rounds R] [--binary PATH]
Makes three venvs under target/bench-clients/ (Python SDK 1.x, Python SDK 2.x, and the peer
`mcp-shell-server`, which pins mcp<2) and installs the TypeScript SDK from npm beside them
(benches/clients_ts.mjs drives it), then, for each client and each server, in one run
and alternating: cold start (spawn until initialize is answered), run_command("echo hi")
round trips (p50, p99), calls/s at concurrency 1 and 16 on one session, and the server's
peak RSS. R rounds per client (default 5), each one run of each server, their order
alternating; each round's p50 ratio (peer / ours) is printed, then the median and the worst
round. Percentiles only; nothing here passes or fails.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORK = os.path.join(ROOT, "target", "bench-clients")

# Runs inside each client venv: drives one server, prints one JSON line of measurements.
DRIVER = textwrap.dedent(r'''
    import asyncio, json, os, sys, time
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    kind, command, args, env, calls = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4]), int(sys.argv[5])
    tool, tool_args = ("run_command", {"command": "echo hi"}) if kind == "ours" else ("shell_execute", {"command": ["echo", "hi"], "directory": env.get("BENCH_DIR", "/tmp")})

    def rss_kib(pid):
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        return int(line.split()[1])
        except OSError:
            pass
        return 0

    def server_pid():
        # The stdio client's child: the newest process of ours running the server command.
        best = None
        for p in os.listdir("/proc"):
            if not p.isdigit():
                continue
            try:
                with open(f"/proc/{p}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                if ppid != os.getpid():
                    continue
                best = int(p)
            except (OSError, ValueError, IndexError):
                pass
        return best

    async def session_run(body):
        params = StdioServerParameters(command=command, args=args, env=env)
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                return await body(session)

    async def cold():
        t = time.perf_counter()
        async def body(s):
            await s.initialize()
            return time.perf_counter() - t
        return await session_run(body)

    async def main():
        colds = sorted([await cold() for _ in range(10)])
        async def body(s):
            await s.initialize()
            for _ in range(20):
                await s.call_tool(tool, tool_args)
            lat = []
            for _ in range(calls):
                t = time.perf_counter()
                r = await s.call_tool(tool, tool_args)
                lat.append(time.perf_counter() - t)
            assert "hi" in r.content[0].text, r
            t = time.perf_counter()
            for _ in range(calls // 2):
                await s.call_tool(tool, tool_args)
            serial = (calls // 2) / (time.perf_counter() - t)
            t = time.perf_counter()
            n = 0
            for _ in range(max(1, calls // 32)):
                await asyncio.gather(*(s.call_tool(tool, tool_args) for _ in range(16)))
                n += 16
            parallel = n / (time.perf_counter() - t)
            pid = server_pid()
            return lat, serial, parallel, rss_kib(pid) if pid else 0
        lat, serial, parallel, rss = await session_run(body)
        lat.sort()
        q = lambda v, p: v[min(len(v) - 1, int(round((len(v) - 1) * p)))] * 1e3
        print(json.dumps({"cold_p50_ms": q(colds, .5), "p50_ms": q(lat, .5), "p99_ms": q(lat, .99),
                          "calls_per_s_1": serial, "calls_per_s_16": parallel, "rss_kib": rss}))

    asyncio.run(main())
''')


def venv(name, packages):
    path = os.path.join(WORK, name)
    python = os.path.join(path, "bin", "python")
    if not os.path.exists(python):
        subprocess.run([sys.executable, "-m", "venv", path], check=True)
        subprocess.run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check", *packages], check=True)
    return path


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--binary", default=os.path.join(ROOT, "target", "release", "safe-mcp"))
    a = ap.parse_args()
    os.makedirs(WORK, exist_ok=True)
    py1 = venv("py-sdk1", ["mcp<2"])
    py2 = venv("py-sdk2", ["mcp>=2"])
    peer = venv("peer", ["mcp-shell-server"])
    version = lambda v: subprocess.run([os.path.join(v, "bin", "python"), "-c", "import importlib.metadata as m; print(m.version('mcp'))"], capture_output=True, text=True).stdout.strip()
    driver = os.path.join(WORK, "driver.py")
    with open(driver, "w") as f:
        f.write(DRIVER)

    box = tempfile.mkdtemp(prefix="safe-mcp-bench-")
    os.makedirs(os.path.join(box, "jail"))
    policy = os.path.join(box, "policy.toml")
    with open(policy, "w") as f:
        f.write('audit_log = "audit.jsonl"\n[terminal]\njail_root = "jail"\n[terminal.allowlist]\ncommands = ["echo"]\n')
    servers = {
        "ours": (a.binary, ["terminal", "--config", policy], {}),
        "peer": (os.path.join(peer, "bin", "mcp-shell-server"), [], {"ALLOW_COMMANDS": "echo", "BENCH_DIR": os.path.join(box, "jail")}),
    }
    print(f"clients: Python SDK {version(py1)} and {version(py2)}; peer mcp-shell-server in its own venv; {a.calls} calls per row\n")
    print("| client | server | cold start p50 | run p50 | run p99 | calls/s (1) | calls/s (16) | peak RSS |")
    print("|---|---|---|---|---|---|---|---|")
    results = {}
    rounds = []
    for client_name, v in [(f"Python SDK {version(py1)}", py1), (f"Python SDK {version(py2)}", py2)]:
        order = [s for r in range(a.rounds) for s in (["peer", "ours"] if r % 2 == 0 else ["ours", "peer"])]
        for server in order:  # alternating
            command, args, env = servers[server]
            out = subprocess.run([os.path.join(v, "bin", "python"), driver, server, command, json.dumps(args), json.dumps(env), str(a.calls)],
                                 capture_output=True, text=True, timeout=900)
            if out.returncode != 0:
                print(f"| {client_name} | {server} | failed: {out.stderr.strip().splitlines()[-1:]} |")
                continue
            results.setdefault((client_name, server), []).append(json.loads(out.stdout.strip().splitlines()[-1]))
        for server in ["peer", "ours"]:
            rows = results.get((client_name, server), [])
            if not rows:
                continue
            med = lambda k: sorted(r[k] for r in rows)[len(rows) // 2]
            print(f"| {client_name} | {server} | {med('cold_p50_ms'):.1f} ms | {med('p50_ms'):.2f} ms | {med('p99_ms'):.2f} ms | {med('calls_per_s_1'):.0f} | {med('calls_per_s_16'):.0f} | {med('rss_kib')/1024:.1f} MiB |")
        ours, peer_r = results.get((client_name, "ours")), results.get((client_name, "peer"))
        if ours and peer_r:
            m = lambda rows, k: sorted(r[k] for r in rows)[len(rows) // 2]
            print(f"| {client_name} | ours vs peer | {m(peer_r,'cold_p50_ms')/m(ours,'cold_p50_ms'):.1f}× faster | {m(peer_r,'p50_ms')/m(ours,'p50_ms'):.2f}× faster | | | {m(ours,'calls_per_s_16')/m(peer_r,'calls_per_s_16'):.1f}× | |")
            rounds.append((client_name, [(p["p50_ms"], o["p50_ms"]) for o, p in zip(ours, peer_r)]))
    # The TypeScript SDK (Claude Desktop/Code, Cursor and Inspector build on it), when node
    # and npm are here; it also reports whether the client warned about our schemas.
    ts = os.path.join(WORK, "ts")
    if shutil.which("node") and shutil.which("npm"):
        if not os.path.isdir(os.path.join(ts, "node_modules", "@modelcontextprotocol", "sdk")):
            os.makedirs(ts, exist_ok=True)
            subprocess.run(["npm", "install", "--silent", "--no-audit", "--no-fund", "@modelcontextprotocol/sdk@1"], cwd=ts, check=True)
        out = subprocess.run(["node", os.path.join(ROOT, "benches", "clients_ts.mjs"), ts, os.path.abspath(a.binary), policy,
                              servers["peer"][0], os.path.join(box, "jail"), str(a.calls), str(a.rounds)],
                             capture_output=True, text=True, timeout=1800)
        for line in out.stdout.splitlines():
            if line.startswith("|") or line.startswith("client warnings"):
                print(line)
            if line.startswith("rounds "):
                rounds.append(("TypeScript SDK", [tuple(r) for r in json.loads(line[len("rounds "):])]))
    print("\nrun p50, peer / ours, per round (each round one run of each server, alternating):\n")
    print("| client | rounds (peer / ours run p50) | median | worst |")
    print("|---|---|---|---|")
    for client_name, pairs in rounds:
        ratios = [p / o for p, o in pairs]
        ordered = sorted(ratios)
        each = ", ".join(f"{p / o:.2f}× ({p:.2f}/{o:.2f})" for p, o in pairs)
        print(f"| {client_name} | {each} | {ordered[len(ordered) // 2]:.2f}× | {ordered[0]:.2f}× |")
    shutil.rmtree(box, ignore_errors=True)


if __name__ == "__main__":
    main()
