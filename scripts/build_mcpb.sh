#!/usr/bin/env bash
# Builds the MCP bundle (.mcpb): the safe-mcp binary and a manifest whose one setting is the
# project directory (a `directory` user_config), started as `safe-mcp terminal --jail DIR`.
# The manifest is validated, and the bundle packed, by the bundle format's own tool
# (@anthropic-ai/mcpb, from npm, pinned below), and the packed bundle is then unpacked and
# its server started as a client would, over a real MCP exchange on stdio.
#
#   scripts/build_mcpb.sh [BINARY] [OUT_DIR]
#
# BINARY defaults to target/release/safe-mcp (built if missing); OUT_DIR to target/mcpb.
# Writes OUT_DIR/safe-mcp-<version>-linux-<arch>.mcpb and prints its SHA-256 (the registry's
# `fileSha256` for an mcpb package).
set -euo pipefail
cd "$(dirname "$0")/.."

MCPB_VERSION=2.1.2
binary=${1:-target/release/safe-mcp}
out=$(mkdir -p "${2:-target/mcpb}" && cd "${2:-target/mcpb}" && pwd)
if [ ! -x "$binary" ]; then
  cargo build --release -p safe-mcp
fi
binary=$(cd "$(dirname "$binary")" && pwd)/$(basename "$binary")
version=$("$binary" --version | awk '{print $2}')
arch=$(uname -m)

echo "== the bundle's tool (@anthropic-ai/mcpb $MCPB_VERSION)"
tools="$out/tools-$MCPB_VERSION"
if [ ! -x "$tools/node_modules/.bin/mcpb" ]; then
  mkdir -p "$tools"
  npm install --silent --no-audit --no-fund --prefix "$tools" "@anthropic-ai/mcpb@$MCPB_VERSION"
fi
mcpb="$tools/node_modules/.bin/mcpb"

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/server"
install -m 0755 "$binary" "$stage/server/safe-mcp"
cp LICENSE "$stage/LICENSE"
python3 - "$stage/manifest.json" "$version" <<'EOF'
import json, sys
path, version = sys.argv[1], sys.argv[2]
manifest = {
    "manifest_version": "0.3",
    "name": "safe-mcp",
    "display_name": "safe-mcp terminal",
    "version": version,
    "description": "A terminal for AI agents: allowlisted commands, kernel-confined to one directory, audited.",
    "long_description": (
        "Runs an operator-allowlisted set of commands for the model: deny by default, no shell, "
        "jailed to the project directory, confined by the kernel (a private view, Landlock, "
        "seccomp, no capabilities), time- and output-bounded, secrets redacted, and every "
        "attempt in a tamper-evident audit trail written before anything runs. On its first "
        "start it writes the policy `safe-mcp init` would for the directory, under "
        "$XDG_CONFIG_HOME/safe-mcp/ (outside the project); edit that file to allow more."
    ),
    "author": {"name": "safe-mcp authors", "url": "https://github.com/safe-mcp/safe-mcp"},
    "repository": {"type": "git", "url": "https://github.com/safe-mcp/safe-mcp"},
    "homepage": "https://github.com/safe-mcp/safe-mcp",
    "license": "Apache-2.0",
    "keywords": ["terminal", "sandbox", "landlock", "seccomp", "audit"],
    "server": {
        "type": "binary",
        "entry_point": "server/safe-mcp",
        "mcp_config": {
            "command": "${__dirname}/server/safe-mcp",
            "args": ["terminal", "--jail", "${user_config.jail}"],
        },
    },
    "user_config": {
        "jail": {
            "type": "directory",
            "title": "Project directory",
            "description": "The one directory the model works in: commands run there and may write only there.",
            "required": True,
        }
    },
    "compatibility": {"platforms": ["linux"]},
}
with open(path, "w") as f:
    json.dump(manifest, f, indent=2)
    f.write("\n")
EOF

echo "== validate the manifest"
"$mcpb" validate "$stage/manifest.json"
# The validator's positive control: a user_config of a type the format has not must fail.
bad=$(mktemp -d)
sed 's/"type": "directory"/"type": "folder"/' "$stage/manifest.json" > "$bad/manifest.json"
if "$mcpb" validate "$bad/manifest.json" >/dev/null 2>&1; then
  echo "mcpb validate passed a manifest with a user_config of type \"folder\""
  exit 1
fi
rm -rf "$bad"

echo "== pack"
bundle="$out/safe-mcp-$version-linux-$arch.mcpb"
rm -f "$bundle"
"$mcpb" pack "$stage" "$bundle" >/dev/null
"$mcpb" info "$bundle"

echo "== the packed bundle's server, started as the manifest says"
check=$(mktemp -d)
trap 'rm -rf "$stage" "$check"' EXIT
"$mcpb" unpack "$bundle" "$check/bundle" >/dev/null
mkdir -p "$check/project" "$check/config"
python3 - "$check" <<'EOF'
import json, os, signal, subprocess, sys
check = sys.argv[1]
# A server that never answers fails the check instead of hanging it.
signal.alarm(120)
manifest = json.load(open(os.path.join(check, "bundle/manifest.json")))
config = manifest["server"]["mcp_config"]
values = {"${__dirname}": os.path.join(check, "bundle"), "${user_config.jail}": os.path.join(check, "project")}
def fill(s):
    for k, v in values.items():
        s = s.replace(k, v)
    return s
argv = [fill(config["command"])] + [fill(a) for a in config["args"]]
env = {"HOME": os.environ["HOME"], "PATH": "/usr/bin:/bin", "XDG_CONFIG_HOME": os.path.join(check, "config")}
lines = [
    {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bundle-check", "version": "1"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "run_command", "arguments": {"command": "echo bundled"}}},
]
errors = open(os.path.join(check, "server.stderr"), "w+")
proc = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors, text=True)
answers = {}
for line in lines:
    proc.stdin.write(json.dumps(line) + "\n")
    proc.stdin.flush()
    if "id" in line:
        while line["id"] not in answers:
            got = proc.stdout.readline()
            if not got:
                errors.seek(0)
                sys.exit(f"the server ended early: {errors.read()}")
            msg = json.loads(got)
            if "id" in msg:
                answers[msg["id"]] = msg
proc.stdin.close()
proc.wait(timeout=30)
result = answers[2]["result"]["structuredContent"]
if result["code"] != "OK" or result["detail"]["stdout"] != "bundled\n":
    sys.exit(f"the bundled server's run: {result}")
policy = os.path.join(check, "config/safe-mcp/project.toml")
if not os.path.exists(policy):
    sys.exit(f"no policy at {policy}")
print(f"  {argv[0]} {' '.join(argv[1:])}: initialize, run_command echo: OK; policy {policy}")
EOF
sha=$(sha256sum "$bundle" | awk '{print $1}')
echo "wrote $bundle"
echo "fileSha256 $sha"
