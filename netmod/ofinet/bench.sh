#!/bin/sh
# Remote and intranode figures of the network module, in one run, beside
# fi_pingpong (libfabric-bin) over the same provider and address and Open
# MPI's tcp BTL (issue 30's benchmarks):
#
#	netmod/ofinet/bench.sh [iters]          (from the repository root)
#
# Needs libfabric-dev, libfabric-bin, libpmix-dev, openmpi-bin and
# libopenmpi-dev (mpicc), 3 free cores, and runs on 127.0.0.1 only. The two
# simulated nodes are KNEMESIS_NODE_MAP=0,0,1: rank 0 reaches rank 2 by the
# network module (tcp;ofi_rxm over the loopback) and rank 1 by the segment.
set -eu
ITERS=${1:-10000}
PROV="tcp;ofi_rxm"
ADDR=127.0.0.1
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
MPIRUN="mpirun --oversubscribe --allow-run-as-root"

go build -tags "ofi pmix" -o "$T/netbench" ./netmod/ofinet/netbench
$MPIRUN -np 3 -x KNEMESIS_NODE_MAP=0,0,1 "$T/netbench" -provider "$PROV" -node "$ADDR" -iters "$ITERS" | tee "$T/nb"

# fi_pingpong: server and client on the same address, tagged RDM messages.
fipp() { # size iters
	port=$((47600 + $(od -An -N1 -tu1 /dev/urandom)))
	fi_pingpong -p "$PROV" -e rdm -m tagged -S "$1" -I "$2" -B "$port" >/dev/null 2>&1 &
	sleep 0.5
	fi_pingpong -p "$PROV" -e rdm -m tagged -S "$1" -I "$2" -P "$port" "$ADDR" | awk -v s="$1" 'NR==2 {printf "fi_pingpong %-28s path=%-22s bytes=%-8s iters=%-6s usec/xfer=%s MB/sec=%s\n", s, "tcp;ofi_rxm", s, $2, $7, $6}'
	wait
}
{ fipp 8 "$ITERS"; fipp 4194304 $((ITERS / 200 > 20 ? ITERS / 200 : 20)); } | tee "$T/fi"

if command -v mpicc >/dev/null; then
	mpicc -O2 -o "$T/mpi_pingpong" netmod/ofinet/testdata/mpi_pingpong.c
	$MPIRUN -np 2 --mca btl tcp,self --mca btl_tcp_if_include lo "$T/mpi_pingpong" "$ITERS" | tee "$T/mpi"
else
	echo "mpicc not installed (libopenmpi-dev): no Open MPI tcp BTL figures" | tee "$T/mpi"
fi

# Ratios: knemesis over each reference (latency: lower is better; MB/s: higher).
field() { grep "$1" "$2" | head -1 | sed -n "s#.*$3=\([0-9.]*\).*#\1#p"; }
ratio() { awk -v a="$2" -v b="$3" -v l="$1" 'BEGIN { if (a != "" && b != "" && b > 0) printf "%-58s %s / %s = %.3f\n", l, a, b, a / b }'; }
echo
ratio "remote 8B usec/xfer, knemesis / fi_pingpong (issue: <= 1.1)" "$(field 'remote 8B' "$T/nb" usec/xfer)" "$(field 'bytes=8 ' "$T/fi" usec/xfer)"
ratio "remote 4MiB MB/sec, knemesis / fi_pingpong (issue: >= 0.9)" "$(field 'remote 4MiB' "$T/nb" MB/sec)" "$(field 'bytes=4194304' "$T/fi" MB/sec)"
ratio "remote 8B usec/xfer, knemesis / Open MPI tcp BTL" "$(field 'remote 8B' "$T/nb" usec/xfer)" "$(field 'bytes=8 ' "$T/mpi" usec/xfer)"
ratio "remote 4MiB MB/sec, knemesis / Open MPI tcp BTL" "$(field 'remote 4MiB' "$T/nb" MB/sec)" "$(field 'bytes=4194304' "$T/mpi" MB/sec)"
ratio "local 8B usec/xfer, module / no module (issue: <= 1.05)" "$(field 'local 8B fastbox, module' "$T/nb" usec/xfer)" "$(field 'local 8B fastbox, no module' "$T/nb" usec/xfer)"
ratio "local 1MiB MB/sec, module / no module (issue: >= 0.95)" "$(field 'local 1MiB auto, module' "$T/nb" MB/sec)" "$(field 'local 1MiB auto, no module' "$T/nb" MB/sec)"
