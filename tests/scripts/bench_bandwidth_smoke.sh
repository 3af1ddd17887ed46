#!/usr/bin/env bash
# scripts/bench_bandwidth, briefly: on a small pixel dataset, the cnn task with the defaults and
# with f32 down and up, two real volunteers each for 15 s; both runs merge units, the volunteers'
# counts of the bytes they moved add up, and the defaults move fewer bytes each way per merged
# unit than f32 (skipped without Debian's dataset-fashion-mnist).
#   bench_bandwidth_smoke.sh SOURCE_ROOT   (TESSERA_SERVER, TESSERA_CLIENT, TESSERA_DATA: the built programs)
set -euo pipefail
root=$1
if [ ! -d /usr/share/datasets/fashion-mnist ]; then
  echo "SKIP: /usr/share/datasets/fashion-mnist is missing (scripts/install-deps installs it)"
  exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/tessera-bandwidth-XXXXXX")
trap 'rm -rf "$work"' EXIT
"$TESSERA_DATA" prepare fashion-mnist --out "$work/pixels" --pixels --limit 2000 --shard-size 500 > /dev/null 2>&1
"$root/scripts/bench_bandwidth" --model cnn --minutes 0.25 --data "$work/pixels" --out "$work/out"
python3 - "$work/out/bandwidth.csv" <<'PY'
import csv, sys
rows = {r["config"]: r for r in csv.DictReader(open(sys.argv[1]))}
assert set(rows) == {"defaults", "f32"}, rows
for name, r in rows.items():
    assert int(r["merged"]) > 0 and int(r["results"]) >= int(r["merged"]) + int(r["refused"]), (name, r)
    assert int(r["model_bytes"]) > 0 and int(r["shard_bytes"]) > 0, (name, r)  # the first unit's, at least
    assert int(r["result_bytes"]) > 0, (name, r)
assert int(rows["f32"]["patch_bytes"]) == 0, rows["f32"]  # patches off
d, f = rows["defaults"], rows["f32"]
assert float(d["down_per_merged"]) < float(f["down_per_merged"]), (d, f)
assert float(d["up_per_merged"]) < float(f["up_per_merged"]) / 4, (d, f)  # int4 against f32
print("ok")
PY
