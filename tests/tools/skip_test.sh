#!/bin/sh
# Stands in for a test whose tool is missing on this machine: says why, and exits 77, which
# meson reports as SKIP. The first argument is the reason; the rest (the real test's) is ignored.
echo "skipped: $1"
exit 77
