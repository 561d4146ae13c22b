package knemlmt

import (
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"github.com/knemesis/knemesis/lmt"
)

func knemHandle(cookie, n uint64) []byte {
	h := make([]byte, handleLen)
	binary.LittleEndian.PutUint64(h, cookie)
	binary.LittleEndian.PutUint64(h[8:], n)
	return h
}

// TestDecodeHandleCorrupt: a knem handle of the wrong size, with another
// length than the RTS or without a cookie is refused, naming the peer and
// the field.
func TestDecodeHandleCorrupt(t *testing.T) {
	for _, tc := range []struct {
		name   string
		h      []byte
		msgLen int64
		want   string
	}{
		{"short", make([]byte, handleLen-1), 1, "knemesis: rank 2 wrote a corrupt knem handle: 15 bytes, want 16"},
		{"long", make([]byte, handleLen+1), 1, "knemesis: rank 2 wrote a corrupt knem handle: 17 bytes, want 16"},
		{"length differs", knemHandle(7, 4096), 4095, "knemesis: rank 2 wrote a corrupt message length of a knem handle: 4096 bytes, the RTS says 4095"},
		{"negative length", knemHandle(7, math.MaxUint64), 4095, "knemesis: rank 2 wrote a corrupt message length of a knem handle: 9223372036854775807 bytes, the RTS says 4095"},
		{"no cookie", knemHandle(0, 4096), 4096, "knemesis: rank 2 wrote a corrupt cookie of a knem handle: 0 for 4096 bytes"},
	} {
		c, _, err := decodeHandle(2, tc.h, tc.msgLen)
		var ce *lmt.CorruptError
		if c != 0 || !errors.As(err, &ce) || ce.Rank != 2 || err.Error() != tc.want {
			t.Errorf("%s: cookie %#x, error %v\nwant 0, %s", tc.name, uint64(c), err, tc.want)
		}
	}
	if c, _, err := decodeHandle(2, knemHandle(0, 0), 0); c != 0 || err != nil {
		t.Errorf("empty message: cookie %#x, error %v; want 0, nil", c, err)
	}
	if c, cached, err := decodeHandle(2, knemHandle(0xabc, 5), 5); c != 0xabc || cached || err != nil {
		t.Errorf("good handle: cookie %#x, cached %v, error %v; want 0xabc, false, nil", c, cached, err)
	}
	if c, cached, err := decodeHandle(2, knemHandle(0xabc, 5|cachedBit), 5); c != 0xabc || !cached || err != nil {
		t.Errorf("cached region's handle: cookie %#x, cached %v, error %v; want 0xabc, true, nil", c, cached, err)
	}
}

// FuzzDecodeHandle: no handle panics the decoder, and an accepted one
// repeats the RTS's length and has a cookie unless the message is empty.
func FuzzDecodeHandle(f *testing.F) {
	f.Add(knemHandle(0xabc, 5), int64(5))
	f.Add(knemHandle(0, 0), int64(0))
	f.Add(knemHandle(0, 9), int64(9))
	f.Add(knemHandle(1, math.MaxUint64), int64(-1))
	f.Add([]byte{1}, int64(0))
	f.Fuzz(func(t *testing.T, h []byte, msgLen int64) {
		c, _, err := decodeHandle(1, h, msgLen)
		if err != nil {
			if !errors.Is(err, lmt.ErrCorrupt) || c != 0 {
				t.Fatalf("refusal %v with cookie %#x", err, uint64(c))
			}
			return
		}
		if len(h) != handleLen || int64(binary.LittleEndian.Uint64(h[8:])&^cachedBit) != msgLen || c == 0 && msgLen != 0 {
			t.Fatalf("accepted %x for %d bytes", h, msgLen)
		}
	})
}
