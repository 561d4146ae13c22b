package lmt

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// TestCut: the cut follows each rail's share of the speed, its boundaries
// on pages, and gives equal shares while a rail of the message is
// unmeasured or the backend is not weighed; no rail gets less than a
// sixteenth of a message. Two rails (read, write) leave the knem and ring
// rails' pieces empty, the write piece running to the end; three or four
// cut read, knem, write, ring in that order, the last piece running to the
// end of the message whatever its page.
func TestCut(t *testing.T) {
	const mib = 1 << 20
	three := twoRails | 1<<KnemRail
	ring := twoRails | 1<<RingRail
	four := three | 1<<RingRail
	for _, tc := range []struct {
		name    string
		rates   railRates // read, write, knem, ring
		weighed bool
		in      railSet
		length  int64
		want    bounds
	}{
		{"unmeasured", railRates{}, true, twoRails, 4*mib + 1, bounds{2 * mib, 2 * mib, 4*mib + 1}},
		{"write unmeasured", railRates{2, 0, 0}, true, twoRails, 4 * mib, bounds{2 * mib, 2 * mib, 4 * mib}},
		{"not weighed", railRates{3, 1, 0}, false, twoRails, 4 * mib, bounds{2 * mib, 2 * mib, 4 * mib}},
		{"1:1", railRates{1, 1, 0}, true, twoRails, 4*mib + 8191, bounds{2 * mib, 2 * mib, 4*mib + 8191}},
		{"3:1", railRates{3, 1, 0}, true, twoRails, 4 * mib, bounds{3 * mib, 3 * mib, 4 * mib}},
		{"1:3", railRates{0.25, 0.75, 0}, true, twoRails, 4 * mib, bounds{mib, mib, 4 * mib}},
		{"read 100x faster", railRates{100, 1, 0}, true, twoRails, 16 * mib, bounds{15 * mib, 15 * mib, 16 * mib}},
		{"write 100x faster", railRates{1, 100, 0}, true, twoRails, 16 * mib, bounds{mib, mib, 16 * mib}},
		{"knem measured, not offered", railRates{3, 1, 9}, true, twoRails, 4 * mib, bounds{3 * mib, 3 * mib, 4 * mib}},
		{"under a page", railRates{3, 1, 0}, true, twoRails, 4095, bounds{0, 0, 4095}},
		{"empty", railRates{3, 1, 0}, true, twoRails, 0, bounds{0, 0, 0}},
		// Three rails: thirds of 4 MiB + 1 are 1398101.67 bytes,
		// each boundary then down to its page.
		{"three unmeasured", railRates{}, true, three, 4*mib + 1, bounds{1396736, 2793472, 4*mib + 1}},
		{"three, knem unmeasured", railRates{3, 1, 0}, true, three, 4*mib + 1, bounds{1396736, 2793472, 4*mib + 1}},
		{"three not weighed", railRates{1, 1, 4}, false, three, 4*mib + 1, bounds{1396736, 2793472, 4*mib + 1}},
		{"1:1:1", railRates{2, 2, 2}, true, three, 3 * mib, bounds{mib, 2 * mib, 3 * mib}},
		// read 1, knem 2, write 1 of 12 MiB + 5: 3145729.25 and
		// 9437187.75, down to their pages.
		{"read 1 knem 2 write 1", railRates{1, 1, 2}, true, three, 12*mib + 5, bounds{3 * mib, 9 * mib, 12*mib + 5}},
		{"read 3 knem 1 write 4", railRates{3, 4, 1}, true, three, 16 * mib, bounds{6 * mib, 8 * mib, 16 * mib}},
		// knem measured 16x slower than the others: its share
		// (0.48 MiB) is below the sixteenth (1 MiB), which it gets,
		// and the two others share the rest.
		{"knem at the floor", railRates{1, 1, 0.0625}, true, three, 16 * mib, bounds{7.5 * mib, 8.5 * mib, 16 * mib}},
		// Two rails at the floor: read and knem get a sixteenth each.
		{"two at the floor", railRates{0.01, 100, 0.01}, true, three, 16 * mib, bounds{mib, 2 * mib, 16 * mib}},
		// The ring's piece comes last, after the write rail's.
		{"ring unmeasured", railRates{3, 1, 0, 0}, true, ring, 3 * mib, bounds{mib, mib, 2 * mib}},
		{"ring measured, not offered", railRates{3, 1, 0, 9}, true, twoRails, 4 * mib, bounds{3 * mib, 3 * mib, 4 * mib}},
		// Thirds of 3 MiB + 5: 1048577.67 bytes each.
		{"read:write:ring 1:1:1", railRates{2, 2, 0, 2}, true, ring, 3*mib + 5, bounds{mib, mib, 2 * mib}},
		{"read 3 write 1 ring 4", railRates{3, 1, 0, 4}, true, ring, 16 * mib, bounds{6 * mib, 6 * mib, 8 * mib}},
		{"ring at the floor", railRates{1, 1, 0, 0.0625}, true, ring, 16 * mib, bounds{7.5 * mib, 7.5 * mib, 15 * mib}},
		{"four 1:1:1:1", railRates{5, 5, 5, 5}, true, four, 16 * mib, bounds{4 * mib, 8 * mib, 12 * mib}},
	} {
		if got := tc.rates.cut(tc.length, tc.weighed, tc.in); got != tc.want {
			t.Errorf("%s: cut of %d bytes at %v over %03b = %v, want %v", tc.name, tc.length, tc.rates, tc.in, got, tc.want)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		r := railRates{rng.Float64() * 10, rng.Float64() * 10, rng.Float64() * 10, rng.Float64() * 10}
		n := rng.Int64N(1 << 34)
		in := []railSet{twoRails, three, ring, four}[rng.IntN(4)]
		b := r.cut(n, true, in)
		from := int64(0)
		for _, rail := range railOrder {
			f, to := b.piece(rail, n)
			switch {
			case f != from || to < f || to > n || (to != n && to%4096 != 0):
				t.Fatalf("cut of %d bytes at %v over %03b = %v: the %s rail's piece [%d, %d) is not in order, in the message and on a page (or at the end)", n, r, in, b, rail, f, to)
			case in.has(rail) && to-f < n/minShareDiv-4096:
				t.Fatalf("cut of %d bytes at %v over %03b = %v: the %s rail's piece has %d bytes, under a sixteenth less a page", n, r, in, b, rail, to-f)
			case !in.has(rail) && to != f:
				t.Fatalf("cut of %d bytes at %v over %03b = %v: a piece for the %s rail, not among the message's", n, r, in, b, rail)
			}
			from = to
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

// TestReadBoundsCorrupt: a sender refuses a CTS whose cut is too short to
// hold its boundaries, puts one outside the message or before the one
// before it, or gives a piece to a rail it did not offer, naming the peer
// and the field.
func TestReadBoundsCorrupt(t *testing.T) {
	cts := func(b bounds, extra int) []byte {
		p := make([]byte, boundsLen+extra)
		putBounds(p, &b)
		return p
	}
	three := twoRails | 1<<KnemRail
	ring := twoRails | 1<<RingRail
	for _, tc := range []struct {
		name string
		p    []byte
		in   railSet
		want string
	}{
		{"short", make([]byte, 23), three, "knemesis: rank 3 wrote a corrupt split CTS: 23 bytes of payload, shorter than its 24-byte cut"},
		{"past the end", cts(bounds{101, 101, 101}, 16), three, "knemesis: rank 3 wrote a corrupt cut of a split CTS: the read rail's piece ends at byte 101, outside the 100-byte message"},
		{"negative", cts(bounds{-1, 0, 100}, 16), three, "knemesis: rank 3 wrote a corrupt cut of a split CTS: the read rail's piece ends at byte -1, outside the 100-byte message"},
		{"knem past the end", cts(bounds{10, 1 << 62, 100}, 16), three, "knemesis: rank 3 wrote a corrupt cut of a split CTS: the knem rail's piece ends at byte 4611686018427387904, outside the 100-byte message"},
		{"backwards", cts(bounds{60, 40, 100}, 16), three, "knemesis: rank 3 wrote a corrupt cut of a split CTS: the knem rail's piece ends at byte 40, before it begins at byte 60"},
		{"knem not offered", cts(bounds{40, 60, 60}, 16), twoRails, "knemesis: rank 3 wrote a corrupt cut of a split CTS: a 20-byte piece for the knem rail, which this sender did not offer"},
		{"ring not offered", cts(bounds{40, 40, 60}, 16), three, "knemesis: rank 3 wrote a corrupt cut of a split CTS: a 40-byte piece for the ring rail, which this sender did not offer"},
		{"write past the end", cts(bounds{40, 40, 101}, 16), ring, "knemesis: rank 3 wrote a corrupt cut of a split CTS: the write rail's piece ends at byte 101, outside the 100-byte message"},
	} {
		b, h, err := readBounds(decodeTarget(100), tc.p, tc.in)
		if b != (bounds{}) || h != nil || !errors.Is(err, ErrCorrupt) || err.Error() != tc.want {
			t.Errorf("%s: cut %v, handle %v, error %v\nwant none, nil, %s", tc.name, b, h, err, tc.want)
		}
	}
	for _, tc := range []struct {
		b  bounds
		in railSet
	}{{bounds{100, 100, 100}, twoRails}, {bounds{0, 0, 100}, twoRails}, {bounds{40, 40, 100}, three}, {bounds{40, 60, 100}, three},
		{bounds{0, 100, 100}, three}, {bounds{30, 30, 70}, ring}, {bounds{10, 40, 70}, three | ring}} {
		b, h, err := readBounds(decodeTarget(100), cts(tc.b, 16), tc.in)
		if b != tc.b || len(h) != 16 || err != nil {
			t.Errorf("cut %v over %03b: %v, %d-byte handle, %v", tc.b, tc.in, b, len(h), err)
		}
	}
}

// TestBuffersAt: the buffers of a byte range of the message cross iovec
// entries, skip empty ones and stop at its end.
func TestBuffersAt(t *testing.T) {
	msg := make([]byte, 100)
	tr := &Transfer{iov: [][]byte{msg[:10], nil, msg[10:40], msg[40:41], {}, msg[41:]}}
	for _, tc := range []struct {
		from, to int64
		want     []int // lengths
		first    int   // offset of the first byte in msg
	}{
		{0, 100, []int{10, 30, 1, 59}, 0},
		{5, 45, []int{5, 30, 1, 4}, 5},
		{10, 40, []int{30}, 10},
		{40, 41, []int{1}, 40},
		{99, 100, []int{1}, 99},
		{50, 50, nil, 0},
	} {
		got := tr.BuffersAt(nil, tc.from, tc.to)
		var lens []int
		for _, b := range got {
			lens = append(lens, len(b))
		}
		if fmt.Sprint(lens) != fmt.Sprint(tc.want) || len(got) > 0 && &got[0][0] != &msg[tc.first] {
			t.Errorf("[%d, %d): lengths %v, want %v starting at byte %d", tc.from, tc.to, lens, tc.want, tc.first)
		}
	}
}
