package lmt_test

import (
	"testing"

	"github.com/knemesis/knemesis/lmt/lmttest"
)

// The backends of this package; pipe and vmsplice run the same suites in
// their own packages.
var backends = []string{"shm", "cma", "cma-write", "cma-split"}

func TestMatrix(t *testing.T) {
	for _, b := range backends {
		t.Run(b, func(t *testing.T) { lmttest.RunMatrix(t, b, nil) })
	}
}

func TestTruncation(t *testing.T) {
	for _, b := range backends {
		t.Run(b, func(t *testing.T) { lmttest.RunTruncation(t, b) })
	}
}

func TestSenderDies(t *testing.T) {
	for _, b := range backends {
		t.Run(b, func(t *testing.T) { lmttest.RunPeerDies(t, b, 0) })
	}
}

func TestReceiverDies(t *testing.T) {
	for _, b := range backends {
		t.Run(b, func(t *testing.T) { lmttest.RunPeerDies(t, b, 1) })
	}
}

func TestManyPairs(t *testing.T) {
	for _, b := range backends {
		t.Run(b, func(t *testing.T) { lmttest.RunManyPairs(t, b) })
	}
}

func TestManySegments(t *testing.T) {
	for _, b := range backends {
		t.Run(b, func(t *testing.T) { lmttest.RunManySegments(t, b) })
	}
}
