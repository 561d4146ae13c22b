package rma_test

import (
	"os"
	"testing"

	"github.com/knemesis/knemesis/kmod/knem"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/rma/internal/rmatest"
)

type kind = rmatest.Kind

var (
	allocated = rmatest.Allocated
	viaCMA    = rmatest.CMA
	viaAM     = rmatest.AM
	viaKnem   = rmatest.Knem

	run        = rmatest.Run
	pattern    = rmatest.Pattern
	crc        = rmatest.CRC
	checkRange = rmatest.CheckRange
	fill       = rmatest.Fill
)

// kinds are the window kinds this machine can run: knem only where the
// module is loaded (rma/internal/knemtest runs them in the QEMU guests).
func kinds(t *testing.T) []kind {
	ks := []kind{allocated, viaCMA, viaAM}
	if _, err := os.Stat(knem.DevicePath); err == nil {
		ks = append(ks, viaKnem)
	} else if _, child := launch.Self(); !child {
		t.Logf("knem windows not run here: %v (rma/internal/knemtest runs them in the QEMU guests)", err)
	}
	return ks
}
