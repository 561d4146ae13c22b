// Package ioat finds out whether large copies can be offloaded to a DMA
// engine on this machine, and says in words what is missing when they
// cannot. It discovers; it does not decide: whether one transfer goes to
// the engine is threshold.DecideCopy, the DMA_min rule of Buntinas,
// Goglin, Goodell, Mercier and Moreaud, "Cache-Efficient, Intranode,
// Large-Message MPI Communication with MPICH2-Nemesis" (ICPP 2009, §3.5).
//
// Offload goes through the KNEM-ABI module: it copies with a dmaengine
// DMA_MEMCPY channel (Intel I/OAT, DSA through idxd, or any memcpy-capable
// provider) when the copy command carries the DMA flag. Two facts decide
// whether that works here, and [Discover] gathers both:
//
//   - the module's GET_INFO answer, whose DMA feature bit says it holds a
//     usable channel (asked through package knem, which holds the one Go
//     copy of the ABI);
//   - the channels in /sys/class/dma, which say what hardware exists even
//     when the module is not loaded (sysfs does not expose a channel's
//     capabilities, so known memcpy drivers are recognised by name).
//
// [Status.Offload] is the answer threshold.Transfer.Offload wants, and
// [Status.Missing] says what stands between this machine and offload
// ("module not loaded: /dev/knem missing — modprobe knem"). Discover never
// fails: what could not be read is recorded in the Status, and each reader
// takes its input as a value so that recorded sysfs trees test it.
package ioat
