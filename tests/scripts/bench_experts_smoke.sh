#!/usr/bin/env bash
# scripts/bench_experts, briefly: on 2 000 Fashion-MNIST images, the monolithic run and two
# experts with their router at 1 500 samples; the table holds the monolithic row and the group
# under every routing rule, class-routed ones included, each with a CAS in [0, 1], a finite FID
# and bytes per unit, the group's with the router's accuracy (skipped without Debian's
# dataset-fashion-mnist).
#   bench_experts_smoke.sh SOURCE_ROOT   (TESSERA_BENCH, TESSERA_DATA: the built programs)
set -euo pipefail
root=$1
if [ ! -d /usr/share/datasets/fashion-mnist ]; then
  echo "SKIP: /usr/share/datasets/fashion-mnist is missing (scripts/install-deps installs it)"
  exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/tessera-experts-XXXXXX")
trap 'rm -rf "$work"' EXIT
"$root/scripts/bench_experts" --smoke --out "$work/out" > "$work/log" 2>&1 || { tail -40 "$work/log"; exit 1; }
python3 - "$work/out/experts-all.csv" <<'PY'
import csv, math, sys
rows = list(csv.DictReader(open(sys.argv[1])))
mono = [r for r in rows if r["experts"] == "1"]
group = {r["routing"]: r for r in rows if r["experts"] == "2"}
assert len(mono) == 1 and mono[0]["run"] == "fedasync" and float(mono[0]["router_accuracy"]) == -1, rows
assert set(group) == {"top1", "top2", "all", "top1-class", "top2-class", "all-class"}, rows
for r in rows:
    assert r["seed"] == "1" and r["expert_model"] == "dit-tiny", r
    assert 0 <= float(r["cas"]) <= 1 and math.isfinite(float(r["fid"])) and float(r["fid"]) > 0, r
    assert int(r["samples"]) > 0 and float(r["mb_down_per_unit"]) > 0 and float(r["mb_up_per_unit"]) > 0, r
for r in group.values():
    assert r["run"] == "fedasync-experts" and 0 <= float(r["router_accuracy"]) <= 1, r
print("ok:", len(rows), "rows")
PY
