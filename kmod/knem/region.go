package knem

import (
	"fmt"
	"math"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/knemesis/knemesis/kmod/knem/internal/uapi"
)

// Cookie names a region. Any process may hold it; the driver checks who
// uses it. The zero Cookie never names a region.
type Cookie uint64

func (c Cookie) String() string { return fmt.Sprintf("knem:%#016x", uint64(c)) }

// Flags select how a region is created and how a copy runs.
type Flags uint32

const (
	// FlagDMA copies with a DMA engine (see FeatureDMA).
	FlagDMA Flags = uapi.FlagDMA
	// FlagAsyncDMAComplete returns before a DMA copy finishes; its status
	// slot tells when it did.
	FlagAsyncDMAComplete Flags = uapi.FlagAsyncDMAComplete
	// FlagDMAThread submits DMA from the context's kernel thread.
	FlagDMAThread Flags = uapi.FlagDMAThread
	// FlagMemcpyThread copies on the context's kernel thread, asynchronously.
	FlagMemcpyThread Flags = uapi.FlagMemcpyThread
	// FlagPinLocal pins the local pages before copying.
	FlagPinLocal Flags = uapi.FlagPinLocal
	// FlagSingleUse makes a region's cookie valid for one copy only; the
	// driver destroys the region after it.
	FlagSingleUse Flags = uapi.FlagSingleUse
	// FlagNotifyFD also queues the status slot of an asynchronous copy on
	// the descriptor when it completes (see Device.Notifications).
	FlagNotifyFD Flags = uapi.FlagNotifyFD
	// FlagAnyUserAccess lets processes of other users copy from or to the
	// region.
	FlagAnyUserAccess Flags = uapi.FlagAnyUserAccess
)

// Protection says which copies a region allows: ProtRead lets others read
// it, ProtWrite lets them write it.
type Protection uint32

const (
	ProtRead  Protection = unix.PROT_READ
	ProtWrite Protection = unix.PROT_WRITE
)

// stackIovecs is how many buffers a command describes without allocating.
const stackIovecs = 8

// heapSink makes every buffer handed to the driver escape to the Go heap:
// a goroutine stack may move, and the driver would then keep writing to its
// old pages. The store never runs; the compiler cannot know.
var (
	heapSink  [][]byte
	neverTrue bool
)

func escape(bufs [][]byte) {
	if neverTrue {
		heapSink = bufs
	}
}

// iovecs fills the ABI iovec array for bufs, in stack when it fits; the
// caller keeps bufs alive across the ioctl.
func iovecs(stack *[stackIovecs]uapi.ParamIovec, bufs [][]byte) ([]uapi.ParamIovec, error) {
	if len(bufs) > math.MaxUint32 {
		return nil, fmt.Errorf("%d buffers, at most %d", len(bufs), uint32(math.MaxUint32))
	}
	iov := stack[:0]
	if len(bufs) > stackIovecs {
		iov = make([]uapi.ParamIovec, 0, len(bufs))
	}
	for _, b := range bufs {
		var base uint64
		if len(b) > 0 {
			base = uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
		}
		iov = append(iov, uapi.ParamIovec{Base: base, Len: uint64(len(b))})
	}
	return iov, nil
}

// iovecPtr is the user pointer of an iovec array (nil when empty). It is
// a pointer, never an integer, so that it follows the array if the stack
// that holds it moves before the ioctl (internal/uapi says why).
func iovecPtr(iov []uapi.ParamIovec) *uapi.ParamIovec {
	if len(iov) == 0 {
		return nil
	}
	return &iov[0]
}

// CreateRegion declares bufs, in order, as one region of the driver and
// returns its cookie. prot says whether others may read it, write it or
// both; flags may hold FlagSingleUse and FlagAnyUserAccess. The driver pins
// the pages: keep bufs referenced until DestroyRegion (or the single use).
func (d *Device) CreateRegion(bufs [][]byte, prot Protection, flags Flags) (Cookie, error) {
	return d.createRegion(bufs, prot, flags, 0)
}

// createRegion is CREATE_REGION; slot is the invalidation status slot of
// FlagInvalidateStatus (watch.go), ignored without it.
func (d *Device) createRegion(bufs [][]byte, prot Protection, flags Flags, slot Slot) (Cookie, error) {
	escape(bufs)
	var stack [stackIovecs]uapi.ParamIovec
	iov, err := iovecs(&stack, bufs)
	if err != nil {
		return 0, &Error{Op: "CREATE_REGION", Err: err}
	}
	c := uapi.CreateRegion{
		IovecArray: iovecPtr(iov),
		IovecNr:    uint32(len(iov)),
		Flags:      uint32(flags),
		Protection: uint32(prot),
		// With FlagInvalidateStatus; KNEM's pad otherwise.
		InvalidateStatus: uint32(slot),
	}
	err = d.ioctl("CREATE_REGION", uapi.CmdCreateRegion, unsafe.Pointer(&c))
	keepAlive(bufs, iov)
	if err != nil {
		return 0, err
	}
	return Cookie(c.Cookie), nil
}

// DestroyRegion releases a region created through d and unpins its pages.
// Copies in flight from or to it finish first.
func (d *Device) DestroyRegion(c Cookie) error {
	cookie := uint64(c)
	return d.ioctl("DESTROY_REGION", uapi.CmdDestroyRegion, unsafe.Pointer(&cookie))
}
