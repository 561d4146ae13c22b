package ioat

import (
	"errors"
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// DevicePath is the KNEM-ABI module's character device.
const DevicePath = "/dev/knem"

// KNEM ABI facts this package needs (see docs/knem-abi.md); the Go
// bindings proper live in kmod/knem.
const (
	// ABIVersion is the only ABI clients accept.
	ABIVersion = 0xd
	// FeatureDMA is set in ModuleInfo.Features when the module holds a
	// usable DMA_MEMCPY channel.
	FeatureDMA = 1 << 0
	// FlagDMA asks a copy command to use the DMA engine.
	FlagDMA = 1 << 0
	// FlagAsyncDMAComplete lets the copy return at once; the engine writes
	// the completion into the status array.
	FlagAsyncDMAComplete = 1 << 1

	getInfoRequest = 0x40104B10 // GET_INFO, 16-byte argument
)

// ModuleInfo is the GET_INFO answer.
type ModuleInfo struct {
	ABI          uint32
	Features     uint32
	IgnoredFlags uint32 // flags the module accepts but ignores
	ForcedFlags  uint32 // flags the module sets on every command
}

// DMA reports whether the module can offload copies.
func (m ModuleInfo) DMA() bool { return m.Features&FeatureDMA != 0 }

// InfoReader answers GET_INFO. [Device] asks the module; tests inject
// answers.
type InfoReader interface {
	GetInfo() (ModuleInfo, error)
}

// ErrModuleNotLoaded means the device node does not exist.
var ErrModuleNotLoaded = errors.New("module not loaded")

// Device reads GET_INFO from the module's device node; "" means DevicePath.
type Device string

// GetInfo opens the device and issues GET_INFO.
func (d Device) GetInfo() (ModuleInfo, error) {
	p := string(d)
	if p == "" {
		p = DevicePath
	}
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return ModuleInfo{}, fmt.Errorf("%w: %s missing — modprobe knem", ErrModuleNotLoaded, p)
	}
	if err != nil {
		return ModuleInfo{}, &os.PathError{Op: "open", Path: p, Err: err}
	}
	defer unix.Close(fd)
	var info ModuleInfo
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), getInfoRequest, uintptr(unsafe.Pointer(&info)))
	if errno != 0 {
		return ModuleInfo{}, fmt.Errorf("GET_INFO on %s (not a KNEM device?): %w", p, errno)
	}
	return info, nil
}

// The ioctl argument is exactly the module's 16-byte struct.
var _ [16]byte = [unsafe.Sizeof(ModuleInfo{})]byte{}
