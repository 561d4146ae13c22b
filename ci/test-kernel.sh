#!/usr/bin/env bash
# Tests the knem kernel modules under every kernel of ci/kernels.txt.
#
# For each kernel: fetch its Debian image (cached outside the clone), build
# the modules against its installed headers, pack an initramfs with busybox,
# the modules and the Go test binaries of ci/guest-tests.txt, boot it in QEMU
# (TCG, 2 vCPUs), and read the verdict the guest's /init prints on the serial
# console. The kernels boot concurrently. Prints one line per kernel:
#
#	PASS <release> (<n> tests)
#	FAIL <release>: <why>
#
# and exits non-zero when any kernel fails.
#
#	ci/test-kernel.sh --run BINARY [-- ARGS...]
#
# boots the first kernel only (or KCI_KERNELS' first), with the modules
# loaded, runs the static BINARY with ARGS in the guest instead of the test
# binaries, prints what it writes (stdout and stderr) and exits with its
# status; 1 with one "vm-run: ..." line when the guest cannot be prepared or
# dies.
#
# Environment:
#	KNEMESIS_CACHE  downloaded and extracted images (/var/cache/knemesis)
#	KCI_OUT         build products and console logs (ci/out)
#	KCI_KERNELS     releases to test instead of ci/kernels.txt
#	KCI_KMOD        the module source tree to test (the repository's kmod/)
#	KCI_MODULES     module dirs in it, in load order (softdma knem/module)
#	KCI_BOOT_TIMEOUT  seconds one guest may run (900)
#	KCI_SERIAL      set: boot the kernels one after another
#	KCI_TEST_ARGS   extra test binary flags, comma-separated
#	                (e.g. -test.run=Copy,-test.bench=.)
set -uo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cache=${KNEMESIS_CACHE:-/var/cache/knemesis}
out=${KCI_OUT:-$repo/ci/out}
kmod=${KCI_KMOD:-$repo/kmod}
modules=${KCI_MODULES:-softdma knem/module}
boot_timeout=${KCI_BOOT_TIMEOUT:-900}
go=${GO:-go}

kernels=${KCI_KERNELS:-$(grep -v '^[[:space:]]*\(#\|$\)' "$repo/ci/kernels.txt")}

log() { echo "test-kernel: $*" >&2; }

# image_deb RELEASE: sets deb to the release's image package in the cache,
# downloading it first when it is not there.
image_deb() {
	local pkg=linux-image-$1-unsigned
	mkdir -p "$cache/debs" || return 1
	deb=$(ls "$cache/debs/${pkg}"_*.deb 2>/dev/null | head -n1)
	[ -n "$deb" ] && return 0
	log "downloading $pkg"
	# apt's sandbox user cannot write to a root-owned cache: not an error.
	(cd "$cache/debs" && apt-get download -q "$pkg" 2>&1 |
		grep -v 'unsandboxed' >&2) || true
	deb=$(ls "$cache/debs/${pkg}"_*.deb 2>/dev/null | head -n1)
	[ -n "$deb" ] || { why="apt-get download $pkg failed"; return 1; }
}

# fetch_image RELEASE: puts vmlinuz-RELEASE under $cache/k/RELEASE/boot.
fetch_image() {
	local rel=$1 dir=$cache/k/$1 deb
	[ -f "$dir/boot/vmlinuz-$rel" ] && return 0
	image_deb "$rel" || return 1
	# Only /boot: dmaengine and devtmpfs are built in in Debian's configs,
	# and fetch_fs_modules takes the few modules of the kernel's own that
	# the guest loads.
	mkdir -p "$dir.tmp" &&
		dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$dir.tmp" ./boot &&
		rm -rf "$dir" && mv "$dir.tmp" "$dir" ||
		{ why="cannot extract $deb"; return 1; }
}

# The kernel's own modules the guest loads for a disk-backed filesystem: a
# loop device over a minix image (tests of shared file mappings need pages
# a filesystem writes back; tmpfs and the initramfs have no writeback).
fs_modules="drivers/block/loop fs/minix/minix"

# fetch_fs_modules RELEASE DEST: the fs_modules of the release's image
# package, uncompressed, in DEST with their load-order.
fetch_fs_modules() {
	local rel=$1 dest=$2 deb m pat=
	[ -f "$dest/load-order" ] && return 0
	image_deb "$rel" || return 1
	for m in $fs_modules; do
		pat="$pat ./lib/modules/$rel/kernel/$m.ko*"
	done
	rm -rf "$dest.tmp" && mkdir -p "$dest.tmp" || return 1
	# shellcheck disable=SC2086 # one pattern a module
	dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$dest.tmp" --wildcards $pat ||
		{ why="cannot extract $fs_modules from $deb"; return 1; }
	: >"$dest.tmp/load-order"
	for m in $fs_modules; do
		local ko=$dest.tmp/lib/modules/$rel/kernel/$m.ko
		[ -f "$ko.xz" ] && xz -d "$ko.xz"
		[ -f "$ko" ] || { why="$m.ko missing from $deb"; return 1; }
		mv "$ko" "$dest.tmp/" && basename "$m" >>"$dest.tmp/load-order"
	done
	rm -rf "$dest.tmp/lib" "$dest" && mv "$dest.tmp" "$dest"
}

# make_disk IMAGE: an empty 8 MiB minix filesystem.
make_disk() {
	[ -f "$1" ] && return 0
	truncate -s 8M "$1.tmp" && mkfs.minix -3 "$1.tmp" >/dev/null &&
		mv "$1.tmp" "$1" || { why="cannot make a minix image (mkfs.minix, util-linux)"; return 1; }
}

# build_modules RELEASE DEST: builds every KCI_MODULES dir against the
# release's headers in a private copy of the kmod tree, so that kernels never
# share build products (nor pick up stale ones), and copies the .ko files to
# DEST.
build_modules() {
	local rel=$1 dest=$2 kdir=/lib/modules/$1/build src m ko
	if [ ! -f "$kdir/Makefile" ]; then
		kdir=/usr/src/linux-headers-$rel
		[ -f "$kdir/Makefile" ] ||
			{ why="headers missing: apt-get install linux-headers-$rel"; return 1; }
	fi
	src=$out/$rel/kmod
	rm -rf "$src" && mkdir -p "$src" "$dest" || return 1
	: >"$dest/load-order"
	for m in $modules; do
		[ -d "$kmod/$m" ] || { why="no module source at $kmod/$m"; return 1; }
	done
	# The whole tree (Makefiles reach the uapi header by relative path),
	# without the products of a build for some other kernel.
	tar -C "$kmod" --exclude='*.o' --exclude='*.ko' --exclude='*.mod' \
		--exclude='*.mod.c' --exclude='.*.cmd' --exclude=Module.symvers \
		--exclude=modules.order --exclude='*.a' --exclude='*.go' -cf - . |
		tar -C "$src" -xf - || return 1
	: >"$out/$rel/build.log"
	for m in $modules; do
		if ! make -C "$src/$m" KDIR="$kdir" >>"$out/$rel/build.log" 2>&1; then
			why="module build failed in $m (see $out/$rel/build.log)"
			return 1
		fi
		if grep -q 'warning:' "$out/$rel/build.log"; then
			why="module build warnings in $m: $(grep -m1 'warning:' "$out/$rel/build.log")"
			return 1
		fi
		for ko in "$src/$m"/*.ko; do
			[ -f "$ko" ] || { why="no .ko built in $m"; return 1; }
			cp "$ko" "$dest/" && basename "$ko" .ko >>"$dest/load-order"
		done
	done
}

# build_tests DEST: the static test binaries of ci/guest-tests.txt, once for
# all kernels (they do not depend on the kernel): Go packages through
# `go test -c`, C programs (which print go test -v lines) through gcc.
build_tests() {
	local dest=$1 t name
	mkdir -p "$dest"
	for t in $(grep -v '^[[:space:]]*\(#\|$\)' "$repo/ci/guest-tests.txt"); do
		name=$(echo "${t#./}" | sed 's/\.c$//' | tr / -).test
		case $t in
		*.c)
			gcc -static -O2 -Wall -Werror -o "$dest/$name" "$repo/$t" ||
				{ log "cannot build $t"; return 1; } ;;
		*)
			(cd "$repo" && CGO_ENABLED=0 $go test -c -o "$dest/$name" "$t") ||
				{ log "cannot build the tests of $t"; return 1; } ;;
		esac
	done
}

# pack_initramfs DIR MODDIR TESTDIR OUT [RUNDIR]: a gzip'ed newc cpio of
# busybox, /init, the modules and the test binaries; or, given RUNDIR (a
# static "prog" and its "args", one a line), that program in /run instead of
# the tests.
pack_initramfs() {
	local root=$1
	rm -rf "$root" && mkdir -p "$root"/{bin,dev,proc,sys,tmp,lib/knem,tests} || return 1
	cp /bin/busybox "$root/bin/busybox" &&
		install -m 0755 "$repo/ci/guest/init" "$root/init" &&
		cp "$2"/* "$root/lib/knem/" || return 1
	# The disk image and the modules that mount it (fetch_fs_modules).
	mkdir -p "$root/lib/kci-fs" && cp "$(dirname "$2")"/fsmods/* "$root/lib/kci-fs/" &&
		cp "$out/disk.img" "$root/disk.img" || return 1
	if [ -n "${5:-}" ]; then
		mkdir -p "$root/run" && cp "$5"/* "$root/run/" &&
			chmod 0755 "$root/run/prog" || return 1
	else
		cp "$3"/* "$root/tests/" && chmod 0755 "$root"/tests/* || return 1
	fi
	(cd "$root" && find . -print0 | cpio --null -o -H newc --owner=0:0 --quiet | gzip -1) >"$4"
}

# run_guest RELEASE INITRD CONSOLE: boots the kernel; the console log is the
# only result.
run_guest() {
	local rel=$1 args=''
	[ -n "${KCI_TEST_ARGS:-}" ] && args="kci.args=$KCI_TEST_ARGS"
	# panic=-1 with -no-reboot turns an oops (oops=panic) or a lockup into
	# a QEMU exit, so a dead kernel never waits for the timeout. TCG on a
	# shared host can leave a vCPU unscheduled for tens of seconds: the
	# lockup and RCU stall detectors wait 2 minutes (watchdog_thresh=60
	# means a soft lockup after 120 s), so that only a real lockup trips.
	# Single-threaded TCG: with one host thread per vCPU, the kernel's
	# int3-based code patching (text_poke_bp, run when a BPF program turns
	# on the syscall tracepoints) oopsed both kernels with "int3" in
	# syscall_exit_to_user_mode_prepare and locked 6.1 up in a uprobe test;
	# round-robin vCPUs never see a half-patched instruction.
	# KCI_TCG_THREAD=multi restores one thread per vCPU.
	# Two NUMA nodes, one vCPU and half the memory each, 20 apart as the
	# SLIT of a two-socket machine reads: placement is tested across them
	# (internal/memplace/numatest). Each vCPU is its own socket: with both
	# in one socket, sharing its last-level cache across nodes, 6.1 warns
	# at boot (topology_sane: "llc-sibling ... is not on the same node").
	timeout -s KILL "$boot_timeout" qemu-system-x86_64 \
		-accel tcg,thread=${KCI_TCG_THREAD:-single} -cpu max \
		-smp 2,sockets=2,cores=1,threads=1 -m 1G \
		-object memory-backend-ram,id=kci-mem0,size=512M \
		-object memory-backend-ram,id=kci-mem1,size=512M \
		-numa node,nodeid=0,cpus=0,memdev=kci-mem0 \
		-numa node,nodeid=1,cpus=1,memdev=kci-mem1 \
		-numa dist,src=0,dst=1,val=20 \
		-nodefaults -display none -serial stdio -no-reboot \
		-kernel "$cache/k/$rel/boot/vmlinuz-$rel" -initrd "$2" \
		-append "console=ttyS0 quiet panic=-1 oops=panic softlockup_panic=1 watchdog_thresh=60 rcupdate.rcu_cpu_stall_timeout=120 slub_debug=FZP rdinit=/init $args" \
		</dev/null 2>&1 | tr -d '\r' >"$3"
}

# boot_guest RELEASE INITRD CONSOLE: run_guest, once more when the kernel
# died before /init said KCI-BOOT. Nothing of ours has run by then (the
# modules load after it), so such a death is the emulator's or the boot's,
# not a finding; the retry is printed so that a recurring one is seen.
boot_guest() {
	run_guest "$@"
	grep -q "^KCI-BOOT $1" "$3" && return
	cp "$3" "$3.first-boot"
	echo "RETRY $1: guest died before /init (first console in $3.first-boot)"
	run_guest "$@"
}

# events CONSOLE NAME: the test events of test binary NAME, as test2json
# lines, from the output between its KCI-TEST markers.
events() {
	sed -n "/^KCI-TEST-BEGIN $2\$/,/^KCI-TEST-END $2 /p" "$1" |
		sed '1d;$d' | $go tool test2json -t
}

# results CONSOLE: the test events of every test binary.
results() {
	local name
	for name in $(sed -n 's/^KCI-TEST-BEGIN //p' "$1"); do
		events "$1" "$name"
	done
}

# each_binary_passed CONSOLE TESTDIR: sets why when a binary of TESTDIR did
# not run in the guest or passed no test (a -test.run that matched nothing,
# a binary whose tests all went missing). With KCI_TEST_ARGS, which may
# select the tests of one binary only, one passing test in all is enough.
each_binary_passed() {
	local name n
	if [ -n "${KCI_TEST_ARGS:-}" ]; then
		[ "$ntests" -gt 0 ] || why="no test passed"
		return
	fi
	for name in $(ls "$2"); do
		grep -q "^KCI-TEST-BEGIN $name\$" "$1" || { why="$name did not run in the guest"; return; }
		n=$(events "$1" "$name" | grep -c '"Action":"pass","Test"')
		[ "$n" -gt 0 ] || { why="$name ran no test"; return; }
	done
}

# first_event EVENTS ACTION: "Test (output)" of the first test with that
# action; the output is the test's last lines before it ended.
first_event() {
	local t
	t=$(grep -m1 "\"Action\":\"$2\",\"Test\"" "$1" | sed 's/.*"Test":"\([^"]*\)".*/\1/')
	[ -n "$t" ] || return 1
	echo "$t: $(grep -F "\"Test\":\"$t\"" "$1" | grep '"Action":"output"' |
		sed 's/.*"Output":"\(.*\)"}$/\1/; s/\\n$//; s/\\t/ /g; s/^ *//' |
		grep -v -e '^=== ' -e '^--- ' | tail -n 2 | tr '\n' ' ')"
}

# verdict RELEASE CONSOLE TESTDIR: sets why (empty on success) and ntests.
verdict() {
	local rel=$1 c=$2 kmsg ev=$2.events
	results "$c" >"$ev"
	ntests=$(grep -c '"Action":"pass","Test"' "$ev")
	why=
	grep -q "^KCI-BOOT $rel" "$c" || { why="guest did not boot (see $c)"; return; }
	why=$(sed -n 's/^KCI-FAIL //p' "$c" | head -n1)
	[ -n "$why" ] && return
	if ! grep -q '^KCI-DONE' "$c"; then
		why="guest died or timed out: $(grep -m1 -E 'Kernel panic|BUG|Oops|KCI-TEST-BEGIN' "$c" | tail -n1)"
		[ "$(grep -c '^KCI-TEST-BEGIN' "$c")" = "$(grep -c '^KCI-TEST-END' "$c")" ] ||
			why="$why (during $(sed -n 's/^KCI-TEST-BEGIN //p' "$c" | tail -n1))"
		return
	fi
	why=$(first_event "$ev" fail) && { why="test failed: $why"; return; }
	why=$(first_event "$ev" skip) && { why="test skipped in the guest: $why"; return; }
	why=$(awk '/^KCI-TEST-END/ && $3 != 0 {print $2 " exited with " $3; exit}' "$c")
	[ -n "$why" ] && return
	[ "$(grep -c '^KCI-TEST-END' "$c")" -gt 0 ] || { why="no test binary ran"; return; }
	each_binary_passed "$c" "$3"
	[ -n "$why" ] && return
	why=$(sed -n 's/^KCI-RMMOD \(.*\) stuck \(.*\)/module \1 will not unload (\2)/p' "$c" | head -n1)
	[ -n "$why" ] && return
	why=$(awk '/^KCI-PINS/ && $2 != $3 {print "pages left pinned: " $2 - $3 " (nr_foll_pin_acquired " $2 ", released " $3 ")"}' "$c")
	[ -n "$why" ] && return
	# The kernel log from the first module load on.
	kmsg=$(sed -n '/^KCI-DMESG-BEGIN/,/^KCI-DMESG-END/p' "$c" | sed -n '/knem-ci: loading modules/,$p')
	why=$(echo "$kmsg" | grep -m1 -E 'BUG|WARNING|Oops|refcount|[Ll]eak|Call Trace|general protection|UBSAN|stall|blocked for more than|soft lockup|corrupt|Poison|Redzone|Object padding')
	[ -n "$why" ] && { why="kernel log: $why"; return; }
	# Bad page (32), died (128), warned (512), soft lockup (16384).
	local taint
	taint=$(sed -n 's/^KCI-TAINT //p' "$c")
	if [ -n "$taint" ] && (((taint & (32 | 128 | 512 | 16384)) != 0)); then
		why="kernel tainted $taint (bad page, oops, warning or lockup)"
	fi
}

main() {
	local rel failed=0 testdir=$out/tests
	mkdir -p "$out" || exit 1
	# A module of its own: `go vet ./...` in the repository never descends
	# into build products.
	[ -f "$out/go.mod" ] || echo 'module knemesis.invalid/ci-out' >"$out/go.mod"
	command -v qemu-system-x86_64 >/dev/null ||
		{ echo "FAIL all: qemu-system-x86_64 missing (make deps)"; exit 1; }
	[ -x /bin/busybox ] || { echo "FAIL all: /bin/busybox missing (busybox-static)"; exit 1; }
	[ -n "$kernels" ] ||
		{ echo "FAIL all: no kernel listed in ci/kernels.txt (nor in KCI_KERNELS)"; exit 1; }
	rm -rf "$testdir"
	build_tests "$testdir" || { echo "FAIL all: cannot build the Go test binaries"; exit 1; }
	make_disk "$out/disk.img" || { echo "FAIL all: $why"; exit 1; }
	# The kernels boot at once, each guest one host thread (single-threaded
	# TCG), each with its own directory and console; their verdicts are
	# printed in the order of ci/kernels.txt once all are done.
	for rel in $kernels; do
		if [ -n "${KCI_SERIAL:-}" ]; then
			test_kernel "$rel" "$testdir" >"$out/$rel.verdict" 2>&1
		else
			test_kernel "$rel" "$testdir" >"$out/$rel.verdict" 2>&1 &
		fi
	done
	wait
	for rel in $kernels; do
		cat "$out/$rel.verdict"
		grep -q "^PASS $rel " "$out/$rel.verdict" || failed=1
	done
	return $failed
}

# test_kernel RELEASE TESTDIR: prepares and boots one guest and prints its
# PASS or FAIL line.
test_kernel() {
	local rel=$1 dir=$out/$1
	why=
	mkdir -p "$dir"
	if fetch_image "$rel" && fetch_fs_modules "$rel" "$dir/fsmods" &&
		build_modules "$rel" "$dir/modules" &&
		pack_initramfs "$dir/root" "$dir/modules" "$2" "$dir/initrd.gz"; then
		log "booting $rel"
		boot_guest "$rel" "$dir/initrd.gz" "$dir/console.log"
		verdict "$rel" "$dir/console.log" "$2"
	else
		why=${why:-cannot prepare the guest}
	fi
	if [ -n "$why" ]; then
		echo "FAIL $rel: $why"
	else
		echo "PASS $rel ($ntests tests)"
	fi
}

# run_main BINARY [-- ARGS...]: see the header.
run_main() {
	local bin=$1 rel dir rundir a rc
	shift
	[ "${1:-}" = -- ] && shift
	fail() { echo "vm-run: $*"; exit 1; }
	[ -f "$bin" ] || fail "no binary at $bin"
	command -v qemu-system-x86_64 >/dev/null ||
		fail "qemu-system-x86_64 missing (apt-get install qemu-system-x86)"
	[ -x /bin/busybox ] || fail "/bin/busybox missing (apt-get install busybox-static)"
	rel=$(echo "$kernels" | head -n1)
	[ -n "$rel" ] || fail "no kernel listed in ci/kernels.txt"
	dir=$out/run-$rel
	rundir=$dir/run
	why=
	mkdir -p "$dir" && rm -rf "$rundir" && mkdir -p "$rundir" || fail "cannot write $dir"
	[ -f "$out/go.mod" ] || echo 'module knemesis.invalid/ci-out' >"$out/go.mod"
	cp "$bin" "$rundir/prog" || fail "cannot copy $bin"
	: >"$rundir/args"
	for a in "$@"; do
		case $a in *$'\n'*) fail "argument with a newline: $a" ;; esac
		printf '%s\n' "$a" >>"$rundir/args"
	done
	fetch_image "$rel" && fetch_fs_modules "$rel" "$dir/fsmods" &&
		make_disk "$out/disk.img" && build_modules "$rel" "$dir/modules" &&
		pack_initramfs "$dir/root" "$dir/modules" "" "$dir/initrd.gz" "$rundir" ||
		fail "$rel: ${why:-cannot prepare the guest}"
	log "booting $rel to run $(basename "$bin")"
	boot_guest "$rel" "$dir/initrd.gz" "$dir/console.log" >&2
	grep -q "^KCI-BOOT $rel" "$dir/console.log" ||
		fail "$rel: guest did not boot (see $dir/console.log)"
	a=$(sed -n 's/^KCI-FAIL //p' "$dir/console.log" | head -n1)
	[ -z "$a" ] || fail "$rel: $a"
	sed -n '/^KCI-RUN-BEGIN$/,/^KCI-RUN-END /p' "$dir/console.log" | sed '1d;/^KCI-RUN-END /d'
	rc=$(sed -n 's/^KCI-RUN-END //p' "$dir/console.log")
	[ -n "$rc" ] || fail "$rel: guest died or timed out while running (see $dir/console.log)"
	return "$rc"
}

# Sourced (ci/dkms-test.sh boots its guests with these functions): define
# them only.
if [ "${BASH_SOURCE[0]}" != "$0" ]; then
	:
elif [ "${1:-}" = --run ]; then
	[ $# -ge 2 ] || { echo "usage: ci/test-kernel.sh --run BINARY [-- ARGS...]" >&2; exit 2; }
	shift
	run_main "$@"
else
	main
fi
