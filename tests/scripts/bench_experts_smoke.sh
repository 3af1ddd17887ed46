#!/usr/bin/env bash
# scripts/bench_experts, briefly: the monolithic run and two experts with their router at 1 500
# samples, on 2 000 Fashion-MNIST images (class) or 600 captioned canvases (text). The table holds
# the monolithic row and the group under every routing rule, those routed by the condition
# included; a class row has a CAS in [0, 1] and a finite FID, a text row prompt fidelity in
# [0, 1] (and no CAS); every row bytes per unit, the group's the router's accuracy, and the
# quarter-size text experts' volunteers download under half the monolithic model's bytes
# (skipped without Debian's dataset-fashion-mnist).
#   bench_experts_smoke.sh SOURCE_ROOT [class|text]   (TESSERA_BENCH, TESSERA_DATA: the built programs)
set -euo pipefail
root=$1 task=${2:-class}
if [ ! -d /usr/share/datasets/fashion-mnist ]; then
  echo "SKIP: /usr/share/datasets/fashion-mnist is missing (scripts/install-deps installs it)"
  exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/tessera-experts-XXXXXX")
trap 'rm -rf "$work"' EXIT
"$root/scripts/bench_experts" --task "$task" --smoke --out "$work/out" > "$work/log" 2>&1 || { tail -40 "$work/log"; exit 1; }
python3 - "$work/out/experts-all.csv" "$task" <<'PY'
import csv, math, sys
rows = list(csv.DictReader(open(sys.argv[1])))
text = sys.argv[2] == "text"
prior, expert_model = ("caption", "dit-nano-text") if text else ("class", "dit-tiny")
mono = [r for r in rows if r["experts"] == "1"]
group = {r["routing"]: r for r in rows if r["experts"] == "2"}
assert len(mono) == 1 and mono[0]["run"] == "fedasync" and float(mono[0]["router_accuracy"]) == -1, rows
assert set(group) == {"top1", "top2", "all", f"top1-{prior}", f"top2-{prior}", f"all-{prior}"}, rows
share = lambda r, key: 0 <= float(r[key]) <= 1
for r in rows:
    assert r["seed"] == "1" and r["expert_model"] == expert_model, r
    if text:
        assert float(r["cas"]) == -1 and all(share(r, k) for k in ("object", "relation", "attribute", "heldout")), r
    else:
        assert share(r, "cas") and math.isfinite(float(r["fid"])) and float(r["fid"]) > 0, r
        assert float(r["object"]) == -1, r
    assert int(r["samples"]) > 0 and float(r["mb_down_per_unit"]) > 0 and float(r["mb_up_per_unit"]) > 0, r
for r in group.values():
    assert r["run"] == "fedasync-experts" and 0 <= float(r["router_accuracy"]) <= 1, r
    if text:
        assert float(r["model_mb_down_per_unit"]) < float(mono[0]["model_mb_down_per_unit"]) / 2, (r, mono)
print("ok:", len(rows), "rows")
PY
