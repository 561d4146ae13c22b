package shm_test

import (
	"testing"

	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/lmt/lmttest"
	_ "github.com/knemesis/knemesis/shm"
)

func TestMatrix(t *testing.T)            { lmttest.RunMatrix(t, lmt.Shm, nil) }
func TestTruncation(t *testing.T)        { lmttest.RunTruncation(t, lmt.Shm) }
func TestSenderDies(t *testing.T)        { lmttest.RunPeerDies(t, lmt.Shm, 0) }
func TestReceiverDies(t *testing.T)      { lmttest.RunPeerDies(t, lmt.Shm, 1) }
func TestManyPairs(t *testing.T)         { lmttest.RunManyPairs(t, lmt.Shm) }
func TestManySegments(t *testing.T)      { lmttest.RunManySegments(t, lmt.Shm) }
func TestTypedShapes(t *testing.T)       { lmttest.RunTypedShapes(t, lmt.Shm, false) }
func TestTypedSenderDies(t *testing.T)   { lmttest.RunTypedPeerDies(t, lmt.Shm, 0) }
func TestTypedReceiverDies(t *testing.T) { lmttest.RunTypedPeerDies(t, lmt.Shm, 1) }

func TestReceiverDiesBeforeCTS(t *testing.T) { lmttest.RunReceiverDiesBeforeCTS(t, lmt.Shm) }
