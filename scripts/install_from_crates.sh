#!/usr/bin/env bash
# Packages every crate of the workspace and installs safe-mcp from those .crate files alone,
# offline, into a scratch root, then runs the installed binary: what `cargo install
# safe-mcp` does once the crates are on crates.io, with nothing taken from this checkout.
#
#   scripts/install_from_crates.sh [SCRATCH]      (default: a fresh temporary directory)
#
# The .crate files and the registry dependencies (`cargo vendor`; it takes every platform's, so
# a crate for another OS may be downloaded once) are
# put in one directory source that replaces crates.io; `cargo install --locked --offline`
# then builds from it with the lock file packaged in the safe-mcp crate. The packaging is not
# verified by `cargo package` itself (`--no-verify`): the install compiles every packaged
# crate, which is the verification, and doing it twice would double the time.
set -euo pipefail
cd "$(dirname "$0")/.."

scratch=${1:-$(mktemp -d)}
mkdir -p "$scratch"
vendor="$scratch/vendor"
root="$scratch/root"
rm -rf "$vendor" "$root"

echo "== cargo package (every crate)"
cargo package --workspace --no-verify --offline

echo "== the registry's crates (cargo vendor: every platform's, so some may be downloaded once)"
cargo vendor --versioned-dirs --quiet "$vendor" >/dev/null

echo "== the packaged crates, as a directory source"
version=$(cargo metadata --no-deps --format-version 1 --offline |
  python3 -c 'import json,sys; print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"]=="safe-mcp"))')
python3 - "$vendor" target/package/*-"$version".crate <<'EOF'
import hashlib, json, os, sys, tarfile
vendor, crates = sys.argv[1], sys.argv[2:]
for crate in crates:
    with open(crate, "rb") as f:
        package = hashlib.sha256(f.read()).hexdigest()
    name = os.path.basename(crate)[: -len(".crate")]
    with tarfile.open(crate) as tar:
        tar.extractall(vendor, filter="data")
    top = os.path.join(vendor, name)
    files = {}
    for d, _, names in os.walk(top):
        for n in names:
            path = os.path.join(d, n)
            with open(path, "rb") as f:
                files[os.path.relpath(path, top)] = hashlib.sha256(f.read()).hexdigest()
    with open(os.path.join(top, ".cargo-checksum.json"), "w") as f:
        json.dump({"files": files, "package": package}, f)
    print(f"  {name}: {len(files)} files")
EOF

echo "== cargo install safe-mcp, offline, from those crates alone"
CARGO_NET_OFFLINE=true CARGO_TARGET_DIR="$scratch/target" cargo install safe-mcp \
  --version "=$version" --locked --offline --root "$root" \
  --config 'source.crates-io.replace-with="packaged"' \
  --config "source.packaged.directory=\"$vendor\""

echo "== the installed binary"
"$root/bin/safe-mcp" --version
"$root/bin/safe-mcp" doctor
