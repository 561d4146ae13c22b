package cma_test

import (
	"testing"

	"github.com/knemesis/knemesis/datatype"
	"github.com/knemesis/knemesis/lmt"
)

// TestTypedHandleRoom: an indexed description whose encoding does not fit
// the RTS is refused at the start, saying how many bytes it needs.
func TestTypedHandleRoom(t *testing.T) {
	p := newPair(t, lmt.CMA)
	lens, disps := make([]int64, 1000), make([]int64, 1000)
	for i := range lens {
		lens[i], disps[i] = 8, int64(i)*16
	}
	typ, err := datatype.Indexed(lens, disps)
	if err != nil {
		t.Fatal(err)
	}
	base := make([]byte, typ.Extent())
	rts := make([]byte, 1024) // a 32-byte header, 992 bytes for the handle
	_, _, err = p.Engs[0].StartSendType(1, base, typ, lmt.CMA, rts)
	want := "lmt: backend cma: the 1000-block description needs a 2043-byte handle, 992 RTS bytes"
	if err == nil || err.Error() != want {
		t.Errorf("forced cma: %v\nwant %s", err, want)
	}
	_, _, err = p.Engs[0].StartSendType(1, base, typ, "", rts)
	want = "lmt: no backend available for rank 1: " + want
	if err == nil || err.Error() != want {
		t.Errorf("preferred: %v\nwant %s", err, want)
	}
}
