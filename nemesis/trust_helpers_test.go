package nemesis

import (
	"errors"
	"testing"

	"github.com/knemesis/knemesis/jobkey"
	"github.com/knemesis/knemesis/peerfault"
)

// testKey is the key of the segments the tests create by hand.
var testKey = func() jobkey.Key {
	k, err := jobkey.New()
	if err != nil {
		panic(err)
	}
	return k
}()

// wantCorrupt fails t unless err is a *peerfault.Error of kind ErrCorrupt
// naming rank and a field.
func wantCorrupt(t testing.TB, err error, rank int) *peerfault.Error {
	t.Helper()
	var pe *peerfault.Error
	if !errors.As(err, &pe) || !errors.Is(err, ErrCorrupt) || pe.Rank != rank || pe.Field == "" || pe.Reason == "" {
		t.Fatalf("%v: want a *peerfault.Error of kind ErrCorrupt naming rank %d and a field", err, rank)
	}
	return pe
}

// forgive undoes distrust of rank on ep, so that a fuzz target goes on
// with the same endpoints: what failPeer failed stays failed.
func forgive(ep *Endpoint, rank int) {
	p := &ep.peers[rank]
	p.dead, p.asm = nil, assembly{}
	ep.nGone--
	ep.crashed = nil
}
