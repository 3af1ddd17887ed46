#!/usr/bin/env bash
# scripts/demo ends every program it started, however it is ended. For each of SIGINT to the
# process group of a demo in the foreground (as Ctrl-C), SIGINT to a demo started with `&`,
# SIGTERM, SIGHUP to its process group (as a terminal's hangup) and SIGKILL of the script, a demo
# runs the built programs on a tiny captioned dataset and a free loopback port; once its server
# listens and its volunteers work, the signal is sent, and within 45 s neither a process it recorded in
# demo.pids nor any process naming its state directory may be left, and its port must be free.
#   demo_stops.sh SOURCE_ROOT   (TESSERA_SERVER, TESSERA_CLIENT, TESSERA_DATA: the built programs)
set -uo pipefail
root=$1
fashion_mnist=/usr/share/datasets/fashion-mnist
if [ ! -d "$fashion_mnist" ]; then
  echo "SKIP: $fashion_mnist is missing (Debian's dataset-fashion-mnist: scripts/install-deps installs it)"
  exit 77
fi
up_seconds=60     # a demo's time to start its server and volunteers
# After the signal, the time for everything it started to be gone: the demo's own bound (its
# volunteers 20 s, then its server 20 s, before it kills them) and a little.
gone_seconds=45

work=$(mktemp -d "${TMPDIR:-/tmp}/tessera-demo-stops-XXXXXX")
# Processes whose command line holds the text (a case's state directory); zombies have none.
# The text goes to grep on its standard input, so that grep's own command line does not hold it.
processes_naming() {
  grep -lsaF -f - /proc/[0-9]*/cmdline <<< "$1" | sed 's|^/proc/\([0-9]*\)/cmdline$|\1|'
}
cleanup() {
  local pid
  for pid in $(processes_naming "$work"); do kill -KILL "$pid" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT

# `pid:starttime`, so that a PID used again by an unrelated process is not taken for it.
identity() {
  local stat fields
  read -r stat 2>/dev/null < "/proc/$1/stat" || return 1
  read -ra fields <<< "${stat##*) }"   # from the third field, the state, on
  [ "${fields[0]}" != Z ] || return 1
  echo "${fields[19]}"
}
still_running() {  # pid:starttime…; prints the ones still running
  local entry
  for entry in "$@"; do
    [ "$(identity "${entry%%:*}")" = "${entry#*:}" ] && echo "${entry%%:*}"
  done
}
port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

mkdir -p "$work/bin"
ln -s "$TESSERA_SERVER" "$work/bin/tessera-server"
ln -s "$TESSERA_CLIENT" "$work/bin/tessera-client"
ln -s "$TESSERA_DATA" "$work/bin/tessera-data"
started=$SECONDS
# The demo's default task, dit-tiny-text on captioned canvases, on a few of them.
"$TESSERA_DATA" prepare canvases --out "$work/data" --limit 64 --shard-size 64 --autoencoder-steps 10 \
  --threads 1 > "$work/prepare.log" 2>&1 || { cat "$work/prepare.log"; echo "FAIL: tessera-data prepare"; exit 1; }
echo "tiny dataset prepared in $((SECONDS - started)) s"

# This shell has no job control: what it starts with `&` ignores SIGINT (the case a demo in the
# background must overcome).
awk '/^SigIgn:/ {print $2}' /proc/self/status > "$work/ignored" &
wait "$!"
(( 16#$(cat "$work/ignored") & 2 )) || { echo "FAIL: a program started with & here does not ignore SIGINT"; exit 1; }

failed=0
fail() { echo "FAIL ($case): $*"; failed=1; }

# run_case NAME START SIGNAL TARGET: START is `session` (a new session, as a terminal's job) or
# `background` (plain `&`); TARGET `group` (the demo's process group) or `script` (its PID).
run_case() {
  case=$1
  local how=$2 signal=$3 target=$4
  local state=$work/$case out=$work/$case.out
  local args=(--bin "$work/bin" --state "$state" --data "$work/data" --port 0 --volunteers 2)
  local begun=$SECONDS
  if [ "$how" = session ]; then
    # SIGINT at its default, as in a terminal's foreground job.
    setsid env --default-signal=INT "$root/scripts/demo" "${args[@]}" > "$out" 2>&1 &
  else
    "$root/scripts/demo" "${args[@]}" > "$out" 2>&1 &
  fi
  local demo_pid=$!

  # Up: the dashboard line printed (the port), three programs recorded, the server listening
  # and each volunteer holding a work unit.
  local port="" entries=() deadline=$((SECONDS + up_seconds)) ready=""
  while [ "$SECONDS" -lt "$deadline" ]; do
    port=$(sed -n 's|.*dashboard at http://127\.0\.0\.1:\([0-9]*\)/.*|\1|p' "$out")
    if [ -n "$port" ] && [ "$(wc -l < "$state/demo.pids" 2>/dev/null)" = 3 ] && port_in_use "$port" &&
       grep -qs '"event":"work"' "$state/volunteer-1.log" && grep -qs '"event":"work"' "$state/volunteer-2.log"; then
      ready=1
      break
    fi
    kill -0 "$demo_pid" 2>/dev/null || break
    sleep 0.2
  done
  if [ -z "$ready" ]; then
    fail "the demo did not start its server and volunteers within $up_seconds s"
    cat "$out" "$state"/*.log 2>/dev/null | tail -n 40
    for pid in $(processes_naming "$state"); do kill -KILL "$pid" 2>/dev/null; done
    return
  fi
  entries=("$demo_pid:$(identity "$demo_pid")")
  local name pid
  while read -r name pid; do
    local id
    id=$(identity "$pid") || { fail "$name ($pid) recorded in demo.pids is not running"; continue; }
    entries+=("$pid:$id")
  done < "$state/demo.pids"

  # A job killed outright is not reported on this test's output.
  [ "$signal" != KILL ] || disown "$demo_pid"
  local sent=$SECONDS
  if [ "$target" = group ]; then kill -"$signal" -- "-$demo_pid"; else kill -"$signal" "$demo_pid"; fi
  local left=() named=() busy=""
  deadline=$((SECONDS + gone_seconds))
  while :; do
    mapfile -t left < <(still_running "${entries[@]}")
    mapfile -t named < <(processes_naming "$state")
    busy=""
    port_in_use "$port" && busy=1
    [ ${#left[@]} -eq 0 ] && [ ${#named[@]} -eq 0 ] && [ -z "$busy" ] && break
    [ "$SECONDS" -lt "$deadline" ] || break
    sleep 0.2
  done
  local took=$((SECONDS - sent))
  [ ${#left[@]} -eq 0 ] || fail "still running $gone_seconds s after SIG$signal: ${left[*]}"
  [ ${#named[@]} -eq 0 ] || fail "processes naming $state still running: ${named[*]}"
  [ -z "$busy" ] || fail "port $port still accepts connections"
  for pid in "${left[@]}" "${named[@]}"; do kill -KILL "$pid" 2>/dev/null; done
  wait "$demo_pid" 2>/dev/null
  local status=$?
  for name in volunteer-1 volunteer-2; do
    grep -q "stopping after the current work unit" "$state/$name.log" || fail "$name was not asked to stop"
  done
  if [ "$signal" = KILL ]; then
    # The kernel's parent-death signal, not a kill, ended the server.
    grep -q "SIGTERM, shutting down" "$state/server.log" || fail "the server was not sent SIGTERM"
  else
    [ "$status" = 0 ] || fail "the demo exited with status $status"
    grep -q "demo: stopped" "$out" || fail "the demo did not report that it stopped"
    ! grep -q "killed" "$out" || fail "the demo had to kill a program: $(grep killed "$out")"
    grep -q "SIGTERM, shutting down" "$state/server.log" || fail "the server was not sent SIGTERM"
  fi
  echo "$case: SIG$signal to the $target; everything gone ${took} s after it (case took $((SECONDS - begun)) s)"
  # What the demo said, for a failed case (its directory goes with the test).
  [ "$failed" = 0 ] || { echo "-- $case: the demo's output"; tail -n 20 "$out"; }
}

run_case ctrl-c session INT group
run_case background-int background INT script
run_case term session TERM script
run_case hangup session HUP group
run_case kill session KILL script
echo "total $((SECONDS - started)) s"
exit $failed
