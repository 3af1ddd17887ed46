#!/usr/bin/env bash
# scripts/bench_attacks, briefly: two attack classes (copy, stale_base) after honest streaks of
# one unit, on 2 000 Fashion-MNIST images. The table has a row per attack whose bad units add
# up (merged + refused + undecided = returned), shares in [0, 1], honest results counted, and
# the copies refused as copies (skipped without Debian's dataset-fashion-mnist).
#   bench_attacks_smoke.sh SOURCE_ROOT   (TESSERA_BENCH, TESSERA_DATA: the built programs)
set -euo pipefail
root=$1
if [ ! -d /usr/share/datasets/fashion-mnist ]; then
  echo "SKIP: /usr/share/datasets/fashion-mnist is missing (scripts/install-deps installs it)"
  exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/tessera-attacks-XXXXXX")
trap 'rm -rf "$work"' EXIT
"$root/scripts/bench_attacks" --smoke --out "$work/out" > "$work/log" 2>&1 || { tail -40 "$work/log"; exit 1; }
python3 - "$work/out/attacks.csv" <<'PY'
import csv, sys
rows = {r["attack"]: r for r in csv.DictReader(open(sys.argv[1]))}
assert set(rows) == {"copy", "stale_base"}, rows
for r in rows.values():
    returned = int(r["bad_returned"])
    assert returned >= 1, r
    assert int(r["merged"]) + int(r["refused"]) + int(r["undecided"]) == returned, r
    assert 0 <= float(r["merged_upper95"]) <= 1, r
    assert int(r["honest_returned"]) > returned, r
    assert 0 <= int(r["honest_refused"]) <= int(r["honest_returned"]), r
copies = rows["copy"]
assert int(copies["refused"]) >= 1 and "copied" in copies["refusals"], copies
print("bench_attacks smoke:", {k: (v["bad_returned"], v["merged"], v["refused"]) for k, v in rows.items()})
PY
