// Package knemtest opens the knem device for tests that drive the real
// driver. They run in the QEMU guests of make test-kernel
// (ci/test-kernel.sh), which load knem and the soft DMA provider and set
// KNEMESIS_KCI=1: there a missing device or DMA channel fails the test.
// Anywhere else the test skips, naming what is missing. (Package knem's
// own tests keep a copy of this: they cannot import it.)
package knemtest

import (
	"errors"
	"os"
	"testing"

	"github.com/knemesis/knemesis/kmod/knem"
)

// InGuest reports whether the test runs in a make test-kernel guest,
// where every capability is there by construction and nothing may skip.
func InGuest() bool { return os.Getenv("KNEMESIS_KCI") == "1" }

// Open opens the device, closed when the test ends, or skips the test
// where the module is not loaded.
func Open(tb testing.TB) *knem.Device {
	tb.Helper()
	d, err := knem.Open()
	if errors.Is(err, knem.ErrNoDevice) && !InGuest() {
		tb.Skipf("lacks knem-device: needs the knem module (%s absent): make test-kernel runs these tests in QEMU guests", knem.DevicePath)
	}
	if err != nil {
		tb.Fatalf("opening the knem device: %v", err)
	}
	tb.Cleanup(func() { d.Close() })
	return d
}

// HasDMA reports whether d offers DMA-engine copies; in a guest, where the
// soft provider is loaded, their absence fails the test.
func HasDMA(tb testing.TB, d *knem.Device) bool {
	tb.Helper()
	info, err := d.Info()
	if err != nil {
		tb.Fatal(err)
	}
	dma := info.Features&knem.FeatureDMA != 0
	if !dma && InGuest() {
		tb.Fatal("knem reports no DMA channel in the guest: is the soft DMA provider loaded?")
	}
	return dma
}
