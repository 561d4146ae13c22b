#!/usr/bin/env bash
# Captures each peer tool's real output into this directory, for the
# parser tests (peers_test.go). Run as root on a machine with the peers
# installed (mk/peers.mk); file names say tool, shape and size.
set -euo pipefail
cd "$(dirname "$0")"
root=; [ "$(id -u)" -eq 0 ] && root=--allow-run-as-root
np() { # name launcher... -- NetPIPE args
	local out=$1; shift
	"$@" -o "$PWD/$out" >/dev/null 2>&1
}
np netpipe-ompi-8.out mpirun.openmpi $root -np 2 --bind-to cpu-list:ordered --cpu-set 0,1 NPopenmpi -l 8 -u 8 -p 0 -n 20000
np netpipe-ompi-copy-4m-stream.out mpirun.openmpi $root -np 2 --bind-to cpu-list:ordered --cpu-set 0,1 \
	--mca btl self,vader --mca btl_vader_single_copy_mechanism none NPopenmpi -l 4194304 -u 4194304 -p 0 -n 20 -s
np netpipe-mpich-1m.out mpiexec.mpich -n 2 -bind-to user:0,1 NPmpich2 -l 1048576 -u 1048576 -p 0 -n 50
pair() { # out env port server-args -- client-args
	local out=$1 env=$2 port=$3; shift 3
	local server=() ; while [ "$1" != -- ]; do server+=("$1"); shift; done; shift
	env $env "${server[@]}" >/dev/null 2>&1 &
	local pid=$!
	for _ in $(seq 500); do grep -qi ":$(printf %04X "$port") .* 0A " /proc/net/tcp /proc/net/tcp6 && break; sleep 0.01; done
	env $env "$@" > "$out" 2>&1
	wait $pid
}
pair ucx-posix-lat-8.out UCX_TLS=posix 13401 ucx_perftest -p 13401 -c 1 -- ucx_perftest 127.0.0.1 -p 13401 -c 0 -t tag_lat -s 8 -n 20000 -w 5000 -v
pair ucx-sm-bw-4m.out UCX_TLS=sm 13402 ucx_perftest -p 13402 -c 1 -- ucx_perftest 127.0.0.1 -p 13402 -c 0 -t tag_bw -s 4194304 -n 40 -w 12 -v
pair fi-shm-8.out "" 13403 taskset -c 1 fi_pingpong -B 13403 -p shm -e rdm -I 12000 -S 8 -- taskset -c 0 fi_pingpong -P 13403 -p shm -e rdm -I 12000 -S 8 127.0.0.1
pair fi-shm-1m.out "" 13404 taskset -c 1 fi_pingpong -B 13404 -p shm -e rdm -I 100 -S 1048576 -- taskset -c 0 fi_pingpong -P 13404 -p shm -e rdm -I 100 -S 1048576 127.0.0.1
pair fi-shm-64k.out "" 13405 taskset -c 1 fi_pingpong -B 13405 -p shm -e rdm -I 1500 -S 65536 -- taskset -c 0 fi_pingpong -P 13405 -p shm -e rdm -I 1500 -S 65536 127.0.0.1
