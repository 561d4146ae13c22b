package vmsplice_test

import (
	"testing"

	"github.com/knemesis/knemesis/lmt/lmttest"
	"github.com/knemesis/knemesis/vmsplice"
)

func TestMatrix(t *testing.T)            { lmttest.RunMatrix(t, vmsplice.Name, nil) }
func TestTruncation(t *testing.T)        { lmttest.RunTruncation(t, vmsplice.Name) }
func TestSenderDies(t *testing.T)        { lmttest.RunPeerDies(t, vmsplice.Name, 0) }
func TestReceiverDies(t *testing.T)      { lmttest.RunPeerDies(t, vmsplice.Name, 1) }
func TestManyPairs(t *testing.T)         { lmttest.RunManyPairs(t, vmsplice.Name) }
func TestManySegments(t *testing.T)      { lmttest.RunManySegments(t, vmsplice.Name) }
func TestTypedShapes(t *testing.T)       { lmttest.RunTypedShapes(t, vmsplice.Name, true) }
func TestTypedSenderDies(t *testing.T)   { lmttest.RunTypedPeerDies(t, vmsplice.Name, 0) }
func TestTypedReceiverDies(t *testing.T) { lmttest.RunTypedPeerDies(t, vmsplice.Name, 1) }

// See package pipe's tests of the same name.
func TestSenderDiesAfterCTS(t *testing.T) {
	lmttest.RunSenderDiesAfterCTS(t, vmsplice.Name, []string{"vmsplice-0-1"})
}
func TestKilledAfterCTS(t *testing.T) {
	lmttest.RunKilledAfterCTS(t, vmsplice.Name, []string{"vmsplice-0-1"})
}
