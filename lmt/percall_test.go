package lmt_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/knemesis/knemesis/cma"
	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/lmt/lmttest"
	"github.com/knemesis/knemesis/nemesis/launch"
)

// maxRWCount is the kernel's MAX_RW_COUNT, the most one process_vm_readv or
// process_vm_writev moves.
const maxRWCount = 0x7ffff000

// TestCMAPerCallLimit moves one message larger than the kernel's per-call
// limit with a chunk larger still, so that nothing but that limit splits
// it: the copying side must make exactly two calls and every byte must
// arrive, across a sender list whose second entry straddles the limit.
// (The backend clamps each call to the limit; the kernel would truncate
// a longer one to it too, and the loop has to resume after either.)
func TestCMAPerCallLimit(t *testing.T) {
	const n = maxRWCount + 3*4096 + 5
	needMemory(t, 2*n+(256<<20))
	msg := make([]byte, n)
	lmttest.Fill(msg, 11)
	iov := [][]byte{msg[:1<<30], msg[1<<30 : n-7], nil, msg[n-7:]}
	got := make([]byte, n)
	for _, b := range []string{"cma", "cma-write"} {
		t.Run(b, func(t *testing.T) {
			clear(got)
			l := newLoopConfig(t, lmt.Config{Prefer: []string{b}, Backends: []lmt.Settings{cma.Settings{Chunk: 1 << 40}}})
			copier := copyingSide(t, l, iov, got)
			if copier.Backend != b || copier.Bytes != n || copier.Syscalls != 2 || copier.Chunks != 2 {
				t.Errorf("copying side: %+v, want %s moving %d bytes in 2 calls and 2 chunks", copier, b, n)
			}
			if err := lmttest.Check(got, 11); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestCMAChunk: the CMA backends move cma.Settings.Chunk bytes a call (4 MiB by
// default), whatever Chunk says, and a Stream backend still moves Chunk
// bytes a Step. Counted on the copying side of a 10 MiB + 3 message.
func TestCMAChunk(t *testing.T) {
	const n = 10<<20 + 3
	msg := make([]byte, n)
	lmttest.Fill(msg, 5)
	got := make([]byte, n)
	for _, c := range []struct {
		backend         string
		chunk, cmaChunk int
		want            int
	}{
		{"cma", 0, 0, 3},
		{"cma-write", 1 << 20, 0, 3},
		{"cma", 0, 1 << 20, 11},
		{"cma-write", 1 << 30, 3 << 20, 4},
		{"pipe", 0, 1 << 10, 11}, // one pipe-full (1 MiB) a Step
		{"shm", 0, 1 << 10, 161}, // 64 KiB a Step out of the ring
	} {
		t.Run(fmt.Sprintf("%s/chunk=%d/cma=%d", c.backend, c.chunk, c.cmaChunk), func(t *testing.T) {
			clear(got)
			l := newLoopConfig(t, lmt.Config{Prefer: []string{c.backend}, Chunk: c.chunk, Backends: []lmt.Settings{cma.Settings{Chunk: c.cmaChunk}}})
			copier := copyingSide(t, l, [][]byte{msg}, got)
			if copier.Backend != c.backend || copier.Bytes != n || copier.Chunks != c.want {
				t.Errorf("copying side: %+v, want %s moving %d bytes in %d chunks", copier, c.backend, n, c.want)
			}
			if err := lmttest.Check(got, 5); err != nil {
				t.Error(err)
			}
		})
	}
}

// copyingSide moves iov from rank 0 to got on rank 1 of l and returns the
// statistics of the side that copied: the sender's for cma-write, whose
// sender pushes, the receiver's otherwise.
func copyingSide(t *testing.T, l *loop, iov [][]byte, got []byte) lmt.Stats {
	t.Helper()
	rts := make([]byte, 4096)
	send, k, err := l.engs[0].StartSend(1, iov, "", rts)
	if err != nil {
		t.Fatal(err)
	}
	recv, err := l.engs[1].StartRecv(0, rts[:k], [][]byte{got})
	if err != nil {
		t.Fatal(err)
	}
	l.wait(t, send, recv)
	if send.Err() != nil || recv.Err() != nil {
		t.Fatalf("send: %v, receive: %v", send.Err(), recv.Err())
	}
	if send.Backend() == "cma-write" {
		return send.Stats()
	}
	return recv.Stats()
}

// newLoopConfig is newLoop with the caller's Config for both engines.
func newLoopConfig(t *testing.T, cfg lmt.Config) *loop {
	t.Helper()
	return newLoopConfigEach(t, cfg, nil)
}

// newLoopConfigEach is newLoopConfig with each (if not nil) adjusting the
// Config of each rank.
func newLoopConfigEach(t testing.TB, cfg lmt.Config, each func(rank int, cfg *lmt.Config)) *loop {
	t.Helper()
	l := &loop{}
	cfg.Size, cfg.Job = 2, launch.NewJobName()
	cfg.PeerPID = func(int) int { return os.Getpid() }
	for r := range l.engs {
		c := cfg
		c.Rank, c.Control = r, loopEnd{l, r}
		if each != nil {
			each(r, &c)
		}
		e, err := lmt.New(c)
		if err != nil {
			t.Fatal(err)
		}
		l.engs[r] = e
		t.Cleanup(func() { e.Close() })
	}
	return l
}

// needMemory skips when the machine cannot hold bytes more without
// swapping or invoking the OOM killer.
func needMemory(t *testing.T, bytes int) {
	t.Helper()
	s, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(s), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemAvailable:" {
			kib, err := strconv.Atoi(f[1])
			if err != nil {
				t.Fatal(err)
			}
			if kib<<10 < bytes {
				t.Skipf("lacks memory: %d MiB of available memory, %d MiB needed for a message past the kernel's per-call limit", kib>>10, bytes>>20)
			}
			return
		}
	}
	t.Fatal("/proc/meminfo has no MemAvailable line")
}
