#!/usr/bin/env bash
# The packages' configuration files (debian/config/) against the programs: every option of
# `--help` is documented in the file (set or commented out as "# name = ..."), every name the
# file sets is an option (the program parses the file), and the file sets nothing twice.
#   check_config_files.sh PROGRAM-COMMAND CONF [PROGRAM-COMMAND CONF ...]   (a command as one word, e.g. "tessera-server run")
set -uo pipefail
failed=0
while [ $# -ge 2 ]; do
  read -r -a command <<< "$1"
  conf=$2
  shift 2
  options=$("${command[@]}" --help | grep -oE '^ +(-[a-z], )?--[a-z0-9-]+' | grep -oE -- '--[a-z0-9-]+' | sed 's/^--//')
  [ -n "$options" ] || { echo "FAIL: no options in ${command[*]} --help"; failed=1; continue; }
  for name in $options; do
    case "$name" in help|config|version) continue ;; esac
    grep -qE "^#? ?$name =" "$conf" || { echo "FAIL: $conf does not document --$name"; failed=1; }
  done
  twice=$(grep -oE '^[a-z0-9-]+ *=' "$conf" | tr -d ' =' | sort | uniq -d)
  [ -z "$twice" ] || { echo "FAIL: $conf sets $twice more than once"; failed=1; }
  # The program reads the file: an unknown name or a bad value fails here.
  if ! out=$("${command[@]}" --config "$conf" --help 2>&1); then
    echo "FAIL: ${command[*]} refuses $conf: $out"
    failed=1
  fi
  echo "checked $conf against ${command[*]} ($(echo "$options" | wc -w) options)"
done
exit $failed
