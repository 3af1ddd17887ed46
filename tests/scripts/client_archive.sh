#!/usr/bin/env bash
# scripts/client-archive refuses a missing client, an existing folder (left as it was) and an
# unknown option, and packs the built client into a folder that runs elsewhere: the folder is
# moved after packing, every library `ldd` resolves for it in an empty environment lies inside
# it (or is glibc's), and the moved client, run in an empty environment from another directory,
# trains one unit for a real server on loopback, which accepts it (skipped without Debian's
# dataset-fashion-mnist).
#   client_archive.sh SOURCE_ROOT   (TESSERA_SERVER, TESSERA_CLIENT, TESSERA_DATA: the built programs)
set -uo pipefail
root=$1
if [ ! -d /usr/share/datasets/fashion-mnist ]; then
  echo "SKIP: /usr/share/datasets/fashion-mnist is missing (scripts/install-deps installs it)"
  exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/tessera-archive-XXXXXX")
server_pid=""
cleanup() {
  [ -z "$server_pid" ] || { kill -TERM "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null; }
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

# Refusals, each with its reason and nothing touched: no client there, a folder that exists.
message=$("$root/scripts/client-archive" --client "$work/no-such-client" --folder "$work/none" 2>&1) &&
  fail "packing a missing client succeeded"
[[ "$message" == *"no tessera-client at $work/no-such-client"* ]] || fail "unclear refusal: $message"
[ ! -e "$work/none" ] || fail "a refused pack left $work/none"
mkdir -p "$work/taken" && echo kept > "$work/taken/file"
message=$("$root/scripts/client-archive" --client "$TESSERA_CLIENT" --folder "$work/taken" 2>&1) &&
  fail "packing into an existing folder succeeded"
[[ "$message" == *"exists; give a new folder"* ]] || fail "unclear refusal: $message"
[ "$(ls "$work/taken")" = file ] && [ "$(cat "$work/taken/file")" = kept ] || fail "an existing folder was changed"
"$root/scripts/client-archive" --bogus > /dev/null 2>&1; [ $? -eq 2 ] || fail "an unknown option did not exit 2"

"$root/scripts/client-archive" --client "$TESSERA_CLIENT" --folder "$work/packed/tessera-client" > "$work/pack.log" 2>&1 ||
  { cat "$work/pack.log"; fail "scripts/client-archive"; }
cat "$work/pack.log"
mkdir -p "$work/elsewhere"
mv "$work/packed/tessera-client" "$work/elsewhere/"
client=$work/elsewhere/tessera-client/bin/tessera-client
inside=$work/elsewhere/tessera-client/bin/../lib/

# Every library from the folder but glibc's and the loader.
libraries=$(env -i /usr/bin/ldd "$client") || fail "ldd of the moved client"
echo "$libraries" | grep -q "not found" && { echo "$libraries"; fail "a library is not found"; }
outside=$(echo "$libraries" | awk '$2 == "=>" {print $1, $3}' | grep -vF " $inside" |
  grep -Ev '^(libc|libm|libdl|libpthread|librt|libresolv)\.so' || true)
[ -z "$outside" ] || { echo "$outside"; fail "libraries resolved outside the folder"; }
echo "$libraries" | grep -qF "libtorch_cpu.so.1.13 => $inside" || fail "LibTorch is not loaded from the folder"

# A real server with a small classifier task.
"$TESSERA_DATA" prepare fashion-mnist --pixels --out "$work/data" --limit 256 --shard-size 128 --threads 1 \
  > "$work/prepare.log" 2>&1 || { cat "$work/prepare.log"; fail "tessera-data prepare"; }
"$TESSERA_SERVER" init --state "$work/server" > "$work/init.log" 2>&1 &&
  "$TESSERA_SERVER" task create --state "$work/server" --data "$work/data" --model cnn --local-steps 5 --batch 16 \
    --deadline 10m --target-seconds 0 > "$work/task.log" 2>&1 || { cat "$work"/*.log; fail "server init"; }
"$TESSERA_SERVER" run --state "$work/server" --listen 127.0.0.1:0 > "$work/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 150); do
  grep -q listening "$work/server.log" && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$work/server.log"; fail "the server stopped"; }
  sleep 0.2
done
port=$(sed -n 's|.*listening on http://127\.0\.0\.1:\([0-9]*\).*|\1|p' "$work/server.log" | head -n 1)
[ -n "$port" ] || { cat "$work/server.log"; fail "the server did not listen"; }

# The moved client, nothing in its environment, from another directory: one unit.
(cd "$work" && env -i HOME="$work" OMP_NUM_THREADS=1 "$client" --server "http://127.0.0.1:$port" \
  --state "$work/volunteer" --device cpu --threads 1 --name packed --once --quiet) > "$work/client.log" 2>&1 ||
  { cat "$work/client.log"; fail "the packed client's unit"; }
# Its result is validated after the upload: wait for the verdict.
accepted=0
for _ in $(seq 60); do
  accepted=$(curl -sf "http://127.0.0.1:$port/api/v1/volunteers" |
    python3 -c 'import json, sys; print(sum(v["accepted"] for v in json.load(sys.stdin)["volunteers"] if v["name"] == "packed"))') ||
    fail "reading the server's volunteers"
  [ "$accepted" -ge 1 ] && break
  sleep 0.5
done
echo "the packed client's results accepted: $accepted"
[ "$accepted" -ge 1 ] || { cat "$work/client.log" "$work/server.log"; fail "no result of the packed client accepted"; }
echo "PASS"
