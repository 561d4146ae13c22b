#!/usr/bin/env bash
# make dkms-test: the knem module installed the way a site installs it.
#
#   1. make install DESTDIR=<staging>: the layout DKMS expects
#      (/usr/src/knem-<version>/{dkms.conf,module,uapi}) and the udev rule;
#   2. for every kernel of ci/kernels.txt (the QEMU guests' kernels, whose
#      headers make deps installs): dkms add, build against that kernel's
#      headers and install, each into a private DKMS tree and module tree
#      under the staging directory, so that the host's /var/lib/dkms and
#      /lib/modules are never touched;
#   3. the installed knem.ko must sit in updates/dkms of that kernel, with
#      that kernel's vermagic, and depmod must resolve "knem" to it, as
#      modprobe would;
#   4. the udev rule must give the misc device "knem" mode 0666;
#   5. dkms remove: the module and DKMS's record of it are gone.
#
# What this does not do: boot the guest from the DKMS-installed tree. The
# guests of ci/test-kernel.sh are a busybox initramfs without udev or dkms
# (they load the module that ci/ builds with kmod/build.sh, from the same
# sources and against the same headers); the DKMS build here is the real
# one, against the guest kernel's headers.
#
# Prints one line per kernel (PASS <release> / FAIL <release>: <why>) and
# exits non-zero when any fails.
set -uo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
kernels=${KCI_KERNELS:-$(grep -v '^[[:space:]]*\(#\|$\)' "$repo/ci/kernels.txt")}
version=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"/\1/p' "$repo/kmod/knem/dkms.conf")

command -v dkms >/dev/null || { echo "FAIL dkms-test: dkms not installed (apt-get install dkms; make deps installs it)"; exit 1; }

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

# The udev rule, read as udev matches it: the misc device named knem.
rule=$(grep -v '^#' "$stage/etc/udev/rules.d/99-knem.rules")
case $rule in
*'KERNEL=="knem"'*'SUBSYSTEM=="misc"'*'MODE="0666"'*) ;;
*) echo "FAIL 99-knem.rules: no MODE 0666 for the misc device knem: $rule"; exit 1 ;;
esac

dkms_tree=$stage/var/lib/dkms
mods=$stage/lib/modules
mkdir -p "$dkms_tree" "$mods"
# dkms signs what it builds, with a key it makes in /var/lib/dkms when
# there is none: this one is made in the staging tree too.
export mok_signing_key=$stage/mok.key mok_certificate=$stage/mok.pub
d() { dkms "$@" -m knem -v "$version" --dkmstree "$dkms_tree" --sourcetree "$stage/usr/src" --installtree "$mods"; }

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
	if ! d remove -k "$rel" --no-depmod >"$log" 2>&1 || [ -e "$ko" ]; then
		echo "FAIL $rel: dkms remove left $ko: $(tail -n1 "$log")"
		fail=1
		continue
	fi
	echo "PASS $rel (dkms build, install, modprobe resolution, remove; vermagic $magic)"
done
# The host's DKMS state and module trees are as they were.
if [ "$(host_state)" != "$host_before" ]; then
	echo "FAIL dkms-test: the host's /var/lib/dkms or /lib/modules changed: $(host_state)"
	fail=1
fi
exit $fail
