package lmt_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
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
		{"length past the message", 1, n + 1, "knemesis: rank 1 wrote a corrupt DONE length: 1001 bytes moved, the message has 1000"},
		{"negative time", 1 << 63, n, "knemesis: rank 1 wrote a corrupt DONE time: -9223372036854775808 ns, negative"},
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
	want := fmt.Sprintf("knemesis: rank 0 wrote a corrupt cma handle's pid: 1, but rank 0 is process %d", os.Getpid())
	var ce *lmt.CorruptError
	if !tr.Done() || !errors.As(tr.Err(), &ce) || tr.Err().Error() != want || tr.Moved() != 0 {
		t.Fatalf("receive: done %v, moved %d, error %v\nwant done, 0, %s", tr.Done(), tr.Moved(), tr.Err(), want)
	}
	if len(l.queue[0]) != 1 || lmt.PacketType(l.queue[0][0]) != "DONE" || l.queue[0][0][2] != 1 {
		t.Fatalf("rank 0 was sent %d packets, want one failed DONE", len(l.queue[0]))
	}
}

// FuzzHandleControl: whatever packet rank 1 sends about a live shm send,
// the sender's engine neither panics nor moves past the message, and
// refuses what it cannot take with a CorruptError or an unexpected-packet
// error. The packet's receiver id is pointed at the live transfer, so that
// the fuzzer explores the paths past the lookup. Packets naming another
// registered backend are pointed at shm: with no peer pid, CMA is
// unavailable here anyway, and the pipes would open FIFOs.
func FuzzHandleControl(f *testing.F) {
	shm, _ := lmt.IdentityOf(lmt.Shm)
	hdr := func(typ, kind, status byte, length uint64, payload string) []byte {
		p := make([]byte, 32+len(payload))
		p[0], p[1], p[2] = typ, kind, status
		binary.LittleEndian.PutUint32(p[4:], uint32(len(payload)))
		binary.LittleEndian.PutUint64(p[8:], 7)
		binary.LittleEndian.PutUint64(p[24:], length)
		copy(p[32:], payload)
		return p
	}
	f.Add(hdr(2, shm.ID, 0, 100<<10, ""))            // the CTS
	f.Add(hdr(2, shm.ID, 0, 10, ""))                 // a CTS truncating the message
	f.Add(hdr(2, 200, 0, 100<<10, ""))               // a CTS naming no backend
	f.Add(hdr(2, 3, 0, 100<<10, "0123456789abcdef")) // a CTS naming another backend, with a payload
	f.Add(hdr(3, shm.ID, 0, 100<<10, ""))            // DONE before the CTS
	f.Add(hdr(3, shm.ID, 1, 0, "receiver failed"))   // a failed DONE
	f.Add(hdr(3, shm.ID, 0, 1<<40, ""))              // DONE past the message
	f.Add(hdr(1, shm.ID, 0, 100<<10, ""))            // an RTS where none belongs
	f.Add([]byte{2, 1, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		p := append([]byte(nil), in...)
		l := newLoopPIDs(t, [2]int{0, 0}, lmt.Shm)
		s := startSend(t, l, make([]byte, 100<<10))
		if len(p) >= 24 {
			binary.LittleEndian.PutUint64(p[16:], s.tr.ID())
		}
		if len(p) > 1 && p[1] != shm.ID {
			for _, id := range lmt.Identities() {
				if id.ID == p[1] {
					p[1] = shm.ID
				}
			}
		}
		err := l.engs[0].HandleControl(1, p)
		if err != nil && !errors.Is(err, lmt.ErrCorrupt) && !strings.Contains(err.Error(), "unexpected") {
			t.Fatalf("HandleControl: %v", err)
		}
		for range 8 {
			if err := l.engs[0].Progress(); err != nil {
				t.Fatal(err)
			}
		}
		if s.tr.Moved() > s.tr.Len() || s.tr.Len() > int64(len(s.msg)) || s.tr.Len() < 0 {
			t.Fatalf("sender moved %d of %d bytes, message %d", s.tr.Moved(), s.tr.Len(), len(s.msg))
		}
	})
}
