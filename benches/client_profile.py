#!/usr/bin/env python3
"""Where a Python MCP client's time goes on one result: ours beside the peer's.

usage: benches/client_profile.py [--calls N] [--binary PATH] [--venv py-sdk2]
Uses the venvs benches/clients.py makes under target/bench-clients/. Runs N
run_command("echo hi") calls (shell_execute for the peer) through the Python SDK's stdio
client under cProfile, once per server, and sums each function's own time into groups by
where it lives: message models (pydantic), outputSchema validation (jsonschema and the
libraries it loads), JSON text (the json module), the SDK's own code, the event loop and
streams (asyncio, anyio), the rest; and the time blocked waiting for the server (epoll),
which is the server's time seen from the client. Prints microseconds per call for each
group (wall clock, as cProfile counts). cProfile
slows everything it sees, so compare the groups and the two servers, not the totals with
the unprofiled bench.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORK = os.path.join(ROOT, "target", "bench-clients")

DRIVER = textwrap.dedent(r'''
    import asyncio, cProfile, json, pstats, sys
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    kind, command, args, env, calls = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4]), int(sys.argv[5])
    tool, tool_args = ("run_command", {"command": "echo hi"}) if kind == "ours" else ("shell_execute", {"command": ["echo", "hi"], "directory": env.get("BENCH_DIR", "/tmp")})
    GROUPS = [("waiting for the server (epoll)", ("epoll", "select.poll")),
              ("outputSchema validation", ("jsonschema", "referencing", "rpds", "attrs")),
              ("message models (pydantic)", ("pydantic",)),
              ("JSON text", ("/json/",)),
              ("the SDK", ("/mcp/",)),
              ("event loop and streams", ("asyncio", "anyio", "selectors")),]

    async def main():
        params = StdioServerParameters(command=command, args=args, env=env)
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                await s.list_tools()
                for _ in range(20):
                    await s.call_tool(tool, tool_args)
                profile = cProfile.Profile()
                profile.enable()
                for _ in range(calls):
                    await s.call_tool(tool, tool_args)
                profile.disable()
                return profile

    profile = asyncio.run(main())
    totals, rest = {}, []
    for (filename, line, name), (_, _, tottime, _, _) in pstats.Stats(profile).stats.items():
        where = filename + ":" + name
        group = next((g for g, keys in GROUPS if any(k in where for k in keys)), "the rest")
        totals[group] = totals.get(group, 0.0) + tottime
        if group == "the rest":
            rest.append((tottime, f"{filename}:{line}({name})"))
    for t, where in sorted(rest, reverse=True)[:8]:
        print(f"{kind}: the rest: {t / calls * 1e6:.0f} µs {where}", file=sys.stderr)
    print(json.dumps({g: t / calls * 1e6 for g, t in totals.items()}))
''')


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--binary", default=os.path.join(ROOT, "target", "release", "safe-mcp"))
    ap.add_argument("--venv", default="py-sdk2")
    ap.add_argument("--rest", action="store_true", help="also name the largest functions of 'the rest'")
    a = ap.parse_args()
    python = os.path.join(WORK, a.venv, "bin", "python")
    peer = os.path.join(WORK, "peer", "bin", "mcp-shell-server")
    if not (os.path.exists(python) and os.path.exists(peer)):
        sys.exit("run benches/clients.py once first: it makes the venvs under target/bench-clients/")
    box = tempfile.mkdtemp(prefix="safe-mcp-profile-")
    os.makedirs(os.path.join(box, "jail"))
    policy = os.path.join(box, "policy.toml")
    with open(policy, "w") as f:
        f.write('audit_log = "audit.jsonl"\n[terminal]\njail_root = "jail"\n[terminal.allowlist]\ncommands = ["echo"]\n')
    driver = os.path.join(box, "driver.py")
    with open(driver, "w") as f:
        f.write(DRIVER)
    servers = {
        "ours": (a.binary, ["terminal", "--config", policy], {}),
        "peer": (peer, [], {"ALLOW_COMMANDS": "echo", "BENCH_DIR": os.path.join(box, "jail")}),
    }
    rows = {}
    for server, (command, args, env) in servers.items():
        out = subprocess.run([python, driver, server, command, json.dumps(args), json.dumps(env), str(a.calls)],
                             capture_output=True, text=True, timeout=900, check=True)
        rows[server] = json.loads(out.stdout.strip().splitlines()[-1])
        if a.rest:
            print(out.stderr, end="")
    groups = sorted({g for r in rows.values() for g in r}, key=lambda g: -rows["ours"].get(g, 0))
    print(f"client time per call under cProfile, {a.venv}, {a.calls} calls (µs, wall clock)\n")
    print("| group | ours | peer |")
    print("|---|---|---|")
    for g in groups:
        print(f"| {g} | {rows['ours'].get(g, 0):.0f} | {rows['peer'].get(g, 0):.0f} |")
    print(f"| all | {sum(rows['ours'].values()):.0f} | {sum(rows['peer'].values()):.0f} |")


if __name__ == "__main__":
    main()
