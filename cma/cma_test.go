package cma_test

import (
	"testing"

	_ "github.com/knemesis/knemesis/cma"
	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/lmt/lmttest"
)

var backends = []string{lmt.CMA, lmt.CMAWrite, lmt.CMASplit, lmt.MultiRail}

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
