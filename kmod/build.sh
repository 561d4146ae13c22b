#!/bin/sh
# Build knem and softdma against one kernel header tree, out of the source
# tree so that several kernels can be built side by side:
#   kmod/build.sh /usr/src/linux-headers-<release> [outdir]
# leaves <outdir>/<release>/{knem.ko,softdma.ko}.  Any compiler warning
# fails the build (W=1 on; KCFLAGS=-Werror).
set -eu
kdir=$1
out=${2:-kmod/out}
here=$(cd "$(dirname "$0")" && pwd)
# Named after the header package (Debian's kernel.release file may differ
# from the image's uname -r, e.g. 6.1.192 for 6.1.0-56-amd64).
rel=$(basename "$kdir" | sed 's/^linux-headers-//')
work=$(mkdir -p "$out/$rel/src" && cd "$out/$rel/src" && pwd)
rm -rf "$work/knem" "$work/softdma"
mkdir -p "$work/knem"
cp -r "$here/knem/module" "$here/knem/uapi" "$work/knem/"
cp -r "$here/softdma" "$work/softdma"
for m in knem/module:knem softdma:softdma; do
	dir=${m%:*}
	make -s -C "$kdir" M="$work/$dir" W=1 KCFLAGS=-Werror modules 2>&1 |
		grep -v 'Skipping BTF generation' || true
	test -f "$work/$dir/${m#*:}.ko" ||
		{ echo "build of $dir failed for $rel" >&2; exit 1; }
done
cp "$work/knem/module/knem.ko" "$work/softdma/softdma.ko" "$out/$rel/"
echo "built $out/$rel/knem.ko $out/$rel/softdma.ko"
