"""Drive `safe-mcp files` with the official Python MCP SDK and validate every result.

usage: e2e_files_client.py SAFE_MCP_BINARY POLICY_FILE
Exits non-zero on any mismatch.
"""
import asyncio
import json
import sys

from mcp_compat import stdio_session, checked_call, field

async def main(binary: str, policy: str) -> None:
    async with stdio_session(binary, ["files", "--config", policy]) as (session, _):
        tools = {t.name: t for t in (await session.list_tools()).tools}
        expected = ["apply_plan", "list_files", "move_file", "plan_organize", "redo_last_action", "undo_last_action"]
        assert sorted(tools) == expected, sorted(tools)

        async def call(name, args, code):
            result, envelope = await checked_call(session, tools, name, args)
            first = result.content[0].text.split("\n", 1)[0]
            assert first == f"{envelope['code']}: {envelope['reason']}".split("\n")[0], f"{name}: the text block does not open with the verdict: {first!r}"
            assert envelope["code"] == code, f"{name} {args}: {envelope['code']} != {code}: {envelope['reason']}"
            assert field(result, "is_error", "isError") == (not envelope["ok"])
            print(f"{name} {json.dumps(args)} -> {envelope['code']}")
            return envelope

        await call("list_files", {}, "OK")
        plan = await call("plan_organize", {}, "OK")
        await call("apply_plan", {"plan_id": plan["detail"]["plan_id"]}, "OK")
        await call("apply_plan", {"plan_id": plan["detail"]["plan_id"]}, "INVALID_REQUEST")
        await call("move_file", {"src": "setup.exe", "dest": "Installers/setup.exe"}, "OK")
        await call("move_file", {"src": "../x", "dest": "y"}, "PATH_ESCAPE")
        await call("move_file", {"src": "Installers/setup.exe", "dest": "Documents/report.pdf"}, "CONFLICT")
        await call("undo_last_action", {}, "OK")
        await call("redo_last_action", {}, "OK")
        await call("move_file", {"src": 1}, "INVALID_REQUEST")
    print("validated every files result against its output schema")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
