#!/bin/sh
# Regenerates the sysfs fixtures: cpuN/cache/indexM trees as Linux lays them
# out under /sys/devices/system/cpu, for machines this package must handle.
# Usage: cd topology/testdata && sh mksysfs.sh
set -eu

# cache ROOT CPU INDEX LEVEL TYPE SIZE SHARED_CPU_LIST
cache() {
	d=$1/cpu$2/cache/index$3
	mkdir -p "$d"
	echo "$4" >"$d/level"
	echo "$5" >"$d/type"
	echo "$6" >"$d/size"
	echo 64 >"$d/coherency_line_size"
	echo "$7" >"$d/shared_cpu_list"
}

# Dual-socket quad-core Xeon E5345 (the paper's machine, §4): 32 KiB L1d
# and L1i per core, one 4 MiB L2 per pair of cores. Linux numbered the cores
# so that each L2 pair is {n, n+4}.
rm -rf xeon-e5345 && mkdir xeon-e5345 && echo 0-7 >xeon-e5345/online
for c in 0 1 2 3 4 5 6 7; do
	pair="$((c % 4)),$((c % 4 + 4))"
	cache xeon-e5345 $c 0 1 Data 32K $c
	cache xeon-e5345 $c 1 1 Instruction 32K $c
	cache xeon-e5345 $c 2 2 Unified 4096K "$pair"
done

# Ryzen/EPYC Zen 2 with 8 cores, SMT (sibling of n is n+8), two CCXs of four
# cores, each with a 16 MiB L3; 512 KiB L2 per core.
rm -rf amd-ccx && mkdir amd-ccx && echo 0-15 >amd-ccx/online
for c in $(seq 0 15); do
	core=$((c % 8))
	smt="$core,$((core + 8))"
	if [ $core -lt 4 ]; then ccx=0-3,8-11; else ccx=4-7,12-15; fi
	cache amd-ccx $c 0 1 Data 32K "$smt"
	cache amd-ccx $c 1 1 Instruction 32K "$smt"
	cache amd-ccx $c 2 2 Unified 512K "$smt"
	cache amd-ccx $c 3 3 Unified 16384K "$ccx"
done

# A VM whose kernel exposes no cache directories at all.
rm -rf vm-nocache && mkdir -p vm-nocache/cpu0 vm-nocache/cpu1 && echo 0-1 >vm-nocache/online
touch vm-nocache/cpu0/uevent vm-nocache/cpu1/uevent

# This project's machine: 2-vCPU AMD EPYC KVM guest, as its sysfs reads.
rm -rf epyc-kvm && mkdir epyc-kvm && echo 0-1 >epyc-kvm/online
for c in 0 1; do
	cache epyc-kvm $c 0 1 Data 32K $c
	cache epyc-kvm $c 1 1 Instruction 32K $c
	cache epyc-kvm $c 2 2 Unified 512K $c
	cache epyc-kvm $c 3 3 Unified 32768K 0-1
done
