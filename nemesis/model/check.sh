#!/bin/sh
# Model-check queue.pml with spin: for each configuration, a safety run
# (assertions: nothing lost or duplicated, FIFO per producer; invalid end
# states: deadlock, or an element lost while the consumer waits) and a
# liveness run (LTL "delivered" under weak fairness). Fails on any error and
# on a search that did not finish (memory limit, depth limit).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/knemesis-model.XXXXXX")
trap 'rm -rf "$work"' EXIT
command -v spin >/dev/null || { echo "test-model: spin is not installed (make deps installs it)"; exit 1; }

check() { # $1 = label, $2 = pan output file
	if grep -q "errors: 0" "$2" && ! grep -Eq "out of memory|max search depth too small|search not completed" "$2"; then
		echo "test-model: $1: $(grep -E 'states, stored' "$2" | head -1 | sed 's/^ *//'), no errors"
	else
		echo "test-model: $1 FAILED"; cat "$2"; exit 1
	fi
}

# "MODE NPROD PER". Safety: 2 producers × 3 messages each (so cells are
# reused), 3 producers × 1. Liveness, whose state space is larger, on 2 × 2
# and 3 × 1. (3 × 2 needs more than 1.5 GB: too much for a shared CI box.)
for cfg in "safety 2 3" "safety 3 1" "liveness 2 2" "liveness 3 1"; do
	set -- $cfg
	d="$work/$1-$2-$3"; mkdir -p "$d"; cd "$d"
	spin -DNPROD="$2" -DPER="$3" -a "$here/queue.pml" >/dev/null
	if [ "$1" = safety ]; then
		gcc -O2 -w -DSAFETY -DNOCLAIM -DCOLLAPSE -DMEMLIM=768 -o pan pan.c
		./pan -m100000 -w22 >pan.out 2>&1 || true
	else
		gcc -O2 -w -DCOLLAPSE -DMEMLIM=768 -o pan pan.c
		./pan -a -f -m100000 -w22 >pan.out 2>&1 || true
	fi
	check "$2 producers × $3 messages, $1" pan.out
done
