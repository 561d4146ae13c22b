package lmt_test

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/knemesis/knemesis/datatype"
	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/lmt/lmttest"
)

// fallbackGuard fills the receive bases of the tests below.
const fallbackGuard = 0x5A

// longType describes 6,000 blocks of 12 bytes, 4 to 6 bytes apart: 72,000
// bytes, every block under Config.SmallBlock, whose encoding (about 12 KB)
// neither an RTS nor a CTS holds.
func longType(t testing.TB) *datatype.Type {
	lens, disps := make([]int64, 6000), make([]int64, 6000)
	for i := range lens {
		lens[i], disps[i] = 12, int64(i)*16+int64(i%3)
	}
	typ, err := datatype.Indexed(lens, disps)
	if err != nil {
		t.Fatal(err)
	}
	return typ
}

// shortType describes 72,000 bytes in 9 blocks, one of them under a page.
func shortType(t testing.TB) *datatype.Type {
	lens := []int64{100, 8000, 8000, 8000, 8000, 8000, 8000, 8000, 15900}
	disps := make([]int64, len(lens))
	var end int64
	for i, l := range lens {
		disps[i] = end + 3
		end = disps[i] + l
	}
	typ, err := datatype.Indexed(lens, disps)
	if err != nil {
		t.Fatal(err)
	}
	return typ
}

// side is a buffer (typ nil) or a description over a base of its extent,
// its bytes random for a sender, fallbackGuard for a receiver.
func side(rng *rand.Rand, typ *datatype.Type, size int64, send bool) lmttest.Side {
	s := lmttest.Side{Type: typ, Base: make([]byte, size)}
	if typ != nil {
		s.Base = make([]byte, typ.Extent()+1)
	}
	for i := range s.Base {
		s.Base[i] = fallbackGuard
		if send {
			s.Base[i] = byte(rng.Uint32())
		}
	}
	return s
}

// TestTypedFallback: a message between a plain buffer and a description
// too long for any RTS or CTS, or a short one, on either side or both,
// with the engines' preferences of a job (a stream backend first, then
// CMA): each arrives whole, on the backend the rules of lmt.Datatyped
// give it, each side staging exactly what that backend stages. A plain
// sender's shm message to a long description stays on shm, which walks
// the blocks (no CTS could name them to cma-write); to a short one it
// moves to cma-write, in place; the receiver of a cma message pulls into
// its blocks whatever their number; a long description sends by
// cma-write, whose RTS needs none, and to another long one it falls back
// to shm. Without CMA, shm carries a typed send of either length.
func TestTypedFallback(t *testing.T) {
	const n = 72000
	long, short := longType(t), shortType(t)
	small := func(typ *datatype.Type) int64 {
		if typ == nil {
			return 0
		}
		return typ.Classify(datatype.DefaultSmallBlock).SmallBytes
	}
	cases := []struct {
		name       string
		prefer     []string
		send, recv *datatype.Type
		backend    string
		stages     bool
	}{
		{"buffer to long, shm first", []string{lmt.Shm, lmt.CMA, lmt.CMAWrite}, nil, long, lmt.Shm, false},
		{"buffer to short, shm first", []string{lmt.Shm, lmt.CMA, lmt.CMAWrite}, nil, short, lmt.CMAWrite, true},
		{"buffer to long, cma first", []string{lmt.CMA, lmt.Shm}, nil, long, lmt.CMA, true},
		{"long to buffer", []string{lmt.Shm, lmt.CMA, lmt.CMAWrite}, long, nil, lmt.CMAWrite, true},
		{"long to long", []string{lmt.Shm, lmt.CMA, lmt.CMAWrite}, long, long, lmt.Shm, false},
		{"long to short", []string{lmt.Shm, lmt.CMA, lmt.CMAWrite}, long, short, lmt.CMAWrite, true},
		{"long to buffer, no CMA", []string{lmt.Shm}, long, nil, lmt.Shm, false},
		{"short to long, no CMA", []string{lmt.Shm}, short, long, lmt.Shm, false},
	}
	rng := rand.New(rand.NewPCG(29, 2))
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := lmttest.NewLoop(t, c.prefer...)
			s, r := side(rng, c.send, n, true), side(rng, c.recv, n, false)
			snd, rcv := l.Start(t, s, r, make([]byte, 1024))
			l.Wait(t, snd, rcv)
			if err := errors.Join(snd.Err(), rcv.Err()); err != nil {
				t.Fatal(err)
			}
			msg := s.Packed()
			if got, want := crc32.ChecksumIEEE(r.Packed()), crc32.ChecksumIEEE(msg); got != want {
				t.Fatalf("received CRC %#x, the reference pack's %#x", got, want)
			}
			if !bytes.Equal(r.Base, r.Expect(msg, fallbackGuard)) {
				t.Fatal("the receive base differs from the reference unpack over its guard")
			}
			var staged [2]int64
			if c.stages {
				staged = [2]int64{small(c.send), small(c.recv)}
			}
			got := [2]int64{snd.Stats().Staged, rcv.Stats().Staged}
			if snd.Backend() != c.backend || rcv.Backend() != c.backend || got != staged {
				t.Errorf("via %s and %s, staged %v (sender, receiver); want %s, %v", snd.Backend(), rcv.Backend(), got, c.backend, staged)
			}
		})
	}
}

// TestTypedFallbackRefused: with no stream backend to fall back to, a
// plain send by cma-write to a description too long for its CTS fails on
// both sides, the receiver's error an *lmt.Unavailable naming the reason
// and the fix, the sender's the receiver's words, and nothing is written
// to the receive base.
func TestTypedFallbackRefused(t *testing.T) {
	l := lmttest.NewLoop(t, lmt.CMAWrite)
	rng := rand.New(rand.NewPCG(29, 3))
	long := longType(t)
	s, r := side(rng, nil, long.Size(), true), side(rng, long, 0, false)
	snd, rcv := l.Start(t, s, r, make([]byte, 1024))
	l.Wait(t, snd, rcv)
	reason := fmt.Sprintf("the 6000-block receive description needs a %d-byte handle, a CTS has room for 1072", 40+long.EncodedLen())
	want := "lmt: no fallback among [cma-write]: lmt: backend cma-write unavailable with rank 0: " + reason +
		" (fix: put a stream backend (shm, pipe, vmsplice) in Config.Prefer: it takes a description of any length; or receive into fewer blocks)"
	var u *lmt.Unavailable
	if err := rcv.Err(); err == nil || err.Error() != want || !errors.As(err, &u) || u.Reason != reason || u.Backend != lmt.CMAWrite {
		t.Errorf("receiver: %v\nwant %s", err, want)
	}
	var re *lmt.RemoteError
	if err := snd.Err(); !errors.As(err, &re) || re.Rank != 1 || !strings.Contains(re.Msg, reason) {
		t.Errorf("sender: %v, want the receiver's refusal", err)
	}
	if !bytes.Equal(r.Base, bytes.Repeat([]byte{fallbackGuard}, len(r.Base))) {
		t.Error("the refused receive wrote into its base")
	}
}

// TestTypedFallbackNoAlloc: in steady state, none of the ways a
// description too long for an RTS or a CTS travels allocates, on either
// side: a buffer sent by shm to it (the receiver stays), it sent to a
// buffer (cma passed over for cma-write), and to another (the receiver
// refuses cma-write and falls back to shm), though every message makes
// those choices again.
func TestTypedFallbackNoAlloc(t *testing.T) {
	long := longType(t)
	for _, c := range []struct {
		name       string
		send, recv *datatype.Type
		backend    string
	}{
		{"buffer to long", nil, long, lmt.Shm},
		{"long to buffer", long, nil, lmt.CMAWrite},
		{"long to long", long, long, lmt.Shm},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := lmttest.NewLoop(t, lmt.Shm, lmt.CMA, lmt.CMAWrite)
			rng := rand.New(rand.NewPCG(29, 4))
			s, r := side(rng, c.send, long.Size(), true), side(rng, c.recv, long.Size(), false)
			rts := make([]byte, 1024)
			var err error
			allocs := testing.AllocsPerRun(10, func() {
				snd, rcv := l.Start(t, s, r, rts)
				l.Wait(t, snd, rcv)
				err = errors.Join(err, snd.Err(), rcv.Err())
				if rcv.Backend() != c.backend {
					err = fmt.Errorf("received via %s, want %s", rcv.Backend(), c.backend)
				}
				l.Engs[0].Release(snd)
				l.Engs[1].Release(rcv)
			})
			if err != nil {
				t.Fatal(err)
			}
			if allocs != 0 {
				t.Errorf("%v allocations per message, want 0", allocs)
			}
			if !bytes.Equal(r.Base, r.Expect(s.Packed(), fallbackGuard)) {
				t.Error("the receive base differs from the reference unpack over its guard")
			}
		})
	}
}
