#!/usr/bin/env bash
# make dkms-test: the knem module installed and loaded the way a site does.
#
#   1. make install DESTDIR=<staging>: the layout DKMS expects
#      (/usr/src/knem-<version>/{dkms.conf,module,uapi}) and the udev rule;
#   2. for every kernel of ci/kernels.txt (the QEMU guests' kernels, whose
#      headers make deps installs): dkms add, build against that kernel's
#      headers and install, each into a private DKMS tree and module tree
#      under the staging directory, so that the host's /var/lib/dkms and
#      /lib/modules are never touched;
#   3. the installed knem.ko must sit in updates/dkms of that kernel, with
#      that kernel's vermagic, and depmod must resolve "knem" to it;
#   4. that kernel boots in QEMU from an image holding the staged
#      /lib/modules/<release> (DKMS's knem.ko and depmod's index), Debian's
#      kmod and systemd-udevd/udevadm with the libraries ldd finds, and the
#      rule make install staged. ci/guest/dkms-init starts udevd, runs
#      `modprobe knem` and `udevadm settle`, checks /dev/knem has exactly
#      the mode and group the rule gives (and that udev applied the rule),
#      runs the knem tests (./kmod/knem), and `modprobe -r knem` must take
#      the module and its node away; ci/test-kernel.sh's verdict reads the
#      console (no failure, no skip, no kernel warning, no pinned page);
#   5. dkms remove: the module and DKMS's record of it are gone.
#
# DKMS itself runs on the host, against the guest kernel's headers: the
# guests are a busybox initramfs with neither a compiler nor headers. The
# test-only DMA provider softdma, not part of the DKMS package, is built
# as make test-kernel builds it and insmod'ed before knem, so that the DMA
# tests run.
#
# Prints one line per kernel (PASS <release> / FAIL <release>: <why>) and
# exits non-zero when any fails. KCI_KERNELS, KCI_OUT and KNEMESIS_CACHE
# are read as by ci/test-kernel.sh; each guest's console is in
# $KCI_OUT/dkms-<release>/console.log.
set -uo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
# fetch_image, build_modules, boot_guest and verdict.
. "$repo/ci/test-kernel.sh"
kernels=${KCI_KERNELS:-$(grep -v '^[[:space:]]*\(#\|$\)' "$repo/ci/kernels.txt")}
version=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"/\1/p' "$repo/kmod/knem/dkms.conf")

command -v dkms >/dev/null || { echo "FAIL dkms-test: dkms not installed (apt-get install dkms; make deps installs it)"; exit 1; }
# What the guests load the module with: Debian's own binaries.
kmod_bin=$(command -v kmod) || { echo "FAIL dkms-test: kmod not installed (apt-get install kmod; make deps installs it)"; exit 1; }
udevadm_bin=$(command -v udevadm) || { echo "FAIL dkms-test: udevadm not installed (apt-get install udev; make deps installs it)"; exit 1; }

# What the test must leave alone: the host's DKMS tree and installed knem modules.
host_state() { ls -A /var/lib/dkms 2>/dev/null; ls /lib/modules/*/updates/dkms/knem.ko* 2>/dev/null; }
host_before=$(host_state)

stage=$(mktemp -d /tmp/knem-dkms-test.XXXXXX)
trap 'rm -rf "$stage"' EXIT
log=$stage/log

# The staging install; its lmtbench build is what make install runs.
if ! make -s -C "$repo" install DESTDIR="$stage" PREFIX=/usr GO="${GO:-go}" >"$log" 2>&1; then
	echo "FAIL make install DESTDIR: $(tail -n1 "$log")"
	exit 1
fi
for f in usr/bin/lmtbench "usr/src/knem-$version/dkms.conf" "usr/src/knem-$version/module/Kbuild" \
	"usr/src/knem-$version/module/knem_main.c" "usr/src/knem-$version/uapi/knem_io.h" etc/udev/rules.d/99-knem.rules; do
	[ -f "$stage/$f" ] || { echo "FAIL make install DESTDIR: no /$f"; exit 1; }
done

# The udev rule, read as udev matches it: the misc device named knem. What
# it says of mode and group is what the guest must find on /dev/knem.
rule=$(grep -v '^#' "$stage/etc/udev/rules.d/99-knem.rules")
case $rule in
*'KERNEL=="knem"'*'SUBSYSTEM=="misc"'*'MODE="'*) ;;
*) echo "FAIL 99-knem.rules: no MODE for the misc device knem: $rule"; exit 1 ;;
esac
want_mode=$(echo "$rule" | sed -n 's/.*MODE="0*\([0-7]*\)".*/\1/p')
want_group=$(echo "$rule" | sed -n 's/.*GROUP="\([^"]*\)".*/\1/p')
group_line=root:x:0:
if [ -n "$want_group" ] && [ "$want_group" != root ]; then
	group_line=$(getent group "$want_group") ||
		{ echo "FAIL 99-knem.rules: GROUP $want_group does not exist here"; exit 1; }
	group_line="root:x:0:
$group_line"
fi
want_gid=$(echo "$group_line" | tail -n1 | cut -d: -f3)

# The knem tests the guests run, built once.
testdir=$out/dkms-tests
rm -rf "$testdir" && mkdir -p "$testdir" &&
	(cd "$repo" && CGO_ENABLED=0 $go test -c -o "$testdir/kmod-knem.test" ./kmod/knem) >"$stage/log" 2>&1 ||
	{ echo "FAIL dkms-test: cannot build the knem tests: $(tail -n1 "$stage/log")"; exit 1; }

dkms_tree=$stage/var/lib/dkms
mods=$stage/lib/modules
mkdir -p "$dkms_tree" "$mods"
# dkms signs what it builds, with a key it makes in /var/lib/dkms when
# there is none: this one is made in the staging tree too.
export mok_signing_key=$stage/mok.key mok_certificate=$stage/mok.pub
d() { dkms "$@" -m knem -v "$version" --dkmstree "$dkms_tree" --sourcetree "$stage/usr/src" --installtree "$mods"; }

# copy_with_libs BINARY ROOT DEST: BINARY at ROOT/DEST, and the shared
# libraries and loader ldd finds for it at their own paths under ROOT.
copy_with_libs() {
	local lib
	install -D -m 0755 "$1" "$2/$3" || return 1
	for lib in $(ldd "$1" | grep -o '/[^ ]*'); do
		[ -e "$2$lib" ] || cp -L --parents "$lib" "$2" || return 1
	done
}

# guest_check RELEASE KO: boots RELEASE from an image of the staged module
# tree (KO is knem.ko's path in it), kmod, udev and the rule; sets why and
# ntests as ci/test-kernel.sh's verdict does.
guest_check() {
	local rel=$1 dir=$out/dkms-$1 root=$out/dkms-$1/root l
	mkdir -p "$dir" || { why="cannot write $dir"; return 1; }
	fetch_image "$rel" || return 1
	modules=softdma build_modules "$rel" "$dir/modules" || return 1
	rm -rf "$root" && mkdir -p "$root"/{bin,dev,proc,sys,tmp,run,lib/knem,lib/modules,tests,usr/sbin,usr/lib/systemd,etc/udev/rules.d} &&
		cp /bin/busybox "$root/bin/busybox" &&
		install -m 0755 "$repo/ci/guest/dkms-init" "$root/init" &&
		cp "$dir/modules/softdma.ko" "$root/lib/knem/" &&
		cp -a "$mods/$rel" "$root/lib/modules/" &&
		cp "$stage/etc/udev/rules.d/99-knem.rules" "$root/etc/udev/rules.d/" &&
		printf '%s %s\n%s\n' "$want_mode" "$want_gid" "$2" >"$root/etc/knem-expect" &&
		echo "$group_line" >"$root/etc/group" &&
		copy_with_libs "$kmod_bin" "$root" usr/bin/kmod &&
		copy_with_libs "$udevadm_bin" "$root" usr/bin/udevadm &&
		ln -s ../../bin/udevadm "$root/usr/lib/systemd/systemd-udevd" &&
		cp "$testdir"/* "$root/tests/" ||
		{ why="cannot pack the guest image in $root"; return 1; }
	for l in modprobe modinfo depmod lsmod insmod rmmod; do
		ln -s ../bin/kmod "$root/usr/sbin/$l"
	done
	(cd "$root" && find . -print0 | cpio --null -o -H newc --owner=0:0 --quiet | gzip -1) >"$dir/initrd.gz" ||
		{ why="cannot pack $dir/initrd.gz"; return 1; }
	boot_guest "$rel" "$dir/initrd.gz" "$dir/console.log"
	verdict "$rel" "$dir/console.log" "$testdir"
	[ -z "$why" ]
}

if ! d add >"$log" 2>&1; then
	echo "FAIL dkms add: $(tail -n1 "$log")"
	exit 1
fi
fail=0
for rel in $kernels; do
	hdr=/usr/src/linux-headers-$rel
	if [ ! -d "$hdr" ]; then
		echo "FAIL $rel: no headers in $hdr (make deps installs linux-headers-$rel)"
		fail=1
		continue
	fi
	if ! d build -k "$rel" --kernelsourcedir "$hdr" >"$log" 2>&1; then
		echo "FAIL $rel: dkms build: $(grep -m1 -i 'error' "$log" || tail -n1 "$log")"
		fail=1
		continue
	fi
	# --no-depmod: dkms's depmod would write the host's /lib/modules;
	# the staged tree's is made below.
	mkdir -p "$mods/$rel"
	if ! d install -k "$rel" --kernelsourcedir "$hdr" --force --no-depmod >"$log" 2>&1; then
		echo "FAIL $rel: dkms install: $(tail -n1 "$log")"
		fail=1
		continue
	fi
	ko=$mods/$rel/updates/dkms/knem.ko
	if [ ! -f "$ko" ] && [ -f "$ko.xz" ]; then ko=$ko.xz; fi
	if [ ! -f "$ko" ]; then
		echo "FAIL $rel: dkms install left no $ko"
		fail=1
		continue
	fi
	magic=$(modinfo -F vermagic "$ko")
	if [ "${magic%% *}" != "$rel" ]; then
		echo "FAIL $rel: $ko has vermagic '$magic'"
		fail=1
		continue
	fi
	# modprobe resolves the name through modules.dep: depmod over the
	# staged tree must find knem in updates/dkms.
	if ! depmod -b "$stage" "$rel" 2>"$log" || ! modprobe -d "$stage" -S "$rel" --show-depends knem 2>>"$log" | grep -q "updates/dkms/knem.ko"; then
		echo "FAIL $rel: modprobe does not resolve knem to the DKMS module: $(tail -n1 "$log")"
		fail=1
		continue
	fi
	why=
	if ! guest_check "$rel" "/lib/modules${ko#"$mods"}"; then
		echo "FAIL $rel: in the guest: $why"
		fail=1
		d remove -k "$rel" --no-depmod >"$log" 2>&1
		continue
	fi
	if ! d remove -k "$rel" --no-depmod >"$log" 2>&1 || [ -e "$ko" ]; then
		echo "FAIL $rel: dkms remove left $ko: $(tail -n1 "$log")"
		fail=1
		continue
	fi
	echo "PASS $rel (dkms build, install, vermagic ${magic%% *}; in the guest udevd, modprobe knem, /dev/knem mode $want_mode gid $want_gid, $ntests knem tests, modprobe -r; dkms remove)"
done
# The host's DKMS state and module trees are as they were.
if [ "$(host_state)" != "$host_before" ]; then
	echo "FAIL dkms-test: the host's /var/lib/dkms or /lib/modules changed: $(host_state)"
	fail=1
fi
exit $fail
