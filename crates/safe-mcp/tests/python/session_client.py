"""A process session through the official Python SDK: start a line-echoing loop, write to
it, read its answer, stop it; every result matches the tool's output schema.

usage: session_client.py SAFE_MCP_BINARY POLICY_FILE
Prints one JSON line: {"read": "...", "stopped": {...}, "after": "CODE"}.
"""
import asyncio
import json
import sys

from mcp_compat import stdio_session, checked_call, field


async def main(binary: str, policy: str) -> None:
    async with stdio_session(binary, ["terminal", "--config", policy]) as (session, _):
        tools = {t.name: t for t in (await session.list_tools()).tools}

        async def call(name, args):
            return (await checked_call(session, tools, name, args))[1]

        started = await call("start_process", {"command": ["sh", "-c", "while read l; do echo echo:$l; done"]})
        assert started["code"] == "OK", started
        handle = started["detail"]["handle"]
        wrote = await call("write_process_input", {"handle": handle, "data": "from python\n"})
        assert wrote["code"] == "OK", wrote
        text = ""
        for _ in range(10):
            got = await call("read_process_output", {"handle": handle, "wait_seconds": 2})
            text += got["detail"]["stdout"]
            if "echo:" in text:
                break
        listed = await call("list_processes", {})
        assert listed["detail"]["processes"][0]["handle"] == handle, listed
        stopped = await call("stop_process", {"handle": handle})
        after = await call("read_process_output", {"handle": handle})
        print(json.dumps({"read": text, "stopped": stopped["detail"], "after": after["code"]}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
