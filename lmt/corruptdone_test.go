package lmt_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/knemesis/knemesis/lmt"
)

func donePkt(src, dst uint64, length int64) []byte {
	p := make([]byte, 32)
	p[0] = 3 // DONE, status ok
	binary.LittleEndian.PutUint64(p[8:], src)
	binary.LittleEndian.PutUint64(p[16:], dst)
	binary.LittleEndian.PutUint64(p[24:], uint64(length))
	return p
}

// TestCorruptDone: a successful DONE claiming more bytes than the message
// holds, or a negative time, fails the transfer it names with a
// CorruptError naming the peer and the field, tells the peer, and is the
// error HandleControl returns.
func TestCorruptDone(t *testing.T) {
	const n = 1000
	for _, tc := range []struct {
		name   string
		src    uint64
		length int64
		want   string
	}{
		{"length past the message", 1, n + 1, "lmt: rank 1 wrote a corrupt DONE length: 1001 bytes moved, the message has 1000"},
		{"negative time", 1 << 63, n, "lmt: rank 1 wrote a corrupt DONE time: -9223372036854775808 ns, negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLoop(t, "pipe")
			s := startSend(t, l, make([]byte, n))
			err := l.engs[0].HandleControl(1, donePkt(tc.src, s.tr.ID(), tc.length))
			var ce *lmt.CorruptError
			if !errors.As(err, &ce) || ce.Rank != 1 || err.Error() != tc.want {
				t.Fatalf("HandleControl: %v, want %s", err, tc.want)
			}
			if !s.tr.Done() || s.tr.Err() != err {
				t.Fatalf("transfer done %v with %v, want failed with the HandleControl error", s.tr.Done(), s.tr.Err())
			}
			if len(l.queue[1]) != 1 || lmt.PacketType(l.queue[1][0]) != "DONE" || l.queue[1][0][2] != 1 {
				t.Fatalf("rank 1 was sent %d packets, want one failed DONE", len(l.queue[1]))
			}
		})
	}
}

// TestCMAHandleNamesAnotherProcess: a cma RTS whose handle names another
// process than the sender's (as the job knows it) is refused with a
// CorruptError before any copy: the receiver would otherwise read a third
// process's memory. The sender is told.
func TestCMAHandleNamesAnotherProcess(t *testing.T) {
	l := newLoop(t, "cma")
	s := startSend(t, l, make([]byte, 1000))
	rts := append([]byte(nil), s.rts...)
	binary.LittleEndian.PutUint32(rts[32:], 1) // init's pid, in the handle after the header
	tr, err := l.engs[1].StartRecv(0, rts, [][]byte{make([]byte, 1000)})
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("lmt: rank 0 wrote a corrupt cma handle's pid: 1, but rank 0 is process %d", os.Getpid())
	var ce *lmt.CorruptError
	if !tr.Done() || !errors.As(tr.Err(), &ce) || tr.Err().Error() != want || tr.Moved() != 0 {
		t.Fatalf("receive: done %v, moved %d, error %v\nwant done, 0, %s", tr.Done(), tr.Moved(), tr.Err(), want)
	}
	if len(l.queue[0]) != 1 || lmt.PacketType(l.queue[0][0]) != "DONE" || l.queue[0][0][2] != 1 {
		t.Fatalf("rank 0 was sent %d packets, want one failed DONE", len(l.queue[0]))
	}
}
