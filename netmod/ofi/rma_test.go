//go:build ofi

package ofi

import (
	"errors"
	"hash/crc32"
	"testing"
)

// TestRead registers 64 MiB at one endpoint, sends its RemoteRegion in a
// message, as an RTS carries it, and has the other endpoint pull the whole
// region and a slice of it with fi_read.
func TestRead(t *testing.T) {
	a, b := pair(t)
	const n = 64 << 20
	src := make([]byte, n)
	fill(src, 99)
	var reg Region
	if err := a.Register(&reg, src); err != nil {
		t.Fatal(err)
	}
	var rts [RemoteRegionSize]byte
	reg.Remote().Put(rts[:])
	var s, r Request
	got := make([]byte, RemoteRegionSize)
	if err := b.Irecv(&r, 0, 1, 0, [][]byte{got}); err != nil {
		t.Fatal(err)
	}
	if err := a.Isend(&s, 0, 1, header(0, 0), [][]byte{rts[:]}); err != nil {
		t.Fatal(err)
	}
	waitAll(t, []*Endpoint{a, b}, &s, &r)
	rr := GetRemoteRegion(got)
	if rr != reg.Remote() || rr.Len != n {
		t.Fatalf("RTS carried %+v, region is %+v", rr, reg.Remote())
	}
	for _, c := range []struct{ off, len int }{{0, n}, {12345, 1 << 20}, {n - 1, 1}} {
		dst := make([]byte, c.len)
		var rd Request
		if err := b.Read(&rd, 0, dst, rr, uint64(c.off)); err != nil {
			t.Fatal(err)
		}
		waitAll(t, []*Endpoint{a, b}, &rd)
		if rd.Err() != nil || rd.Len != c.len {
			t.Fatalf("read of %d at %d: %v, Len %d", c.len, c.off, rd.Err(), rd.Len)
		}
		want := crc32.Checksum(src[c.off:c.off+c.len], castagnoli)
		if sum := crc32.Checksum(dst, castagnoli); sum != want {
			t.Fatalf("read of %d at %d: checksum %#x, want %#x", c.len, c.off, sum, want)
		}
	}
	if err := reg.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestReadBadKey reads with a key nobody registered: the read fails naming
// the peer, and does not hang.
func TestReadBadKey(t *testing.T) {
	a, b := pair(t)
	src := make([]byte, 4096)
	var reg Region
	if err := a.Register(&reg, src); err != nil {
		t.Fatal(err)
	}
	bad := reg.Remote()
	bad.Key += 1000
	var rd Request
	if err := b.Read(&rd, 0, make([]byte, 4096), bad, 0); err != nil {
		t.Fatal(err)
	}
	waitAll(t, []*Endpoint{a, b}, &rd)
	var pe *PeerError
	if !errors.As(rd.Err(), &pe) || pe.Peer != "endpoint a" || pe.Op != "read" {
		t.Fatalf("read with a bad key: %v, want a *PeerError naming endpoint a", rd.Err())
	}
	var code Errno
	if !errors.As(rd.Err(), &code) {
		t.Fatalf("read with a bad key: %v carries no libfabric code", rd.Err())
	}
	t.Logf("read with a bad key: %v", rd.Err())
	// tcp;ofi_rxm (libfabric 1.17) treats a bad key as a protocol error
	// and drops the connection: the next send to that peer fails, naming
	// it, instead of hanging.
	var s, r Request
	if err := a.Irecv(&r, 0, 2, 0, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.Isend(&s, 0, 2, header(0, 0), nil); err != nil {
		t.Fatal(err)
	}
	waitAll(t, []*Endpoint{a, b}, &s)
	if s.Err() == nil {
		return // a provider that keeps the connection
	}
	if !errors.As(s.Err(), &pe) || pe.Peer != "endpoint a" || !errors.Is(s.Err(), ErrPeerLost) {
		t.Fatalf("send after the connection dropped: %v, want ErrPeerLost naming endpoint a", s.Err())
	}
}

// TestReadKeyUnguessable: a process that can reach an endpoint but was
// never told a region's key cannot read it by guessing the keys a counter
// would have given (1, 2, 3): each read fails, while a peer told the key
// reads the region whole.
func TestReadKeyUnguessable(t *testing.T) {
	a, b := pair(t)
	src := make([]byte, 4096)
	fill(src, 7)
	regs := make([]Region, 3)
	for i := range regs {
		if err := a.Register(&regs[i], src); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { regs[i].Close() })
	}
	dst := make([]byte, len(src))
	var rd Request
	if err := b.Read(&rd, 0, dst, regs[0].Remote(), 0); err != nil {
		t.Fatal(err)
	}
	waitAll(t, []*Endpoint{a, b}, &rd)
	if rd.Err() != nil || crc32.Checksum(dst, castagnoli) != crc32.Checksum(src, castagnoli) {
		t.Fatalf("read with the region's key: %v, or the data differ", rd.Err())
	}
	out := open(t, 0)
	to, err := out.Insert(a.Name(), "endpoint a")
	if err != nil {
		t.Fatal(err)
	}
	for key := uint64(1); key <= 3; key++ {
		guess := regs[0].Remote()
		guess.Key = key
		clear(dst)
		var g Request
		if err := out.Read(&g, to, dst, guess, 0); err != nil {
			continue // refused at once: nothing read
		}
		waitAll(t, []*Endpoint{a, out}, &g)
		if g.Err() == nil {
			t.Fatalf("an outsider read %d bytes with the guessed key %d", g.Len, key)
		}
	}
}
