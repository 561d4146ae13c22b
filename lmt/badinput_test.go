package lmt_test

import (
	"errors"
	"testing"

	"github.com/knemesis/knemesis/cma"
	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/pipe"
)

// TestNewBadConfig: every invalid Config field is refused by New with an
// error naming it.
func TestNewBadConfig(t *testing.T) {
	good := func() lmt.Config {
		return lmt.Config{Rank: 0, Size: 2, Job: "bad-config", Control: loopEnd{&loop{}, 0}}
	}
	for _, tc := range []struct {
		name string
		edit func(*lmt.Config)
		want string
	}{
		{"size 0", func(c *lmt.Config) { c.Size = 0 }, "lmt: Config.Rank 0 is out of range for Config.Size 0"},
		{"rank negative", func(c *lmt.Config) { c.Rank = -1 }, "lmt: Config.Rank -1 is out of range for Config.Size 2"},
		{"rank = size", func(c *lmt.Config) { c.Rank = 2 }, "lmt: Config.Rank 2 is out of range for Config.Size 2"},
		{"no job", func(c *lmt.Config) { c.Job = "" }, "lmt: Config needs a Job name and a Control channel"},
		{"no control", func(c *lmt.Config) { c.Control = nil }, "lmt: Config needs a Job name and a Control channel"},
		{"job with a slash", func(c *lmt.Config) { c.Job = "../etc" }, `lmt: Config.Job "../etc" contains a slash or a NUL: it names files in /dev/shm and the job directory`},
		{"job with a NUL", func(c *lmt.Config) { c.Job = "a\x00b" }, `lmt: Config.Job "a\x00b" contains a slash or a NUL: it names files in /dev/shm and the job directory`},
		{"chunk", func(c *lmt.Config) { c.Chunk = -1 }, "lmt: Config.Chunk is -1, negative (0 takes the default)"},
		{"cma chunk", func(c *lmt.Config) { c.Backends = []lmt.Settings{cma.Settings{Chunk: -2}} }, "lmt: Config.Backends[0]: cma: Settings.Chunk is -2, negative (0 takes the default)"},
		{"shm slots", func(c *lmt.Config) { c.ShmSlots = -3 }, "lmt: Config.ShmSlots is -3, negative (0 takes the default)"},
		{"shm slot size", func(c *lmt.Config) { c.ShmSlotSize = -4 }, "lmt: Config.ShmSlotSize is -4, negative (0 takes the default)"},
		{"shm slot size not a multiple of 64", func(c *lmt.Config) { c.ShmSlotSize = 100 }, "lmt: creating backend shm: shm slot size 100 is not a multiple of 64"},
		{"pipe size", func(c *lmt.Config) { c.Backends = []lmt.Settings{pipe.Settings{Size: -5}} }, "lmt: Config.Backends[0]: pipe: Settings.Size is -5, negative (0 takes the default)"},
		{"min pipe size", func(c *lmt.Config) { c.Backends = []lmt.Settings{pipe.Settings{MinSize: -6}} }, "lmt: Config.Backends[0]: pipe: Settings.MinSize is -6, negative (0 takes the default)"},
		{"min pipe size above pipe size", func(c *lmt.Config) {
			c.Backends = []lmt.Settings{cma.Settings{}, pipe.Settings{Size: 64 << 10, MinSize: 128 << 10}}
		}, "lmt: Config.Backends[1]: pipe: Settings.MinSize 131072 is above Settings.Size 65536"},
		{"pipe chunk", func(c *lmt.Config) { c.Backends = []lmt.Settings{pipe.Settings{Chunk: -7}} }, "lmt: Config.Backends[0]: pipe: Settings.Chunk is -7, negative (0 takes the default)"},
		{"max segments", func(c *lmt.Config) { c.MaxSegments = -8 }, "lmt: Config.MaxSegments is -8, negative (0 takes the default)"},
		{"max segments past IOV_MAX", func(c *lmt.Config) { c.MaxSegments = lmt.MaxMaxSegments + 1 }, "lmt: Config.MaxSegments is 1025, above IOV_MAX (1024)"},
		{"small block", func(c *lmt.Config) { c.SmallBlock = -9 }, "lmt: Config.SmallBlock is -9, negative (0 takes the default)"},
		{"no preferred backend registered", func(c *lmt.Config) { c.Prefer = []string{"nope"} }, "lmt: none of the preferred backends [nope] is registered (have " + backendList() + ")"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := good()
			tc.edit(&c)
			e, err := lmt.New(c)
			if e != nil || err == nil || err.Error() != tc.want {
				t.Fatalf("New: engine %t, %v\nwant no engine, %s", e != nil, err, tc.want)
			}
		})
	}
	e, err := lmt.New(good())
	if err != nil {
		t.Fatalf("good config: %v", err)
	}
	e.Close()
}

func backendList() string {
	s := "["
	for i, b := range lmt.Backends() {
		if i > 0 {
			s += " "
		}
		s += b
	}
	return s + "]"
}

// TestStartBadInput: StartSend and StartRecv refuse a rank out of range,
// their own rank, a short RTS buffer, an unknown or unfit forced backend
// and a packet that is no RTS, with an exact error and nothing started.
func TestStartBadInput(t *testing.T) {
	l := newLoop(t, "shm")
	e := l.engs[0]
	rts := make([]byte, 4096)
	msg := [][]byte{make([]byte, 100)}
	many := make([][]byte, lmt.DefaultMaxSegments+1)
	for i := range many {
		many[i] = make([]byte, 1)
	}
	for _, tc := range []struct {
		name    string
		dst     int
		iov     [][]byte
		backend string
		rts     []byte
		want    string
	}{
		{"rank -1", -1, msg, "", rts, "lmt: destination rank -1 is not a peer (job of 2, self 0)"},
		{"rank = size", 2, msg, "", rts, "lmt: destination rank 2 is not a peer (job of 2, self 0)"},
		{"own rank", 0, msg, "", rts, "lmt: destination rank 0 is not a peer (job of 2, self 0)"},
		{"short RTS buffer", 1, msg, "", rts[:31], "lmt: RTS buffer of 31 bytes, need at least 32"},
		{"unknown backend", 1, msg, "nope", rts, "lmt: no backend \"nope\" (have " + backendList() + ")"},
		{"too many segments for cma", 1, many, "cma", rts, "lmt: backend cma: 65 segments do not fit its handle (max 64, 4064 RTS bytes)"},
		{"no room for a cma handle", 1, msg, "cma", rts[:40], "lmt: backend cma: 1 segments do not fit its handle (max 64, 8 RTS bytes)"},
	} {
		tr, n, err := e.StartSend(tc.dst, tc.iov, tc.backend, tc.rts)
		if tr != nil || n != 0 || err == nil || err.Error() != tc.want {
			t.Errorf("StartSend %s: %v, %d, %v\nwant nil, 0, %s", tc.name, tr, n, err, tc.want)
		}
	}
	if e.Pending() != 0 || len(l.queue[1]) != 0 {
		t.Fatalf("refused sends left %d transfers and %d packets", e.Pending(), len(l.queue[1]))
	}

	// A real RTS from rank 0, for rank 1's StartRecv.
	s := startSend(t, l, make([]byte, 100))
	r := l.engs[1]
	cts := append([]byte(nil), s.rts...)
	cts[0] = 2
	for _, tc := range []struct {
		name string
		src  int
		rts  []byte
		want string
	}{
		{"rank -1", -1, s.rts, "lmt: source rank -1 is not a peer"},
		{"rank = size", 2, s.rts, "lmt: source rank 2 is not a peer"},
		{"own rank", 1, s.rts, "lmt: source rank 1 is not a peer"},
		{"not an RTS", 0, cts, "lmt: StartRecv given a CTS packet, not an RTS"},
		{"short RTS", 0, s.rts[:20], "knemesis: rank 0 wrote a corrupt control packet: 20 bytes, shorter than the 32-byte header"},
	} {
		tr, err := r.StartRecv(tc.src, tc.rts, [][]byte{make([]byte, 100)})
		if tr != nil || err == nil || err.Error() != tc.want {
			t.Errorf("StartRecv %s: %v, %v\nwant nil, %s", tc.name, tr, err, tc.want)
		}
	}
	if r.Pending() != 0 {
		t.Fatalf("refused receives left %d transfers", r.Pending())
	}
	e.Close()
	if _, _, err := e.StartSend(1, msg, "", rts); !errors.Is(err, lmt.ErrClosed) {
		t.Fatalf("StartSend after Close: %v, want ErrClosed", err)
	}
}

// TestNilIovecs: a nil iovec list is an empty message to send, and a
// receive buffer of no bytes, which truncates a longer message to nothing
// (the sender still completes) without writing anywhere.
func TestNilIovecs(t *testing.T) {
	for _, b := range []string{"shm", "cma"} {
		t.Run(b, func(t *testing.T) {
			l := newLoop(t, b)
			rts := make([]byte, 4096)
			snd, k, err := l.engs[0].StartSend(1, nil, "", rts)
			if err != nil {
				t.Fatal(err)
			}
			rcv, err := l.engs[1].StartRecv(0, rts[:k], [][]byte{make([]byte, 10)})
			if err != nil {
				t.Fatal(err)
			}
			l.wait(t, snd, rcv)
			if snd.Err() != nil || rcv.Err() != nil || snd.Len() != 0 || rcv.Len() != 0 {
				t.Fatalf("empty message: sender %v (%d bytes), receiver %v (%d bytes)", snd.Err(), snd.Len(), rcv.Err(), rcv.Len())
			}

			s := startSend(t, l, make([]byte, 100))
			rcv, err = l.engs[1].StartRecv(0, s.rts, nil)
			if err != nil {
				t.Fatal(err)
			}
			l.wait(t, s.tr, rcv)
			var te *lmt.TruncationError
			if !errors.As(rcv.Err(), &te) || *te != (lmt.TruncationError{Len: 100, Cap: 0}) || rcv.Moved() != 0 || s.tr.Err() != nil {
				t.Fatalf("100 bytes into nil: receiver %v, moved %d; sender %v; want a truncation to 0, 0, nil", rcv.Err(), rcv.Moved(), s.tr.Err())
			}
		})
	}
}
