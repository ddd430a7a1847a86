"""Drive `safe-mcp terminal --http` with the official Python MCP SDK's Streamable HTTP client.

usage: http_client.py URL [BEARER_TOKEN]
Exits non-zero on any mismatch.
"""
import asyncio
import logging
import sys

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp_compat import envelope_of, field


class Warnings(logging.Handler):
    """Collects what the SDK logs at WARNING and above (a failed session termination)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


async def main(url: str, token: str | None) -> None:
    warnings = Warnings()
    logging.getLogger().addHandler(warnings)
    headers = {"Authorization": f"Bearer {token}"} if token else None
    async with streamable_http_client(url, http_client=create_mcp_http_client(headers=headers)) as streams:
        read, write = streams[0], streams[1]
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            info = field(init, "server_info", "serverInfo")
            assert info.name == "safe-mcp", info
            tools = {t.name for t in (await session.list_tools()).tools}
            assert "run_command" in tools and "explain_command" in tools, tools
            result = await session.call_tool("run_command", {"command": "echo over http"})
            envelope = envelope_of(result)
            assert envelope["code"] == "OK", envelope
            assert envelope["detail"]["stdout"] == "over http\n", envelope
            assert field(result, "is_error", "isError") is False, result
            explained = await session.call_tool("explain_command", {"command": "echo hi"})
            assert envelope_of(explained)["code"] == "OK"
            described = await session.call_tool("describe_policy", {})
            assert envelope_of(described)["code"] == "OK"
            listed = await session.call_tool("list_processes", {})
            assert envelope_of(listed)["code"] == "OK"
            denied = await session.call_tool("run_command", {"command": "whoami"})
            envelope = envelope_of(denied)
            assert envelope["code"] == "POLICY_DENIED", envelope
            assert field(denied, "is_error", "isError") is True, denied
    # Closing the session (DELETE) is answered as the SDK expects: no warning.
    terminations = [m for m in warnings.messages if "termination" in m.lower()]
    assert not terminations, terminations
    print("http session validated")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None))
