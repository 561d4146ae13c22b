package nemesis

import (
	"bytes"
	"errors"
	"github.com/knemesis/knemesis/peerfault"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/knemesis/knemesis/internal/fdpass"
	"github.com/knemesis/knemesis/nemesis/launch"
	"golang.org/x/sys/unix"
)

// deadPID returns the pid of a process that has exited and been reaped.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("/bin/true")
	if err := cmd.Run(); err != nil {
		t.Fatalf("running /bin/true: %v", err)
	}
	return cmd.ProcessState.Pid()
}

// leaveSegment leaves at job's name in dir what a creator that died
// leaves there: its rendezvous directory, with a socket nobody listens on.
func leaveSegment(t *testing.T, dir, job string) string {
	t.Helper()
	path := segPath(dir, job)
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	sock, err := unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(sock)
	if err := unix.Bind(sock, &unix.SockaddrUnix{Name: fdpass.SocketPath(path)}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fdpass.RemoveDir(path, segObject) })
	return path
}

func TestSegmentNameRemovedOnceAllJoined(t *testing.T) {
	dir := t.TempDir()
	eps := joinLocal(t, 3, &Options{Dir: dir})
	if names, _ := filepath.Glob(filepath.Join(dir, "*")); len(names) != 0 {
		t.Fatalf("left in %s after join: %v", dir, names)
	}
	// The mapping outlives the name: messages still flow.
	if _, err := exchange(t, eps[2], eps[0], 1, []byte("still mapped"), make([]byte, 20)); err != nil {
		t.Fatal(err)
	}
}

func TestStaleSegmentReplaced(t *testing.T) {
	dir := t.TempDir()
	path := leaveSegment(t, dir, "crashed")
	ep, err := Join("crashed", 0, 1, &Options{Dir: dir})
	if err != nil {
		t.Fatalf("joining over a stale segment: %v", err)
	}
	defer ep.Close()
	if int(ep.seg.hdr.creatorPID) != os.Getpid() {
		t.Fatalf("segment creator %d, want this process %d", ep.seg.hdr.creatorPID, os.Getpid())
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("%s still there after a 1-rank job joined: %v", path, err)
	}
}

// TestGarbageAtSegmentNameReplaced: a file of this user at the segment's
// name (which is a directory where rank 0 serves the segment) is unlinked,
// not written into, and rank 0 serves its fresh segment under the name,
// where rank 1 finds it.
func TestGarbageAtSegmentNameReplaced(t *testing.T) {
	for name, garbage := range map[string][]byte{
		"short":    []byte("not a segment"),
		"no-magic": bytes.Repeat([]byte{0xa5}, 4096),
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "knemesis-junk")
			if err := os.WriteFile(path, garbage, 0o600); err != nil {
				t.Fatal(err)
			}
			old, err := os.Open(path) // to see the garbage after its name is gone
			if err != nil {
				t.Fatal(err)
			}
			defer old.Close()
			opts := &Options{Dir: dir, JoinTimeout: 20 * time.Second}
			rank0 := make(chan error, 1)
			var ep0 *Endpoint
			go func() {
				var err error
				ep0, err = Join("junk", 0, 2, opts)
				rank0 <- err
			}()
			// Rank 0 waits for rank 1 with its segment served: the name
			// must come to be a directory where this process serves.
			for {
				if fi, err := os.Lstat(path); err == nil && fi.IsDir() {
					if pid, ok := fdpass.Probe(path); ok {
						if pid != os.Getpid() {
							t.Fatalf("%s served by pid %d, want this process %d", path, pid, os.Getpid())
						}
						break
					}
				}
				select {
				case err := <-rank0:
					t.Fatalf("rank 0 ended before serving its segment: %v", err)
				case <-time.After(time.Millisecond):
				}
			}
			ep1, err := Join("junk", 1, 2, opts)
			if err != nil {
				t.Fatalf("rank 1 joining the replacement: %v", err)
			}
			defer ep1.Close()
			if err := <-rank0; err != nil {
				t.Fatalf("rank 0 joining over garbage: %v", err)
			}
			defer ep0.Close()
			var st unix.Stat_t
			if err := unix.Fstat(int(old.Fd()), &st); err != nil {
				t.Fatal(err)
			}
			if st.Nlink != 0 {
				t.Errorf("the garbage file still has %d links: not replaced", st.Nlink)
			}
			if got, err := io.ReadAll(old); err != nil || !bytes.Equal(got, garbage) {
				t.Errorf("the garbage file was written into: %d bytes now, %v", len(got), err)
			}
			if names, _ := filepath.Glob(filepath.Join(dir, "*")); len(names) != 0 {
				t.Errorf("left in %s once both ranks joined: %v", dir, names)
			}
		})
	}
}

func TestLiveSegmentNotReplaced(t *testing.T) {
	dir := t.TempDir()
	live, err := createSegment(dir, "busy", layout{nprocs: 2, cellSize: 512, cellsPerProc: 2, fastboxSize: 128, fastboxes: 1}, testKey)
	if err != nil {
		t.Fatal(err)
	}
	defer live.unmap()
	_, err = Join("busy", 0, 2, &Options{Dir: dir})
	want := "is served by pid " + strconv.Itoa(os.Getpid()) + ", still running"
	if !errors.Is(err, ErrSegmentInUse) || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v, want ErrSegmentInUse saying %q", err, want)
	}
}

func TestJoinerWaitsOutStaleSegment(t *testing.T) {
	dir := t.TempDir()
	leaveSegment(t, dir, "old")
	_, err := Join("old", 1, 2, &Options{Dir: dir, JoinTimeout: 50 * time.Millisecond})
	if !errors.Is(err, ErrJoinTimeout) || !strings.Contains(err.Error(), "left by a creator that is gone") {
		t.Fatalf("got %v, want ErrJoinTimeout explaining the stale segment", err)
	}
}

func TestLayoutMismatch(t *testing.T) {
	dir := t.TempDir()
	job := launch.NewJobName()
	done := make(chan error, 1)
	go func() {
		_, err := Join(job, 0, 2, &Options{Dir: dir, CellSize: 1024, JoinTimeout: 300 * time.Millisecond})
		done <- err
	}()
	_, err := Join(job, 1, 2, &Options{Dir: dir, CellSize: 2048, JoinTimeout: 2 * time.Second})
	if !errors.Is(err, ErrLayout) || !strings.Contains(err.Error(), "1024-byte cells") {
		t.Fatalf("joining with other cells: %v, want ErrLayout naming both geometries", err)
	}
	if err := <-done; !errors.Is(err, ErrJoinTimeout) || !strings.Contains(err.Error(), "rank 1") {
		t.Fatalf("rank 0: %v, want ErrJoinTimeout naming rank 1", err)
	}
	if names, _ := filepath.Glob(filepath.Join(dir, "*")); len(names) != 0 {
		t.Fatalf("left behind after a failed join: %v", names)
	}
}

func TestSegmentHeaderChecked(t *testing.T) {
	dir := t.TempDir()
	job := "hdr"
	s, err := createSegment(dir, job, layout{nprocs: 2, cellSize: 512, cellsPerProc: 2, fastboxSize: 128, fastboxes: 1}, testKey)
	if err != nil {
		t.Fatal(err)
	}
	defer s.unlink()
	for _, c := range []struct {
		name   string
		mutate func(h *segHeader)
	}{
		{"version", func(h *segHeader) { h.version = 99 }},
		{"magic", func(h *segHeader) { h.magic = 1 }},
		{"offsets", func(h *segHeader) { h.cellOff += 4096 }},
		{"size", func(h *segHeader) { h.cellsPerProc = 1 << 15 }},
	} {
		saved := *(*[unsafe.Sizeof(segHeader{})]byte)(unsafe.Pointer(s.hdr))
		c.mutate(s.hdr)
		_, err := Join(job, 1, 2, &Options{Dir: dir, CellSize: 512, Cells: 2, FastboxSize: 128, JoinTimeout: time.Second})
		if !errors.Is(err, ErrLayout) {
			t.Errorf("%s: %v, want ErrLayout", c.name, err)
		}
		*(*[unsafe.Sizeof(segHeader{})]byte)(unsafe.Pointer(s.hdr)) = saved
	}
	s.unmap()
}

func TestInvalidArguments(t *testing.T) {
	for _, c := range []struct {
		job        string
		rank, size int
		o          Options
		want       error
	}{
		{"ok", 2, 2, Options{}, ErrInvalidRank},
		{"ok", -1, 2, Options{}, ErrInvalidRank},
		{"ok", 0, 0, Options{}, ErrInvalidArg},
		{"../etc", 0, 1, Options{}, ErrInvalidArg},
		{"", 0, 1, Options{}, ErrInvalidArg},
		{"ok", 0, 1, Options{CellSize: 3000}, ErrInvalidArg},
		{"ok", 0, 1, Options{CellSize: 128}, ErrInvalidArg},
		{"ok", 0, 2, Options{FastboxSize: 100}, ErrInvalidArg},
	} {
		if _, err := Join(c.job, c.rank, c.size, &c.o); !errors.Is(err, c.want) {
			t.Errorf("Join(%q, %d, %d, %+v): %v, want %v", c.job, c.rank, c.size, c.o, err, c.want)
		}
	}
	eps := joinLocal(t, 2, nil)
	ep := eps[0]
	var r Request
	for _, c := range []struct {
		name string
		err  error
		want error
	}{
		{"Isend rank 2", ep.Isend(&r, 2, 0, nil), ErrInvalidRank},
		{"Isend AnySource", ep.Isend(&r, AnySource, 0, nil), ErrInvalidRank},
		{"Isend tag -1", ep.Isend(&r, 1, AnyTag, nil), ErrInvalidTag},
		{"Isend tag MaxTag+1", ep.Isend(&r, 1, MaxTag+1, nil), ErrInvalidTag},
		{"Irecv rank -2", ep.Irecv(&r, -2, 0, nil), ErrInvalidRank},
		{"Irecv tag -2", ep.Irecv(&r, 0, -2, nil), ErrInvalidTag},
		{"Isend nil request", ep.Isend(nil, 1, 0, nil), ErrInvalidArg},
		{"PeerPID 5", func() error { _, err := ep.PeerPID(5); return err }(), ErrInvalidRank},
		{"SendControl too big", func() error { _, err := ep.SendControl(1, make([]byte, ep.MaxControl()+1)); return err }(), ErrInvalidArg},
	} {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, c.err, c.want)
		}
	}
	if err := ep.Irecv(&r, 1, 0, nil); err != nil {
		t.Fatal(err)
	}
	if err := ep.Irecv(&r, 1, 0, nil); !errors.Is(err, ErrRequestInUse) {
		t.Errorf("reusing a pending request: %v, want ErrRequestInUse", err)
	}
	if pid, err := ep.PeerPID(1); err != nil || pid != os.Getpid() {
		t.Errorf("PeerPID(1) = %d, %v; want %d", pid, err, os.Getpid())
	}
}

// TestCorruptCell: a cell whose header its sender scribbled over fails the
// receive from that sender with a *peerfault.Error naming it and the field,
// and the cell goes home; the endpoint goes on. A broken link of the
// receive queue, which every sender shares, fails the endpoint.
func TestCorruptCell(t *testing.T) {
	for _, c := range []struct {
		name   string
		mutate func(c *cellHdr)
		field  string // "": the endpoint fails
	}{
		{"source", func(c *cellHdr) { c.src = 7 }, "source of a cell"},
		{"owner", func(c *cellHdr) { c.owner = 1 << 20 }, "owner of a cell"},
		{"length", func(c *cellHdr) { c.len = 1 << 20 }, "length of a cell"},
		{"kind", func(c *cellHdr) { c.kind = 77 }, "kind of a cell"},
		{"sequence", func(c *cellHdr) { c.seq += 5 }, "sequence of a cell"},
		// A one-cell message announced as 1<<62 bytes: nothing is
		// allocated for it, and the next message, which comes before
		// its end, fails the pair.
		{"total", func(c *cellHdr) { c.total = 1 << 62 }, "kind of a cell"},
		{"next", func(c *cellHdr) { c.next.Store(3) }, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			eps := joinLocal(t, 2, &Options{CellSize: 512, Cells: 4, FastboxSize: -1})
			a, b := eps[0], eps[1]
			if err := a.Send(1, 0, []byte("x")); err != nil {
				t.Fatal(err)
			}
			if err := a.Send(1, 0, []byte("y")); err != nil {
				t.Fatal(err)
			}
			head := b.recvQ.sh.head.Load()
			hdr, err := b.seg.cell(head)
			if err != nil {
				t.Fatal(err)
			}
			c.mutate(hdr)
			var r Request
			b.Irecv(&r, 0, 0, make([]byte, 8))
			var perr error
			for i := 0; i < 10 && perr == nil && (c.field == "" || !r.Done()); i++ {
				perr = b.Poll()
			}
			if c.field == "" {
				if !errors.Is(perr, ErrCorrupt) {
					t.Fatalf("Poll after corrupting the %s: %v, want ErrCorrupt", c.name, perr)
				}
				if _, err := b.Recv(0, 0, make([]byte, 8)); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("Recv on a corrupted endpoint: %v", err)
				}
				return
			}
			var pe *peerfault.Error
			if err := b.Wait(&r); perr != nil || !errors.As(err, &pe) || !errors.Is(err, ErrCorrupt) || pe.Rank != 0 || pe.Field != c.field {
				t.Fatalf("receive after corrupting the %s: %v (Poll: %v), want rank 0's corrupt %s", c.name, err, perr, c.field)
			}
			if err := b.Poll(); err != nil {
				t.Fatalf("Poll after rank 0 was failed: %v, want the endpoint to go on", err)
			}
			free := 0
			for {
				off, _, err := a.freeQ.dequeue(a.seg)
				if err != nil || off == 0 {
					break
				}
				free++
			}
			if free != 4 {
				t.Fatalf("rank 0 has %d free cells of 4 once rank 1 polled: its cells did not come home", free)
			}
		})
	}
}

func TestCorruptFastbox(t *testing.T) {
	eps := joinLocal(t, 2, &Options{CellSize: 512, Cells: 4})
	if err := eps[0].Send(1, 0, make([]byte, linePayload+1)); err != nil {
		t.Fatal(err)
	}
	eps[1].peers[0].fbIn[0].len = 1 << 30
	if _, err := eps[1].Recv(0, 0, make([]byte, 64)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("got %v, want ErrCorrupt", err)
	}
}
