#!/usr/bin/env python3
"""Takes docs/HTTP.md's screenshot of the approval page, in a real headless browser.

Starts `safe-mcp terminal` on a temporary sandbox whose `git` rule needs approval for
`push`, with `url_base` set; speaks raw JSON-RPC over stdio as a client that declares
URL-mode elicitation; asks to run `git push origin main`; when the server sends the
URL-mode elicitation, opens the page in headless Chromium (Debian's `chromium`) and saves
the screenshot; then denies on the page, so nothing runs.

Usage: scripts/approval_screenshot.py [BINARY] [OUT.png]
"""
import json
import os
import socket
import subprocess
import sys
import tempfile
import urllib.request

binary = sys.argv[1] if len(sys.argv) > 1 else "target/debug/safe-mcp"
out = os.path.abspath(sys.argv[2] if len(sys.argv) > 2 else "docs/approval-page.png")

with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]

work = tempfile.mkdtemp(prefix="safe-mcp-shot-")
jail = os.path.join(work, "project")
os.makedirs(jail)
subprocess.run(["git", "init", "-q", jail], check=True)
policy = os.path.join(work, "policy.toml")
with open(policy, "w") as f:
    f.write(f"""audit_log = "audit.jsonl"
[terminal]
jail_root = "project"
[terminal.allowlist]
commands = ["git"]
[[terminal.rules]]
command = "git"
confirm_args = ["push"]
reason = "a push publishes work"
[terminal.approvals]
url_base = "http://127.0.0.1:{port}"
timeout_seconds = 60
""")

server = subprocess.Popen([binary, "terminal", "--config", policy],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def send(message):
    server.stdin.write(json.dumps(message) + "\n")
    server.stdin.flush()


def receive():
    return json.loads(server.stdout.readline())


send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25",
    "capabilities": {"elicitation": {"form": {}, "url": {}}},
    "clientInfo": {"name": "screenshot", "version": "1"}}})
receive()
send({"jsonrpc": "2.0", "method": "notifications/initialized"})
send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
    "name": "run_command", "arguments": {"command": "git push origin main"}}})

shot = False
while True:
    message = receive()
    if message.get("method") == "elicitation/create":
        url = message["params"]["url"]
        subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu",
                        "--hide-scrollbars", "--window-size=820,560",
                        f"--screenshot={out}", url],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shot = True
        page = urllib.request.urlopen(url).read().decode()
        token = page.split('name="form_token" value="')[1].split('"')[0]
        body = f"form_token={token}&decision=deny".encode()
        request = urllib.request.Request(url, data=body, headers={"Origin": f"http://127.0.0.1:{port}"})
        urllib.request.urlopen(request).read()
        send({"jsonrpc": "2.0", "id": message["id"], "result": {"action": "accept"}})
    elif message.get("id") == 2:
        envelope = message["result"]["structuredContent"]
        print(envelope["code"], "-", envelope["reason"])
        break

server.stdin.close()
server.wait(timeout=10)
assert shot and os.path.getsize(out) > 10000, "no screenshot was taken"
print("screenshot:", out)
