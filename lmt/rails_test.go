package lmt

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// TestCut: the cut follows the read rail's share of the speed, on a page
// boundary, and is the half while a rail is unmeasured or the backend is
// not weighed; neither rail gets less than a sixteenth of a message.
func TestCut(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name        string
		read, write float64
		weighed     bool
		length      int64
		want        int64
	}{
		{"unmeasured", 0, 0, true, 4*mib + 1, 2 * mib},
		{"write unmeasured", 2, 0, true, 4 * mib, 2 * mib},
		{"not weighed", 3, 1, false, 4 * mib, 2 * mib},
		{"1:1", 1, 1, true, 4*mib + 8191, 2 * mib},
		{"3:1", 3, 1, true, 4 * mib, 3 * mib},
		{"1:3", 0.25, 0.75, true, 4 * mib, mib},
		{"read 100x faster", 100, 1, true, 16 * mib, 15 * mib},
		{"write 100x faster", 1, 100, true, 16 * mib, mib},
		{"under a page", 3, 1, true, 4095, 0},
		{"empty", 3, 1, true, 0, 0},
	} {
		r := railRates{ReadRail: tc.read, WriteRail: tc.write}
		if got := r.cut(tc.length, tc.weighed); got != tc.want {
			t.Errorf("%s: cut of %d bytes at %g:%g = %d, want %d", tc.name, tc.length, tc.read, tc.write, got, tc.want)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		r := railRates{rng.Float64() * 10, rng.Float64() * 10}
		n := rng.Int64N(1 << 34)
		if c := r.cut(n, true); c < 0 || c > n || c%4096 != 0 {
			t.Fatalf("cut of %d bytes at %v = %d: outside the message or off a page", n, r, c)
		}
	}
}

// TestLearn: the first measure of a rail is taken as it is, later ones
// move the rate by a quarter of their difference; an empty piece or an
// untimed one teaches nothing.
func TestLearn(t *testing.T) {
	var r railRates
	r.learn(ReadRail, 1000, 100*time.Nanosecond)
	r.learn(WriteRail, 1000, 0)
	r.learn(WriteRail, 0, time.Second)
	if r != (railRates{10, 0}) {
		t.Fatalf("after one read measure: %v, want [10 0]", r)
	}
	r.learn(ReadRail, 1800, 100*time.Nanosecond)
	if math.Abs(r[ReadRail]-12) > 1e-9 {
		t.Fatalf("after a second read measure of 18 B/ns: %v, want 12", r[ReadRail])
	}
}

// TestReadCutCorrupt: a sender refuses a CTS whose cut lies outside the
// message, or that is too short to hold one, naming the peer and field.
func TestReadCutCorrupt(t *testing.T) {
	cts := func(c int64, extra int) []byte {
		p := make([]byte, cutLen+extra)
		binary.LittleEndian.PutUint64(p, uint64(c))
		return p
	}
	for _, tc := range []struct {
		name string
		p    []byte
		want string
	}{
		{"short", make([]byte, 7), "lmt: rank 3 wrote a corrupt split CTS: 7 bytes of payload, shorter than its 8-byte cut"},
		{"past the end", cts(101, 16), "lmt: rank 3 wrote a corrupt cut of a split CTS: byte 101, outside the 100-byte message"},
		{"negative", cts(-1, 16), "lmt: rank 3 wrote a corrupt cut of a split CTS: byte -1, outside the 100-byte message"},
	} {
		c, h, err := readCut(decodeTarget(100), tc.p)
		if c != 0 || h != nil || !errors.Is(err, ErrCorrupt) || err.Error() != tc.want {
			t.Errorf("%s: cut %d, handle %v, error %v\nwant 0, nil, %s", tc.name, c, h, err, tc.want)
		}
	}
	c, h, err := readCut(decodeTarget(100), cts(100, 16))
	if c != 100 || len(h) != 16 || err != nil {
		t.Errorf("cut at the end: %d, %d-byte handle, %v", c, len(h), err)
	}
}
