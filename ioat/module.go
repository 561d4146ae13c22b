package ioat

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/knemesis/knemesis/kmod/knem"
)

// ModuleInfo is the GET_INFO answer, as package knem decodes it from the
// one Go copy of the KNEM ABI.
type ModuleInfo = knem.Info

// dma reports whether the module can offload copies.
func dma(m ModuleInfo) bool { return m.Features&knem.FeatureDMA != 0 }

// InfoReader answers GET_INFO. [Device] asks the module; tests inject
// answers.
type InfoReader interface {
	GetInfo() (ModuleInfo, error)
}

// ErrModuleNotLoaded means the device node does not exist.
var ErrModuleNotLoaded = errors.New("module not loaded")

// Device reads GET_INFO from the module's device node; "" means
// knem.DevicePath.
type Device string

// GetInfo opens the device and issues GET_INFO, whatever ABI the
// module speaks ([Discover] judges the answer).
func (d Device) GetInfo() (ModuleInfo, error) {
	p := string(d)
	if p == "" {
		p = knem.DevicePath
	}
	info, err := knem.ReadInfo(p)
	var ke *knem.Error
	switch {
	case errors.Is(err, unix.ENOENT):
		return ModuleInfo{}, fmt.Errorf("%w: %s missing — modprobe knem", ErrModuleNotLoaded, p)
	case errors.As(err, &ke) && ke.Op == "GET_INFO":
		return ModuleInfo{}, fmt.Errorf("GET_INFO on %s (not a KNEM device?): %w", p, ke.Err)
	case err != nil:
		return ModuleInfo{}, err
	}
	return info, nil
}
