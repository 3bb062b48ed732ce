#!/usr/bin/env bash
# free-space.sh GIB DIR WHY: fail with a one-line message when DIR's filesystem has less than
# GIB GiB free (a test that runs out of disk half-way fails far from the cause).
set -euo pipefail
need="$1" dir="$2" why="$3"
mkdir -p "$dir"
free_kib=$(df -Pk "$dir" | awk 'NR == 2 { print $4 }')
free_gib=$((free_kib / 1024 / 1024))
if [ "$free_gib" -lt "$need" ]; then
	echo "free-space: only ${free_gib} GiB free on $dir's filesystem, ${need} GiB needed: $why" >&2
	exit 1
fi
