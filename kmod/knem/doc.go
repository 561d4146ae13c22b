// Package knem drives /dev/knem, the single-copy kernel module of knemesis,
// through the KNEM 0xd ABI that Open MPI, UCX and MPICH also speak.
//
// # The model
//
// A process declares some of its memory to the driver as a region and gets
// back a [Cookie], a 64-bit number it may send to any other process. A
// process holding the cookie asks the driver to copy between the region and
// its own memory ([Device.InlineCopy]) or between two regions
// ([Device.Copy]): the kernel copies once, straight from one address space
// to the other, with the CPU or with a DMA engine.
//
//	// sender
//	d, _ := knem.Open()
//	cookie, _ := d.CreateRegion([][]byte{msg}, knem.ProtRead, knem.FlagSingleUse)
//	// ... send cookie to the receiver ...
//
//	// receiver
//	d, _ := knem.Open()
//	st, err := d.InlineCopy(knem.Read, [][]byte{buf}, cookie, 0, knem.All, 0, 0)
//
// # Synchronous and asynchronous copies
//
// Without offload flags a copy is done when the call returns and its
// [Status] is [StatusSuccess]. With [FlagMemcpyThread] or [FlagDMA] the copy
// may still be running: the call returns [StatusPending] and the driver
// later writes the outcome into a slot of the status array, a page of memory
// shared with the kernel ([Device.MapStatus]). Allocating, polling and
// releasing slots takes no lock and no system call.
//
// A long [FlagDMA] copy is split by this driver over several DMA channels
// of the machine's engines, as a message over network rails; nothing in
// the calls changes, and [DMAChannels] says over how many.
//
// # Attached regions
//
// Where the driver reports [FeatureAttach] (a knemesis extension), a
// process may instead map a region it is allowed to copy into its own
// address space ([Device.Attach]) and copy with plain loads and stores,
// with no system call per message once attached. The same access rules
// apply; the mapping holds the region's pages until [Attachment.Close].
//
// A region keeps the pages it pinned even when its buffer's addresses
// come to map others (munmap and mmap, MADV_DONTNEED). Where the driver
// reports [FeatureInvalidate], [Device.CreateWatchedRegion] has it set a
// status slot to StatusFailed when that may have happened, so that a
// registration cache reusing regions across messages checks with one load
// instead of a system call.
//
// # Memory rules
//
// The driver holds the pages of a region (and of an asynchronous copy's
// local buffers) until the region is destroyed or the copy completes. The
// bindings make sure such buffers live on the Go heap, which never moves;
// the caller keeps them referenced (and unmodified, for a read region) as
// long as the driver may use them.
//
// # The ABI, once
//
// The Go layout of uapi/knem_io.h (structs, ioctl numbers, flags) exists in
// one place, the internal package uapi, whose test compiles the header with
// cgo and compares every size, offset and constant. This package's
// constants are defined from it, and every other package that needs an ABI
// fact takes it from here: package ioat reads GET_INFO through [ReadInfo],
// which, unlike [Open], neither needs write access to the node nor
// refuses a driver of another ABI, so that a diagnosis can say which one
// it found.
//
// # Errors
//
// Every failure is a *[Error] naming the command; errors.Is(err,
// unix.EINVAL) and friends see the errno the driver returned.
package knem
