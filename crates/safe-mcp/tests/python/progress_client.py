"""Progress through the official Python SDK: with a progress callback (the SDK sends a
progressToken) the server reports output as it comes; without one, it sends nothing.

usage: progress_client.py SAFE_MCP_BINARY POLICY_FILE
Prints one JSON line: {"with": [[progress, message], ...], "without": N}.
"""
import asyncio
import json
import sys

from mcp_compat import stdio_session, envelope_of, field

SCRIPT = "for i in 1 2 3 4 5 6; do echo step $i; sleep 0.3; done"


async def main(binary: str, policy: str) -> None:
    unasked = []

    async def on_message(message) -> None:
        # Every progress notification the server sends (SDK 1.x wraps it in `.root`).
        note = getattr(message, "root", message)
        if getattr(note, "method", None) == "notifications/progress":
            unasked.append(note.params.progress)

    async with stdio_session(binary, ["terminal", "--config", policy], message_handler=on_message) as (session, _):
        seen = []

        async def on_progress(progress, total, message) -> None:
            seen.append([progress, message])

        result = await session.call_tool(
            "run_command", {"command": ["sh", "-c", SCRIPT]}, progress_callback=on_progress
        )
        assert envelope_of(result)["code"] == "OK", result
        before = len(unasked)
        result = await session.call_tool("run_command", {"command": ["sh", "-c", SCRIPT]})
        assert envelope_of(result)["code"] == "OK", result
        await asyncio.sleep(0.5)
        print(json.dumps({"with": seen, "without": len(unasked) - before}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
