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
// A long [FlagDMA] copy may be split over several DMA channels
// ([DMAChannels] says how many); nothing in the calls changes.
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
// come to map others; with [FeatureInvalidate], [Device.CreateWatchedRegion]
// has the driver flag a status slot when that may have happened, so that
// a registration cache checks with one load.
//
// # Memory rules
//
// The driver holds the pages of a region (and of an asynchronous copy's
// local buffers) until the region is destroyed or the copy completes. The
// bindings make sure such buffers live on the Go heap, which never moves;
// the caller keeps them referenced (and unmodified, for a read region) as
// long as the driver may use them.
//
// Every failure is a *[Error] naming the command; errors.Is(err,
// unix.EINVAL) and friends see the errno the driver returned.
// [ReadInfo] reads GET_INFO without write access and without refusing a
// driver of another ABI, so that a diagnosis can say which one it found.
// docs/design/knem.md tells where the ABI's Go layout is kept, and how it
// is checked against the C header.
package knem
