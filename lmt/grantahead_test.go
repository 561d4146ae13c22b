package lmt_test

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/lmt/lmttest"
	_ "github.com/knemesis/knemesis/pipe"
)

// startThree starts three messages from rank 0 of l and returns them.
func startThree(t *testing.T, l *loop, sizes [3]int) [3]sent {
	var s [3]sent
	for i, n := range sizes {
		m := make([]byte, n)
		lmttest.Fill(m, 11*i+1)
		s[i] = startSend(t, l, m)
	}
	return s
}

// TestGrantAhead: a pipe's receiver sends the CTS of every message it has
// matched at once, not one when the message ahead is read; the sender
// pushes them in the order of those CTSs whatever the order it started
// them in, so that each receive buffer gets its own message. Here the
// receiver matches the second message first, then the first and the third.
//
// These tests run on pipe: vmsplice runs on the same pipe/fifo channel,
// and this package's TestCheckErrors wants it unregistered here.
func TestGrantAhead(t *testing.T) {
	for _, noAhead := range []bool{false, true} {
		name := "pipe"
		if noAhead {
			name += "/NoGrantAhead"
		}
		t.Run(name, func(t *testing.T) {
			l := newLoopConfig(t, lmt.WithKnobs(lmt.Config{Prefer: []string{"pipe"}}, lmt.Knobs{NoGrantAhead: noAhead}))
			s := startThree(t, l, [3]int{100<<10 + 1, 70<<10 + 3, 4097})
			var recvs [3]*lmt.Transfer
			var bufs [3][]byte
			for _, i := range []int{1, 0, 2} {
				bufs[i] = make([]byte, len(s[i].msg))
				recvs[i] = recvInto(t, l, s[i], bufs[i])
			}
			want := []string{"CTS", "CTS", "CTS"}
			if noAhead {
				want = want[:1]
			}
			if got := l.packetTypes(0); !slices.Equal(got, want) {
				t.Fatalf("packets to the sender after three matches: %v, want %v", got, want)
			}
			// The sender alone, with every CTS in: the second
			// message must be first in the channel.
			for range 8 {
				l.only(t, 0)
			}
			if !noAhead && !(s[0].tr.Done() && s[1].tr.Done() && s[2].tr.Done()) {
				t.Fatalf("pipe sends done %v %v %v before the receiver read: want all three in the channel",
					s[0].tr.Done(), s[1].tr.Done(), s[2].tr.Done())
			}
			l.wait(t, s[0].tr, s[1].tr, s[2].tr, recvs[0], recvs[1], recvs[2])
			for i := range s {
				delivered(t, string(rune('a'+i)), s[i], recvs[i], bufs[i])
			}
		})
	}
}

// TestGrantAheadAfterFailure: when the message being read fails half-way,
// one granted ahead behind it must not read the failed one's leftovers as
// its own: it fails, naming them, and its buffer stays untouched; so does
// a message matched after the failure. Nothing hangs.
//
// The first two sends, on a pipe, may complete for their users as soon as
// their bytes are in it, before the receiver fails; the third may not.
func TestGrantAheadAfterFailure(t *testing.T) {
	l := newLoopConfig(t, lmt.Config{Prefer: []string{"pipe"}})
	s := startThree(t, l, [3]int{200 << 10, 50<<10 + 5, 3000})
	// The first receive buffer is read-only past its first
	// page: the receiver's readv fails with EFAULT there.
	ro, err := unix.Mmap(-1, 0, 200<<10, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(ro) })
	if err := unix.Mprotect(ro[4096:], unix.PROT_READ); err != nil {
		t.Fatal(err)
	}
	r0 := recvInto(t, l, s[0], ro)
	buf1 := make([]byte, len(s[1].msg))
	r1 := recvInto(t, l, s[1], buf1)
	if got := l.packetTypes(0); !slices.Equal(got, []string{"CTS", "CTS"}) {
		t.Fatalf("packets to the sender: %v, want [CTS CTS]", got)
	}
	l.wait(t, s[0].tr, s[1].tr, r0, r1)
	if !errors.Is(r0.Err(), unix.EFAULT) {
		t.Errorf("first receive: %v, want EFAULT", r0.Err())
	}
	if err := r1.Err(); err == nil || !strings.Contains(err.Error(), "leftovers of a failed transfer") {
		t.Errorf("receive granted ahead: %v, want the leftovers error", err)
	}
	if !bytes.Equal(buf1, make([]byte, len(buf1))) {
		t.Errorf("receive granted ahead: its buffer was written")
	}
	buf2 := make([]byte, len(s[2].msg))
	r2 := recvInto(t, l, s[2], buf2)
	l.wait(t, s[2].tr, r2)
	if written := !bytes.Equal(buf2, make([]byte, len(buf2))); r2.Err() == nil || written {
		t.Errorf("receive after the failure: %v, buffer written %v; want an error and no write", r2.Err(), written)
	}
	if s[2].tr.Err() == nil {
		t.Errorf("send after the failure: no error")
	}
}

// TestGrantedWaitsForNextProgress: the Progress that completes a pipe
// receive does not read the one granted behind it in the same pass, even
// with its bytes already in the pipe: it returns, so that the application
// can post its next receive, whose CTS (granted ahead) lets the sender
// write while this side reads. Reading on would empty the pipe before any
// new CTS left, and the two copies would take turns instead of overlapping.
func TestGrantedWaitsForNextProgress(t *testing.T) {
	l := newLoopConfig(t, lmt.Config{Prefer: []string{"pipe"}})
	s := startThree(t, l, [3]int{30<<10 + 7, 20<<10 + 1, 1})
	var recvs [2]*lmt.Transfer
	var bufs [2][]byte
	for i := range recvs {
		bufs[i] = make([]byte, len(s[i].msg))
		recvs[i] = recvInto(t, l, s[i], bufs[i])
	}
	for range 8 {
		l.only(t, 0) // both messages into the pipe
	}
	if !s[0].tr.Done() || !s[1].tr.Done() {
		t.Fatalf("sends done %v %v: want both in the pipe", s[0].tr.Done(), s[1].tr.Done())
	}
	l.only(t, 1)
	if !recvs[0].Done() || recvs[1].Moved() != 0 {
		t.Fatalf("after one receiver Progress: first done %v, second moved %d; want done and 0",
			recvs[0].Done(), recvs[1].Moved())
	}
	l.only(t, 1)
	if !recvs[1].Done() {
		t.Fatalf("second receive not done after the next Progress (moved %d of %d)", recvs[1].Moved(), len(bufs[1]))
	}
	for i := range recvs {
		delivered(t, string(rune('a'+i)), s[i], recvs[i], bufs[i])
	}
	buf2 := make([]byte, 1)
	r2 := recvInto(t, l, s[2], buf2)
	l.wait(t, s[2].tr, r2)
	delivered(t, "c", s[2], r2, buf2)
}
