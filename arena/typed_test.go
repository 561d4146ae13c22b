package arena_test

import (
	"bytes"
	"hash/crc32"
	"testing"

	"github.com/knemesis/knemesis/datatype"
	"github.com/knemesis/knemesis/lmt"
)

// TestArenaTypedReceive: a plain message by arena-copy (from ordinary
// memory) and by arena (from the sender's arena region) to a receive into
// 6,000 blocks of 12 bytes, whose description no CTS holds: the receiver
// takes the sender's backend, copies into its blocks without staging, and
// the blocks hold the message (CRC), every byte between them its guard.
// Before, an arena-copy sender, complete at its copy, could not follow
// the receiver's fallback, and both sides failed.
func TestArenaTypedReceive(t *testing.T) {
	lens, disps := make([]int64, 6000), make([]int64, 6000)
	for i := range lens {
		lens[i], disps[i] = 12, int64(i)*16+int64(i%3)
	}
	typ, err := datatype.Indexed(lens, disps)
	if err != nil {
		t.Fatal(err)
	}
	const guard = 0x6B
	for _, backend := range []string{lmt.ArenaCopy, lmt.Arena} {
		t.Run(backend, func(t *testing.T) {
			p := newPair(t, 2<<20)
			msg := make([]byte, typ.Size())
			if backend == lmt.Arena {
				if msg, err = p.alloc(0, int(typ.Size())); err != nil {
					t.Fatal(err)
				}
			}
			fill(msg, 5)
			base := bytes.Repeat([]byte{guard}, int(typ.Extent())+1)
			want := bytes.Repeat([]byte{guard}, len(base))
			c := typ.Cursor()
			c.Unpack(want, msg)
			rts := make([]byte, 512)
			s, n, err := p.eng[0].StartSend(1, [][]byte{msg}, backend, rts)
			if err != nil {
				t.Fatal(err)
			}
			r, err := p.eng[1].StartRecvType(0, rts[:n], base, typ)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; !s.Done() || !r.Done() || p.eng[0].InChannel() > 0; i++ {
				if i > 1e6 {
					t.Fatal("transfers never completed")
				}
				p.deliver(t)
			}
			got := make([]byte, typ.Size())
			typ.Pack(got, base)
			st := r.Stats()
			switch {
			case s.Err() != nil || r.Err() != nil:
				t.Fatalf("send: %v, receive: %v", s.Err(), r.Err())
			case crc32.ChecksumIEEE(got) != crc32.ChecksumIEEE(msg[:typ.Size()]):
				t.Fatal("the blocks' CRC differs from the message's")
			case !bytes.Equal(base, want):
				t.Fatal("a byte between the blocks was written")
			case st.Backend != backend || s.Backend() != backend || st.Bytes != typ.Size() || st.Staged != 0:
				t.Fatalf("receive stats %+v, send via %s; want %s both, %d bytes, none staged", st, s.Backend(), backend, typ.Size())
			}
		})
	}
}
