#!/bin/bash
# The audit shipping tests under load (issue 50, item 4): two runs at once and a CPU hog
# beside them, ten times. A write interrupted by a signal is retried as the same write, so
# the receivers see each record once and in order (the tests assert exactly that: no gap,
# no duplicate); a run that fails prints its panic.
# Usage: scripts/shipping_under_load.sh [ROUNDS]   (after `cargo test --no-run`)
set -u
cd "$(dirname "$0")/.."
rounds=${1:-10}
bin=$(cargo test -q -p safe-mcp --test all --no-run --message-format=json 2>/dev/null |
  python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "all":
        print(m["executable"])')
logs=$(mktemp -d)
sh -c 'while :; do :; done' &
hog=$!
trap 'kill $hog 2>/dev/null' EXIT
pass=0
fail=0
for i in $(seq 1 "$rounds"); do
  RUST_BACKTRACE=0 "$bin" --test-threads 2 shipping:: >"$logs/$i-a.log" 2>&1 &
  a=$!
  RUST_BACKTRACE=0 "$bin" --test-threads 2 shipping:: >"$logs/$i-b.log" 2>&1 &
  b=$!
  for p in $a $b; do
    if wait "$p"; then pass=$((pass + 1)); else fail=$((fail + 1)); fi
  done
done
echo "shipping under load: $pass passed, $fail failed ($((2 * rounds)) runs, two at once, with a CPU hog)"
grep -h -A6 "panicked" "$logs"/*.log | head -60
rm -rf "$logs"
[ "$fail" -eq 0 ]
