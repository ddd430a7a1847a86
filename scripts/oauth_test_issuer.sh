#!/usr/bin/env bash
# A test issuer for `safe-mcp terminal --http` behind [http.auth] mode = "oauth", with
# openssl and python3 only: an RSA key, the JWKS file the policy names, and a token for it.
#
#   scripts/oauth_test_issuer.sh DIR ISSUER AUDIENCE SUB [SCOPE]
#
# writes DIR/issuer.pem (keep it private: it signs tokens), DIR/jwks.json (the public key,
# for jwks_file), and prints a token valid for an hour. Then:
#
#   safe-mcp auth check-token --config POLICY "$TOKEN"   # accepted, or why not
#
# For trying the set-up out: a real deployment gets its tokens from its identity provider.
set -euo pipefail
dir=$1 issuer=$2 audience=$3 sub=$4 scope=${5:-mcp:terminal}
mkdir -p "$dir"
[ -f "$dir/issuer.pem" ] || openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$dir/issuer.pem" 2>/dev/null
chmod 600 "$dir/issuer.pem"
modulus=$(openssl rsa -in "$dir/issuer.pem" -noout -modulus | cut -d= -f2)
python3 - "$dir" "$modulus" "$issuer" "$audience" "$sub" "$scope" <<'PY'
import base64, json, subprocess, sys, time
d, modulus, iss, aud, sub, scope = sys.argv[1:]
b64 = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=").decode()
n = b64(bytes.fromhex(modulus))
json.dump({"keys": [{"kty": "RSA", "kid": "test-key", "use": "sig", "alg": "RS256", "n": n, "e": "AQAB"}]},
          open(f"{d}/jwks.json", "w"))
now = int(time.time())
head = b64(json.dumps({"alg": "RS256", "typ": "JWT", "kid": "test-key"}).encode())
body = b64(json.dumps({"iss": iss, "aud": aud, "sub": sub, "scope": scope,
                       "iat": now, "nbf": now - 5, "exp": now + 3600}).encode())
signed = f"{head}.{body}".encode()
sig = subprocess.run(["openssl", "dgst", "-sha256", "-sign", f"{d}/issuer.pem"],
                     input=signed, capture_output=True, check=True).stdout
print(f"{head}.{body}.{b64(sig)}")
PY
