#!/usr/bin/env bash
# Checks deploy/kubernetes/ offline: every manifest against the Kubernetes 1.31 schemas
# bundled in PyPI's kubernetes-validate (strict: an unknown field fails), with a positive
# control; and the ConfigMap's policy loads with `safe-mcp policy check`, its absolute paths
# moved under a scratch directory (there is no cluster here: what the pods would see).
# Usage: scripts/check_kubernetes.sh VENV SAFE_MCP_BINARY
set -euo pipefail
cd "$(dirname "$0")/.."
venv=$1
bin=$2
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check kubernetes-validate==1.31.0
"$venv/bin/kubernetes-validate" --strict -k 1.31.0 deploy/kubernetes/*.yaml deploy/kubernetes/user-namespaces/*.yaml

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
# The positive control: a misspelt pod field must fail the strict check.
sed 's/hostUsers: false/hostUser: false/' deploy/kubernetes/user-namespaces/deployment.yaml > "$scratch/bad.yaml"
grep -q 'hostUser: false' "$scratch/bad.yaml"
if "$venv/bin/kubernetes-validate" --strict -k 1.31.0 --quiet "$scratch/bad.yaml" >/dev/null 2>&1; then
  echo "kubernetes-validate passed a Deployment with a misspelt field"
  exit 1
fi

# The ConfigMap's policy, as a pod would load it.
"$venv/bin/python" - "$scratch" <<'PY'
import pathlib, sys, yaml
scratch = pathlib.Path(sys.argv[1])
docs = yaml.safe_load(open("deploy/kubernetes/configmap.yaml"))
policy = docs["data"]["policy.toml"]
for path in ["/workspace", "/var/log/safe-mcp", "/var/lib/safe-mcp", "/etc/safe-mcp/keys"]:
    policy = policy.replace(f'"{path}', f'"{scratch}/pod{path}')
    (scratch / f"pod{path}").mkdir(parents=True, exist_ok=True)
(scratch / "policy.toml").write_text(policy)
keys = scratch / "pod/etc/safe-mcp/keys"
(keys / "jwks.json").write_text('{"keys": []}\n')
key = keys / "audit-hmac.key"
key.write_bytes(b"k" * 32)
key.chmod(0o600)
PY
SAFE_MCP_SERVER_ID=safe-mcp-7d9f8c-x2k4p "$bin" policy check --config "$scratch/policy.toml"
echo "deploy/kubernetes: every manifest valid, the policy loads"
