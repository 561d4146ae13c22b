package knem

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/knemesis/knemesis/kmod/knem/internal/uapi"
)

// DevicePath is where udev creates the misc device of the module.
const DevicePath = "/dev/knem"

// ABIVersion is the only ABI version these bindings speak.
const ABIVersion = uapi.Version

// ErrNoDevice is wrapped by Open's error when the module is not loaded.
var ErrNoDevice = errors.New("knem: no " + DevicePath + " (is the knem module loaded?)")

// ErrABI is wrapped by Open's error when the driver speaks another ABI.
var ErrABI = errors.New("knem: driver ABI mismatch")

// Error reports a failed driver command.
type Error struct {
	Op  string // the ioctl or operation: "CREATE_REGION", "mmap", ...
	Err error  // a unix.Errno, or a validation error of the bindings
}

func (e *Error) Error() string { return "knem: " + e.Op + ": " + e.Err.Error() }

// Unwrap lets errors.Is(err, unix.EINVAL) see the errno.
func (e *Error) Unwrap() error { return e.Err }

// Device is one open file descriptor of /dev/knem: a driver context that
// owns the regions created through it, its status array and its offload
// thread. Its methods may be called from several goroutines at once.
type Device struct {
	fd     int
	status *StatusArray
}

// Open opens DevicePath for reading and writing and checks that the driver
// speaks ABI 0xd.
func Open() (*Device, error) {
	return OpenPath(DevicePath)
}

// OpenPath is Open on another device node. The descriptor is opened
// O_NONBLOCK: only reads of notifications look at that flag, and
// Notifications waits with poll(2) instead.
func OpenPath(path string) (*Device, error) {
	fd, err := openNode(path, unix.O_RDWR|unix.O_NONBLOCK)
	if err != nil {
		return nil, err
	}
	d := &Device{fd: fd}
	info, err := d.Info()
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	if info.ABI != ABIVersion {
		unix.Close(fd)
		return nil, fmt.Errorf("%w: %s speaks ABI %#x, want %#x", ErrABI, path, info.ABI, ABIVersion)
	}
	return d, nil
}

// ReadInfo runs GET_INFO on the device node at path and checks nothing:
// what a diagnosis needs where the driver speaks another ABI. The node is
// opened read-write, because KNEM refuses every command on a read-only
// descriptor (EBADF); a user who may not write the node gets Open's
// permission error, which the diagnosis reports as such. Its errors are Open's:
// one wrapping [ErrNoDevice] (and the errno) when no driver is behind
// path, a *[Error] with Op "GET_INFO" when the node takes no KNEM command.
func ReadInfo(path string) (Info, error) {
	fd, err := openNode(path, unix.O_RDWR)
	if err != nil {
		return Info{}, err
	}
	d := Device{fd: fd}
	defer d.Close()
	return d.Info()
}

// openNode opens the device node, telling a missing driver from the rest.
func openNode(path string, mode int) (int, error) {
	fd, err := unix.Open(path, mode|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENXIO) || errors.Is(err, unix.ENODEV) {
		return -1, fmt.Errorf("%w: open %s: %w", ErrNoDevice, path, err)
	}
	if err != nil {
		return -1, &Error{Op: "open " + path, Err: err}
	}
	return fd, nil
}

// Close releases the context: the driver destroys every region created
// through it and unmaps nothing that is still mapped (call
// StatusArray.Unmap first, or let the process exit).
func (d *Device) Close() error {
	if d.fd < 0 {
		return &Error{Op: "close", Err: unix.EBADF}
	}
	err := unix.Close(d.fd)
	d.fd = -1
	if err != nil {
		return &Error{Op: "close", Err: err}
	}
	return nil
}

// Fd returns the file descriptor, for poll(2) on notifications.
func (d *Device) Fd() int { return d.fd }

// Info describes the driver.
type Info struct {
	ABI          uint32   // ABIVersion for a compatible driver
	Features     Features // what the driver can do here
	IgnoredFlags Flags    // flags the driver accepts and ignores
	ForcedFlags  Flags    // flags the driver always applies
}

// Features is the feature set of GET_INFO.
type Features uint32

// FeatureDMA says that a DMA_MEMCPY channel is usable: FlagDMA copies run
// on a DMA engine.
const FeatureDMA Features = uapi.FeatureDMA

// Info runs GET_INFO.
func (d *Device) Info() (Info, error) {
	var c uapi.Info
	if err := d.ioctl("GET_INFO", uapi.CmdGetInfo, unsafe.Pointer(&c)); err != nil {
		return Info{}, err
	}
	return Info{ABI: c.Abi, Features: Features(c.Features),
		IgnoredFlags: Flags(c.IgnoredFlags), ForcedFlags: Flags(c.ForcedFlags)}, nil
}

// ioctl issues one command. It allocates only on failure.
func (d *Device) ioctl(op string, cmd uintptr, arg unsafe.Pointer) error {
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(d.fd), cmd, uintptr(arg))
	if errno != 0 {
		return &Error{Op: op, Err: errno}
	}
	return nil
}
