package lmt

import (
	"encoding/binary"
	"errors"
	"math"
	"testing"
)

// pkt builds a control packet with the given header words and payload.
func pkt(typ, kind, status, reserved byte, n uint32, length uint64, payload []byte) []byte {
	p := make([]byte, hdrLen+len(payload))
	p[0], p[1], p[2], p[3] = typ, kind, status, reserved
	binary.LittleEndian.PutUint32(p[4:], n)
	binary.LittleEndian.PutUint64(p[8:], 5)
	binary.LittleEndian.PutUint64(p[16:], 6)
	binary.LittleEndian.PutUint64(p[24:], length)
	copy(p[hdrLen:], payload)
	return p
}

// TestParseHeaderCorrupt: every header field out of bounds is refused
// with a CorruptError naming the rank that wrote it and the field.
func TestParseHeaderCorrupt(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    []byte
		want string
	}{
		{"short", make([]byte, hdrLen-1), "knemesis: rank 3 wrote a corrupt control packet: 31 bytes, shorter than the 32-byte header"},
		{"type 0", pkt(0, 1, 0, 0, 0, 1, nil), "knemesis: rank 3 wrote a corrupt control packet type: 0, not 1 (RTS), 2 (CTS) or 3 (DONE)"},
		{"type 4", pkt(4, 1, 0, 0, 0, 1, nil), "knemesis: rank 3 wrote a corrupt control packet type: 4, not 1 (RTS), 2 (CTS) or 3 (DONE)"},
		{"reserved", pkt(1, 1, 0, 9, 0, 1, nil), "knemesis: rank 3 wrote a corrupt reserved byte of a control packet: 9, not 0"},
		{"status", pkt(3, 1, 2, 0, 0, 1, nil), "knemesis: rank 3 wrote a corrupt DONE status: 2, not 0 (ok) or 1 (failed)"},
		{"payload past the packet", pkt(1, 1, 0, 0, 17, 1, make([]byte, 16)), "knemesis: rank 3 wrote a corrupt RTS payload length: 17 bytes, but 16 follow the header"},
		{"payload 2^32-1", pkt(2, 1, 0, 0, math.MaxUint32, 1, nil), "knemesis: rank 3 wrote a corrupt CTS payload length: 4294967295 bytes, but 0 follow the header"},
		{"negative length", pkt(1, 1, 0, 0, 0, 1<<63, nil), "knemesis: rank 3 wrote a corrupt RTS length: -9223372036854775808, negative"},
		{"length -1", pkt(2, 1, 0, 0, 0, math.MaxUint64, nil), "knemesis: rank 3 wrote a corrupt CTS length: -1, negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h header
			payload, err := parseHeader(tc.p, &h, 3)
			var ce *CorruptError
			if payload != nil || !errors.As(err, &ce) || ce.Rank != 3 || !errors.Is(err, ErrCorrupt) || err.Error() != tc.want {
				t.Fatalf("parseHeader: payload %v, error %v\nwant nil and %s", payload, err, tc.want)
			}
		})
	}
	// The largest good packet of each kind passes, with its payload.
	for typ := pktRTS; typ <= pktDone; typ++ {
		var h header
		payload, err := parseHeader(pkt(byte(typ), 255, statusFailed, 0, 4, math.MaxInt64, []byte("abcdef")), &h, 3)
		if err != nil || string(payload) != "abcd" || h.typ != typ || h.length != math.MaxInt64 || h.src != 5 || h.dst != 6 {
			t.Fatalf("%s: payload %q, header %+v, error %v", typ, payload, h, err)
		}
	}
}

// handleOf encodes a segment handle as a peer would.
func handleOf(pid, n uint32, segs ...Segment) []byte {
	h := make([]byte, 16+16*len(segs))
	binary.LittleEndian.PutUint32(h[0:], pid)
	binary.LittleEndian.PutUint32(h[4:], n)
	binary.LittleEndian.PutUint64(h[8:], 77)
	for i, s := range segs {
		binary.LittleEndian.PutUint64(h[16+16*i:], s.Addr)
		binary.LittleEndian.PutUint64(h[24+16*i:], s.Len)
	}
	return h
}

// decodeTarget is a receiving transfer of length bytes from rank 3 with
// MaxSegments 4.
func decodeTarget(length int64) *Transfer {
	return &Transfer{e: &Engine{cfg: Config{MaxSegments: 4}}, peer: 3, length: length, remote: make([]Segment, 0, 4)}
}

// TestDecodeSegmentsCorrupt: each field of a segment handle out of bounds
// is refused with a CorruptError naming the peer and the field, and
// leaves no remote segment behind.
func TestDecodeSegmentsCorrupt(t *testing.T) {
	big := uint64(math.MaxUint64 / 2)
	for _, tc := range []struct {
		name string
		h    []byte
		want string
	}{
		{"short handle", make([]byte, 15), "knemesis: rank 3 wrote a corrupt segment handle: 15 bytes, shorter than its 16-byte header"},
		{"pid 0", handleOf(0, 1, Segment{0x1000, 100}), "knemesis: rank 3 wrote a corrupt pid in a segment handle: 0, outside 1..4194304"},
		{"pid past PID_MAX_LIMIT", handleOf(1<<22+1, 1, Segment{0x1000, 100}), "knemesis: rank 3 wrote a corrupt pid in a segment handle: 4194305, outside 1..4194304"},
		{"too many segments", handleOf(9, 5, Segment{0x1000, 100}), "knemesis: rank 3 wrote a corrupt segment count of a segment handle: 5, above Config.MaxSegments 4"},
		{"2^32-2 segments", handleOf(9, math.MaxUint32-1), "knemesis: rank 3 wrote a corrupt segment count of a segment handle: 4294967294, above Config.MaxSegments 4"},
		// The count 2^32-1 says that a datatype description follows.
		{"typed without its base", handleOf(9, math.MaxUint32), "knemesis: rank 3 wrote a corrupt typed handle: 16 bytes, shorter than its 40-byte header"},
		{"short buffer", handleOf(9, 2, Segment{0x1000, 100}), "knemesis: rank 3 wrote a corrupt segment handle: 32 bytes, 2 segments need 48"},
		{"wraps the address space", handleOf(9, 1, Segment{math.MaxUint64 - 10, 100}), "knemesis: rank 3 wrote a corrupt segment 0 of a segment handle: 100 bytes at 0xfffffffffffffff5 wrap around the address space"},
		{"total overflows", handleOf(9, 3, Segment{0x1000, big}, Segment{0x1000, big}, Segment{0x1000, 2}),
			"knemesis: rank 3 wrote a corrupt segment 2 of a segment handle: 2 bytes after 18446744073709551614 overflow a 64-bit total"},
		{"shorter than the message", handleOf(9, 2, Segment{0x1000, 40}, Segment{0x9000, 59}), "knemesis: rank 3 wrote a corrupt segment handle: its 2 segments hold 99 bytes, shorter than the 100 to move"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := decodeTarget(100)
			pid, ns, err := DecodeSegments(tr, tc.h)
			var ce *CorruptError
			if pid != 0 || ns != 0 || !errors.As(err, &ce) || ce.Rank != 3 || !errors.Is(err, ErrCorrupt) || err.Error() != tc.want {
				t.Fatalf("DecodeSegments: pid %d, ns %d, error %v\nwant 0, 0, %s", pid, ns, err, tc.want)
			}
			if len(tr.Remote()) != 0 {
				t.Fatalf("a refused handle left %d remote segments", len(tr.Remote()))
			}
		})
	}
	tr := decodeTarget(100)
	pid, ns, err := DecodeSegments(tr, handleOf(1<<22, 2, Segment{0x1000, 40}, Segment{0x9000, 60}))
	if err != nil || pid != 1<<22 || ns != 77 || len(tr.Remote()) != 2 || tr.Remote()[1] != (Segment{0x9000, 60}) {
		t.Fatalf("good handle: pid %d, ns %d, remote %v, error %v", pid, ns, tr.Remote(), err)
	}
}

// FuzzParseHeader: no packet makes the decoder panic or hand out a
// payload past the packet, and what it accepts has every field in bounds.
func FuzzParseHeader(f *testing.F) {
	f.Add(pkt(1, 1, 0, 0, 0, 1<<20, nil))
	f.Add(pkt(2, 3, 0, 0, 16, 4096, make([]byte, 16)))
	f.Add(pkt(3, 1, 1, 0, 5, 0, []byte("error")))
	f.Add(pkt(1, 1, 0, 0, 0, 1<<63, nil))
	f.Add(pkt(2, 1, 0, 0, math.MaxUint32, 1, nil))
	f.Add(make([]byte, 5))
	f.Fuzz(func(t *testing.T, p []byte) {
		var h header
		payload, err := parseHeader(p, &h, 1)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) || payload != nil {
				t.Fatalf("refusal %v with payload %d bytes", err, len(payload))
			}
			return
		}
		if h.typ < pktRTS || h.typ > pktDone || h.status > statusFailed || h.length < 0 || len(payload) > len(p)-hdrLen {
			t.Fatalf("accepted %+v with %d payload bytes of %d", h, len(payload), len(p))
		}
	})
}

// FuzzDecodeSegments: no handle makes the decoder panic, and one it
// accepts names at most MaxSegments segments, none wrapping the address
// space, that cover the message.
func FuzzDecodeSegments(f *testing.F) {
	f.Add(handleOf(9, 1, Segment{0x1000, 100}), int64(100))
	f.Add(handleOf(9, 4, Segment{0x1000, 25}, Segment{0x2000, 25}, Segment{0x3000, 25}, Segment{0x4000, 25}), int64(100))
	f.Add(handleOf(9, 3, Segment{0x1000, math.MaxUint64 / 2}, Segment{0x1000, math.MaxUint64 / 2}, Segment{0x1000, 2}), int64(1))
	f.Add(handleOf(9, math.MaxUint32), int64(0))
	f.Add(handleOf(0, 0), int64(0))
	f.Add([]byte{1, 2, 3}, int64(0))
	f.Fuzz(func(t *testing.T, h []byte, length int64) {
		if length < 0 {
			length = -length
		}
		tr := decodeTarget(length)
		_, _, err := DecodeSegments(tr, h)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) || len(tr.Remote()) != 0 {
				t.Fatalf("refusal %v leaves %d segments", err, len(tr.Remote()))
			}
			return
		}
		if tr.dt.hasRemote {
			return // a typed handle: decodeTyped checked its datatype, and it has no segments
		}
		var total uint64
		for _, s := range tr.Remote() {
			if s.Addr+s.Len < s.Addr || total+s.Len < total {
				t.Fatalf("accepted segment %+v after %d bytes", s, total)
			}
			total += s.Len
		}
		if len(tr.Remote()) > 4 || total < uint64(length) {
			t.Fatalf("accepted %d segments of %d bytes for %d", len(tr.Remote()), total, length)
		}
	})
}
