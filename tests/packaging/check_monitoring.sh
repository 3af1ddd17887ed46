#!/usr/bin/env bash
# The shipped monitoring (monitoring/): the Prometheus alert rules pass `promtool check rules`
# and their unit tests (`promtool test rules`); the Grafana dashboard is valid JSON; and every
# tessera_* metric the rules and the dashboard name is one the server exports
# (server/http/server_metrics.cpp), so a renamed metric cannot silently blind an alert.
#   check_monitoring.sh SOURCE_ROOT
set -uo pipefail
root=$1
rules=$root/monitoring/prometheus/tessera.rules.yml
dashboard=$root/monitoring/grafana/tessera-dashboard.json
failed=0
if command -v promtool >/dev/null; then
  promtool check rules "$rules" || failed=1
  (cd "$(dirname "$rules")" && promtool test rules tessera.rules.test.yml) || failed=1
else
  echo "promtool is not installed (Debian's prometheus: scripts/install-deps installs it)"
  exit 77
fi
python3 -m json.tool "$dashboard" > /dev/null || { echo "FAIL: $dashboard is not valid JSON"; failed=1; }
exported=$(grep -ohE '"tessera_[a-z_]+' "$root/server/http/server_metrics.cpp" | tr -d '"' | sort -u)
used=$(grep -ohE 'tessera_[a-z_]+' "$rules" "$dashboard" | sed -E 's/_(bucket|sum|count)$//' | sort -u)
for name in $used; do
  # A here-string, not a pipe: with pipefail, `echo | grep -q` fails when grep exits before echo's write.
  grep -qx "$name" <<< "$exported" || { echo "FAIL: $name is used by the monitoring but not exported"; failed=1; }
done
echo "checked $(echo "$used" | wc -w) metric names against the server's $(echo "$exported" | wc -w)"
exit $failed
