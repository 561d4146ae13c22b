package pipe_test

import (
	"testing"

	"github.com/knemesis/knemesis/lmt/lmttest"
	"github.com/knemesis/knemesis/pipe"
)

func TestMatrix(t *testing.T)            { lmttest.RunMatrix(t, pipe.Name, nil) }
func TestTruncation(t *testing.T)        { lmttest.RunTruncation(t, pipe.Name) }
func TestSenderDies(t *testing.T)        { lmttest.RunPeerDies(t, pipe.Name, 0) }
func TestReceiverDies(t *testing.T)      { lmttest.RunPeerDies(t, pipe.Name, 1) }
func TestManyPairs(t *testing.T)         { lmttest.RunManyPairs(t, pipe.Name) }
func TestManySegments(t *testing.T)      { lmttest.RunManySegments(t, pipe.Name) }
func TestTypedShapes(t *testing.T)       { lmttest.RunTypedShapes(t, pipe.Name, true) }
func TestTypedSenderDies(t *testing.T)   { lmttest.RunTypedPeerDies(t, pipe.Name, 0) }
func TestTypedReceiverDies(t *testing.T) { lmttest.RunTypedPeerDies(t, pipe.Name, 1) }

// The FIFO the receiver made for the CTS, and the sender never opened, goes
// with the job whether the receiver lives on or is killed too.
func TestSenderDiesAfterCTS(t *testing.T) {
	lmttest.RunSenderDiesAfterCTS(t, pipe.Name, []string{"pipe-0-1"})
}
func TestKilledAfterCTS(t *testing.T) {
	lmttest.RunKilledAfterCTS(t, pipe.Name, []string{"pipe-0-1"})
}
