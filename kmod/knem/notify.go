package knem

import (
	"errors"
	"io"
	"runtime"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/knemesis/knemesis/kmod/knem/internal/uapi"
)

// Notifications waits up to timeout for asynchronous copies issued with
// FlagNotifyFD to complete and stores their status slots in slots. It
// returns how many it stored: 0 when none completed in time. A negative
// timeout waits forever. The slots' status bytes hold the outcomes.
//
// The driver queues as many completions as the status array has slots; a
// copy submitted while the queue is full fails with EBUSY, so a program
// using FlagNotifyFD must call Notifications to make room. Without a
// status array it fails with EINVAL (poll reports POLLERR).
func (d *Device) Notifications(slots []Slot, timeout time.Duration) (int, error) {
	if len(slots) == 0 {
		return 0, nil
	}
	ms := -1
	if timeout >= 0 {
		ms = int((timeout + time.Millisecond - 1) / time.Millisecond)
	}
	// The descriptor is non-blocking (see OpenPath): read takes what is
	// queued, up to len(slots), and poll does the waiting.
	buf := unsafe.Slice((*byte)(unsafe.Pointer(&slots[0])), len(slots)*4)
	fds := [1]unix.PollFd{{Fd: int32(d.fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds[:], ms)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return 0, &Error{Op: "poll notifications", Err: err}
		}
		if n == 0 {
			return 0, nil
		}
		if fds[0].Revents&unix.POLLERR != 0 {
			return 0, &Error{Op: "poll notifications (no status array)", Err: unix.EINVAL}
		}
		n, err = unix.Read(d.fd, buf)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			continue // another reader took them first
		}
		if err != nil {
			return 0, &Error{Op: "read notifications", Err: err}
		}
		if n%4 != 0 || n == 0 {
			return 0, &Error{Op: "read notifications", Err: io.ErrUnexpectedEOF}
		}
		return n / 4, nil
	}
}

// Stats returns the driver's statistics, as text, from a read-only
// descriptor of DevicePath.
func Stats() (string, error) { return StatsPath(DevicePath) }

// StatsPath is Stats on another device node.
func StatsPath(path string) (string, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", &Error{Op: "open " + path, Err: err}
	}
	defer unix.Close(fd)
	var out []byte
	buf := make([]byte, 4096)
	for len(out) < 1<<20 {
		n, err := unix.Read(fd, buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return "", &Error{Op: "read statistics", Err: err}
		}
		if n == 0 {
			break
		}
		out = append(out, buf[:n]...)
	}
	return string(out), nil
}

// BindFlags say where the context's offloaded copies may run. The module
// keeps them on CPUs the caller may run on (its affinity, which its cpuset
// bounds): a request naming none of those is no error, as in KNEM 1.1, and
// means all of them.
type BindFlags uint32

const (
	// BindCustom binds the copies to the CPUs of the mask.
	BindCustom BindFlags = uapi.BindFlagCustom
	// BindCurrent binds them to the CPUs the caller may run on.
	BindCurrent BindFlags = uapi.BindFlagCurrent
	// BindCurrentReversed asks for every CPU except those, which leaves
	// none the caller may use: the copies run on the caller's CPUs.
	BindCurrentReversed BindFlags = uapi.BindFlagCurrentReversed
)

// BindOffload places the context's offloaded copies (FlagMemcpyThread,
// FlagDMAThread). mask is read with BindCustom and ignored otherwise.
func (d *Device) BindOffload(flags BindFlags, mask *unix.CPUSet) error {
	c := uapi.BindOffload{Flags: uint32(flags)}
	if mask != nil {
		c.MaskLen = uint32(unsafe.Sizeof(*mask))
		c.MaskPtr = unsafe.Pointer(mask)
	}
	err := d.ioctl("BIND_OFFLOAD", uapi.CmdBindOffload, unsafe.Pointer(&c))
	runtime.KeepAlive(mask)
	return err
}
