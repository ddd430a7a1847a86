"""Drive `safe-mcp terminal` with the official Python MCP SDK and validate every result.

usage: e2e_client.py SAFE_MCP_BINARY POLICY_FILE
Exits non-zero on any mismatch.
"""
import asyncio
import json
import sys

import jsonschema
from mcp_compat import stdio_session, checked_call, field

CALLS = [
    ("describe_policy", {}, "OK"),
    ("explain_command", {"command": "echo hi | wc -c"}, "OK"),
    ("explain_command", {"command": "git push --force"}, "POLICY_DENIED"),
    ("run_command", {"command": "echo \"a;b\""}, "OK"),
    ("run_command", {"command": ["echo", "argv", "form"]}, "OK"),
    ("run_command", {"command": "whoami"}, "POLICY_DENIED"),
    ("run_command", {"command": "cat /etc/passwd"}, "PATH_ESCAPE"),
    ("run_command", {"command": "echo 'open"}, "INVALID_REQUEST"),
    ("run_command", {"command": 42}, "INVALID_REQUEST"),
    ("run_command", {"command": "sleep 5", "timeout_seconds": 1}, "TIMEOUT"),
    ("run_command", {"command": "sleep 30", "timeout_seconds": 1}, "TIMEOUT"),
    ("run_command", {"command": "yes", "timeout_seconds": 60}, "OUTPUT_TRUNCATED"),
    ("run_command", {"command": "yes | head -c 100000"}, "OUTPUT_TRUNCATED"),
    # The file tools, as a coding agent uses them: write, read, edit, then a refusal of each kind.
    ("write_file", {"path": "src/app.py", "content": "def f():\n    return 1\n"}, "OK"),
    ("read_file", {"path": "src/app.py", "offset": 2, "limit": 1}, "OK"),
    ("edit_file", {"path": "src/app.py", "edits": [{"old_text": "return 1", "new_text": "return 2"}]}, "OK"),
    ("edit_file", {"path": "src/app.py", "edits": [{"old_text": "return 9", "new_text": "x"}]}, "CONFLICT"),
    ("read_file", {"path": "../escape.txt"}, "PATH_ESCAPE"),
    ("write_file", {"path": ".vscode/tasks.json", "content": "{}"}, "POLICY_DENIED"),
]


def check_reader_text(name, text, envelope):
    """The text block is the envelope written for a reader: the verdict first, then the output."""
    first = text.split("\n", 1)[0]
    ran = envelope["action"] == "run_command" and envelope["code"] in ("OK", "OUTPUT_TRUNCATED") and "exit_code" in envelope["detail"]
    verdict = first.startswith("exit ") or first.startswith("killed ") if ran else first == f"{envelope['code']}: {envelope['reason'].splitlines()[0] if envelope['reason'] else ''}"
    assert verdict, f"{name}: the text block does not open with the verdict: {first!r}"
    for stream in ("stdout", "stderr"):
        out = envelope["detail"].get(stream)
        assert not out or out in text, f"{name}: {stream} is not in the text block as printed"


async def main(binary: str, policy: str) -> None:
    async with stdio_session(binary, ["terminal", "--config", policy]) as (session, init):
        info = field(init, "server_info", "serverInfo")
        assert info.name == "safe-mcp", info
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert sorted(tools) == [
            "describe_policy", "edit_file", "explain_command", "list_processes", "read_file",
            "read_process_output", "run_command", "start_process", "stop_process", "write_file",
            "write_process_input",
        ], sorted(tools)
        for name, tool in tools.items():
            schema = field(tool, "output_schema", "outputSchema")
            assert schema, f"{name} declares no outputSchema"
            jsonschema.Draft202012Validator.check_schema(schema)
        for name, args, expected in CALLS:
            result, envelope = await checked_call(session, tools, name, args)
            if name == "read_file" and envelope["code"] == "OK":
                # A read's text block is for a reader: the verdict, the lines numbered.
                text = result.content[0].text
                assert text.startswith("OK: ") and "     2\t    return 1" in text, text
            else:
                check_reader_text(name, result.content[0].text, envelope)
            assert envelope["code"] == expected, f"{name} {args}: {envelope['code']} != {expected}: {envelope['reason']}"
            assert field(result, "is_error", "isError") == (not envelope["ok"]), f"{name}: isError mismatch"
            print(f"{name} {json.dumps(args)} -> {envelope['code']}")
    print(f"validated {len(CALLS)} results against their output schemas")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
