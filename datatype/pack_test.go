package datatype

import (
	"bytes"
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

func TestPackMatchesReference(t *testing.T) {
	eachShape(t, 200, func(t *testing.T, s shape, _ *rand.Rand) {
		if s.t.Extent() != s.extent() {
			t.Errorf("Extent = %d, want %d", s.t.Extent(), s.extent())
		}
		src := pattern(s.extent()+7, 0x5a)
		want := refPack(s, src)
		if s.t.Size() != int64(len(want)) {
			t.Errorf("Size = %d, want %d", s.t.Size(), len(want))
		}
		packed := make([]byte, len(want)+3)
		n, err := s.t.Pack(packed, src)
		if err != nil || n != int64(len(want)) {
			t.Fatalf("Pack = %d, %v; want %d, nil", n, err, len(want))
		}
		if crc32.ChecksumIEEE(packed[:n]) != crc32.ChecksumIEEE(want) || !bytes.Equal(packed[:n], want) {
			t.Fatalf("packed bytes differ from the reference pack")
		}
		if !bytes.Equal(packed[n:], []byte{0, 0, 0}) {
			t.Fatalf("Pack wrote past the packed length: % x", packed[n:])
		}

		// Unpack scatters into the blocks and leaves the gaps alone.
		dst := bytes.Repeat([]byte{0xee}, len(src))
		if n, err := s.t.Unpack(dst, packed[:len(want)]); err != nil || n != int64(len(want)) {
			t.Fatalf("Unpack = %d, %v; want %d, nil", n, err, len(want))
		}
		in := make([]bool, len(src))
		for _, b := range s.blocks {
			for i := b.off; i < b.off+b.n; i++ {
				in[i] = true
			}
		}
		for i := range dst {
			if in[i] && dst[i] != src[i] || !in[i] && dst[i] != 0xee {
				t.Fatalf("Unpack: byte %d is %#x (in a block: %v), src %#x", i, dst[i], in[i], src[i])
			}
		}
	})
}

func TestPackShortBuffers(t *testing.T) {
	ty, err := Vector(3, 4, 10) // extent 24, size 12
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		do   func() (int64, error)
		want string
	}{
		{"pack dst", func() (int64, error) { return ty.Pack(make([]byte, 11), make([]byte, 24)) },
			"datatype: buffer too short: pack into 11 bytes, the description selects 12"},
		{"pack src", func() (int64, error) { return ty.Pack(make([]byte, 12), make([]byte, 23)) },
			"datatype: buffer too short: base buffer of 23 bytes, the description reaches byte 24"},
		{"unpack src", func() (int64, error) { return ty.Unpack(make([]byte, 24), make([]byte, 11)) },
			"datatype: buffer too short: unpack from 11 bytes, the description selects 12"},
		{"unpack dst", func() (int64, error) { return ty.Unpack(make([]byte, 23), make([]byte, 12)) },
			"datatype: buffer too short: base buffer of 23 bytes, the description reaches byte 24"},
	} {
		n, err := tc.do()
		if n != 0 || !errors.Is(err, ErrShortBuffer) || err.Error() != tc.want {
			t.Errorf("%s: %d, %v; want 0, %q", tc.name, n, err, tc.want)
		}
	}
}
