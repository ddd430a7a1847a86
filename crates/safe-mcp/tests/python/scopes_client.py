"""Approval scopes through the official Python SDK (issue 53): the form a person answers in
the client, with a scope chosen. The elicitation callback approves `git push origin main`
for the session with the branch (place 3) free; the push of another branch then runs
without a second question.

usage: scopes_client.py SAFE_MCP_BINARY POLICY_FILE
Prints one JSON line: {"first": CODE, "second": CODE, "asked": N, "scope_field": BOOL}.
"""
import asyncio
import json
import sys

from mcp import types
from mcp_compat import stdio_session, checked_call, field

asked = []


async def person(context, params):
    """A person who reads the form and chooses: yes, for this session, the branch free."""
    schema = field(params, "requestedSchema", "requested_schema")
    asked.append(schema)
    return types.ElicitResult(action="accept", content={"approve": True, "scope": "session", "free": ["3"]})


async def main(binary: str, policy: str) -> None:
    async with stdio_session(binary, ["terminal", "--config", policy], elicitation_callback=person) as (session, _):
        tools = {t.name: t for t in (await session.list_tools()).tools}

        async def push(branch):
            args = {"command": f"git push origin {branch}", "cwd": "repo"}
            return (await checked_call(session, tools, "run_command", args))[1]

        first = await push("main")
        second = await push("feature")
        offered = bool(asked) and "scope" in asked[0].get("properties", {}) and "free" in asked[0].get("properties", {})
        print(json.dumps({"first": first["code"], "second": second["code"], "asked": len(asked),
                          "scope_field": offered}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
