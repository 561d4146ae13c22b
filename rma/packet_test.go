package rma

import "testing"

// TestPacketLengths: a header with neither data nor b travels in shortLen
// bytes and parses back whole; any other length than shortLen or hdrLen +
// the data length it names is refused.
func TestPacketLengths(t *testing.T) {
	pkt := make([]byte, hdrLen+8)
	for _, c := range []struct {
		h    header
		data int
		want int
	}{
		{header{typ: pktNotify, win: 3, off: 4096, a: 8, tag: 7}, 0, shortLen},
		{header{typ: pktPut, win: 3, off: 16, b: 16}, 8, hdrLen + 8},
		{header{typ: pktAtomic, win: 1, off: 8, a: 5, b: 9}, 0, hdrLen},
	} {
		h := c.h
		h.n = uint32(c.data)
		h.put(pkt)
		if got := h.size(); got != c.want {
			t.Fatalf("%+v: %d bytes, want %d", h, got, c.want)
		}
		var back header
		data, ok := back.parse(pkt[:h.size()])
		if !ok || back != h || len(data) != c.data {
			t.Fatalf("%+v parsed back as %+v, %d bytes of data, ok %v", h, back, len(data), ok)
		}
	}
	h := header{typ: pktNotify, n: 4}
	h.put(pkt)
	for _, n := range []int{0, shortLen - 1, shortLen, shortLen + 1, hdrLen - 1, hdrLen, hdrLen + 3} {
		var back header
		if _, ok := back.parse(pkt[:n]); ok {
			t.Fatalf("a %d-byte packet whose header names 4 bytes of data parsed", n)
		}
	}
}
