#!/bin/sh
# Regenerates the /sys fixtures for package ioat: each is a "sys" root with
# class/dma/dmaNchanM symlinks into devices/, as dmaengine lays them out
# (the channel's "device" link points at the DMA controller, whose "driver"
# link names the driver bound to it).
# Usage: cd ioat/testdata && sh mksysfs.sh
set -eu

relink() { ln -sfn "$(realpath -m --relative-to="$(dirname "$2")" "$1")" "$2"; }

# chan ROOT DEVPATH DRIVER NAME IN_USE MEMCPY_COUNT BYTES_TRANSFERRED
chan() {
	dev=$1/devices/$2
	mkdir -p "$dev/dma/$4" "$1/class/dma" "$1/bus/drivers/$3"
	relink "$1/bus/drivers/$3" "$dev/driver"
	echo "$5" >"$dev/dma/$4/in_use"
	echo "$6" >"$dev/dma/$4/memcpy_count"
	echo "$7" >"$dev/dma/$4/bytes_transferred"
	ln -sfn "../../../$(basename "$dev")" "$dev/dma/$4/device"
	relink "$dev/dma/$4" "$1/class/dma/$4"
}

# Intel I/OAT (Crystal Beach 3): one DMA device per PCI function, one
# channel each, bound to ioatdma; KNEM holds (in_use) and used two of them.
rm -rf ioat && mkdir ioat
for f in 0 1 2 3; do
	used=$((f < 2))
	chan ioat "pci0000:00/0000:00:04.$f" ioatdma "dma${f}chan0" $used $((used * 1200)) $((used * 314572800))
done

# A platform DMA controller whose driver this package does not know: sysfs
# cannot tell whether it does DMA_MEMCPY.
rm -rf platform && mkdir platform
chan platform "platform/ff7c0000.dma-controller" dw_axi_dmac dma0chan0 0 0 0
chan platform "platform/ff7c0000.dma-controller" dw_axi_dmac dma0chan1 0 0 0

# The project's test-only provider (kmod/softdma) in a QEMU guest: a
# platform device with two DMA_MEMCPY channels, which KNEM holds.
rm -rf softdma && mkdir softdma
chan softdma "platform/softdma.0" softdma dma0chan0 1 0 0
chan softdma "platform/softdma.0" softdma dma0chan1 1 0 0

# No DMA engine: the class directory exists and is empty (this machine).
rm -rf none && mkdir -p none/class/dma && touch none/class/dma/.keep
