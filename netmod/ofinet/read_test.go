//go:build ofi

package ofinet

import (
	"hash/crc32"
	"testing"

	"github.com/knemesis/knemesis/attach"
	"github.com/knemesis/knemesis/lmt"
)

// TestReadInParts: a long message between nodes is read in parts of
// readPart bytes (the last shorter), readDepth at most in flight, each a fi_read whose completion tells the
// receiving endpoint that the sender lives; the message arrives intact,
// and the parts allocate nothing.
func TestReadInParts(t *testing.T) {
	eps := joinPair(t)
	for _, ep := range eps {
		l, err := attach.Attach(ep, attach.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
	}
	const n = 5*readPart + 3
	msg := pattern(n, 4)
	buf := make([]byte, n)
	roundTrip, s := roundTrips(t, eps)
	m := eps[1].NetModule().(*Module)
	before := m.readParts
	roundTrip(msg, buf)
	if st, _ := attach.Stats(s); st.Backend != lmt.NetRead || crc32.ChecksumIEEE(buf) != crc32.ChecksumIEEE(msg) {
		t.Fatalf("%d bytes between nodes went by %q (want %s), checksum equal %v", n, st.Backend, lmt.NetRead, crc32.ChecksumIEEE(buf) == crc32.ChecksumIEEE(msg))
	}
	if got := m.readParts - before; got != 6 {
		t.Fatalf("%d bytes read in %d fi_reads, want 6 (parts of %d bytes)", n, got, readPart)
	}
	if a := testing.AllocsPerRun(5, func() { roundTrip(msg, buf) }); a != 0 {
		t.Errorf("a %d-byte message read in parts allocates %v times", n, a)
	}
}
