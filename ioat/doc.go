// Package ioat finds out whether large copies can be offloaded to a DMA
// engine, and decides per transfer whether to do so.
//
// Offload goes through the KNEM-ABI module: it copies with a dmaengine
// DMA_MEMCPY channel (Intel I/OAT, DSA through idxd, or any memcpy-capable
// provider) when the copy command carries the DMA flag. Two facts decide
// whether that works here, and [Discover] gathers both:
//
//   - the module's GET_INFO answer, whose DMA feature bit says it holds a
//     usable channel;
//   - the channels in /sys/class/dma, which say what hardware exists even
//     when the module is not loaded (sysfs does not expose a channel's
//     capabilities, so known memcpy drivers are recognised by name).
//
// [Status.Missing] says in words what stands between this machine and
// offload ("module not loaded: /dev/knem missing — modprobe knem").
//
// [Decide] is the per-transfer choice of §3.3–§3.5 of Buntinas et al.
// (ICPP 2009): a CPU copy below DMA_min (lowered when several transfers run
// at once), asynchronous DMA with completion written into the status array
// above it, synchronous DMA when no status slot is free.
package ioat
