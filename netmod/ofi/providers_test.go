//go:build ofi

package ofi

import (
	"hash/crc32"
	"testing"
)

// TestProviders runs a few messages and an RMA read through every other
// provider Debian 12's libfabric offers for FI_EP_RDM with FI_TAGGED,
// FI_MSG and FI_RMA on the loopback: the module names no provider but the
// one in Config.
func TestProviders(t *testing.T) {
	for _, prov := range []string{"udp;ofi_rxd", "shm", "sockets", "net;ofi_rxm"} {
		t.Run(prov, func(t *testing.T) {
			a, b := openPair(t, prov)
			if a.Provider() != prov {
				t.Fatalf("asked for %s, got %s", prov, a.Provider())
			}
			for _, n := range []int{0, 100, 1 << 20} {
				src, dst := make([]byte, n), make([]byte, n)
				fill(src, uint64(n))
				var s, r Request
				if err := b.Irecv(&r, 0, 1, 0, split(dst)); err != nil {
					t.Fatal(err)
				}
				if err := a.Isend(&s, 0, 1, header(n, 0), split(src)); err != nil {
					t.Fatal(err)
				}
				waitAll(t, []*Endpoint{a, b}, &s, &r)
				if s.Err() != nil || r.Err() != nil || r.Len != n {
					t.Fatalf("%d bytes: send %v, receive %v, Len %d", n, s.Err(), r.Err(), r.Len)
				}
				if crc32.Checksum(dst, castagnoli) != crc32.Checksum(src, castagnoli) {
					t.Fatalf("%d bytes: checksums differ", n)
				}
			}
			src, dst := make([]byte, 1<<20), make([]byte, 1<<20)
			fill(src, 8)
			var reg Region
			if err := a.Register(&reg, src); err != nil {
				t.Fatal(err)
			}
			var rd Request
			if err := b.Read(&rd, 0, dst, reg.Remote(), 0); err != nil {
				t.Fatal(err)
			}
			waitAll(t, []*Endpoint{a, b}, &rd)
			if rd.Err() != nil || crc32.Checksum(dst, castagnoli) != crc32.Checksum(src, castagnoli) {
				t.Fatalf("RMA read: %v, or checksums differ", rd.Err())
			}
		})
	}
}
