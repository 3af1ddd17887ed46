# Sourced by scripts/bench_postgres and scripts/soak: a private PostgreSQL cluster in a temporary
# directory on a free loopback port (as the tests start one), with durable settings (fsync on)
# as a production database would run. PostgreSQL refuses to run as root: under root the
# cluster belongs to the `postgres` user the Debian package creates.
#   private_postgres_start       sets $pg_cluster and $pg_port and starts the server
#   private_postgres_restart     stops it (fast: its connections closed) and starts it again
#   private_postgres_stop        stops it (immediately) and removes the directory
#   private_postgres_db NAME     creates database NAME and prints its URL
#   free_port                    a loopback port that was free a moment ago

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

pg_bin=/usr/lib/postgresql/15/bin
pg_cluster=""
pg_as_owner=()

pg_run() { "${pg_as_owner[@]}" "$pg_bin/$1" "${@:2}"; }

private_postgres_start() {
  pg_cluster=$(mktemp -d /tmp/tessera-pg-XXXXXX)
  if [ "$(id -u)" -eq 0 ]; then
    chown postgres: "$pg_cluster"
    pg_as_owner=(runuser -u postgres --)
  fi
  pg_port=$(free_port)
  pg_run initdb -D "$pg_cluster/data" -U tessera -A trust -E UTF8 --no-instructions >/dev/null
  private_postgres_up
}

private_postgres_up() {
  pg_run pg_ctl -D "$pg_cluster/data" -l "$pg_cluster/server.log" -w \
    -o "-p $pg_port -k $pg_cluster -c listen_addresses=127.0.0.1" start >/dev/null
}

private_postgres_restart() {
  pg_run pg_ctl -D "$pg_cluster/data" -m fast -w stop >/dev/null
  sleep 3
  private_postgres_up
}

private_postgres_stop() {
  [ -n "$pg_cluster" ] || return 0
  pg_run pg_ctl -D "$pg_cluster/data" -m immediate -w stop >/dev/null 2>&1 || true
  rm -rf "$pg_cluster"
  pg_cluster=""
}

private_postgres_db() {
  pg_run createdb -h 127.0.0.1 -p "$pg_port" -U tessera "$1"
  echo "postgresql://tessera@127.0.0.1:$pg_port/$1"
}
