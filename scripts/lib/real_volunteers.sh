# Sourced by the benchmarks that run the real programs on loopback (scripts/bench_false_refusals,
# scripts/bench_bandwidth): a fresh server state with one task, `tessera-server run` on a free
# port, honest CPU volunteers, and their orderly stop. The caller sets `server` and `client`
# (the programs' paths).

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# start_real_run DIR DATASET VOLUNTEERS [TASK-CREATE-FLAG...]: sets run_port and run_pids (the
# server first). Each volunteer logs JSON lines to DIR/volunteer-N.log.
start_real_run() {
  local dir=$1 dataset=$2 volunteers=$3 i
  shift 3
  run_port=$(free_port)
  run_pids=()
  "$server" init --state "$dir/server" > /dev/null
  "$server" task create --state "$dir/server" --data "$dataset" "$@" > /dev/null
  setsid "$server" run --state "$dir/server" --listen "127.0.0.1:$run_port" --registrations-per-hour 0 \
    > "$dir/server.log" 2>&1 &
  run_pids+=($!)
  for _ in $(seq 100); do grep -q listening "$dir/server.log" 2>/dev/null && break; sleep 0.2; done
  for i in $(seq "$volunteers"); do
    setsid "$client" --server "http://127.0.0.1:$run_port" --state "$dir/volunteer-$i" --device cpu --threads 1 \
      --name "honest-$i" --json-logs > "$dir/volunteer-$i.log" 2>&1 &
    run_pids+=($!)
  done
}

# The volunteers finish their units (SIGINT) and exit.
stop_real_volunteers() {
  local pid
  for pid in "${run_pids[@]:1}"; do kill -INT "$pid" 2>/dev/null || true; done
  for pid in "${run_pids[@]:1}"; do wait "$pid" 2>/dev/null || true; done
}

stop_real_server() {
  kill -TERM "${run_pids[0]}" 2>/dev/null || true
  wait "${run_pids[0]}" 2>/dev/null || true
}

stop_real_run() {
  stop_real_volunteers
  stop_real_server
}
