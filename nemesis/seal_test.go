package nemesis

import (
	"errors"
	"hash/crc32"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/knemesis/knemesis/internal/fdpass"
	"github.com/knemesis/knemesis/nemesis/launch"
	"golang.org/x/sys/unix"
)

// TestNoRankCanResizeTheSegment: a rank of a live job of 4, holding the
// segment as every rank does (received from the creator over the socket,
// or reopened through /proc/<pid>/fd as another process of the user could),
// tries to shrink it to nothing, to half, and to grow it: EPERM each time.
// Every pair's messages then still arrive whole, by checksum.
func TestNoRankCanResizeTheSegment(t *testing.T) {
	const size = 4
	job, o := launch.NewJobName(), &Options{JobKey: testKey}
	res := make(chan joined, size)
	for r := range size - 1 {
		go func() { ep, err := Join(job, r, size, o); res <- joined{r, ep, err} }()
	}
	// Rank 3 is not there yet: the creator still serves the segment.
	path := segPath("/dev/shm", segmentName(job, o.JobKey, o, 0))
	var fd int
	var bytes int64
	for {
		var err error
		fd, bytes, err = fdpass.Fetch(path, segServed, segObject, fdpass.Want{MinSize: headerSize})
		if err == nil {
			break
		}
		if !errors.Is(err, fdpass.ErrNoServer) && !errors.Is(err, fdpass.ErrNotServed) && !errors.Is(err, fdpass.ErrDirNotPrivate) {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
	defer unix.Close(fd)
	go func() { ep, err := Join(job, size-1, size, o); res <- joined{size - 1, ep, err} }()
	eps := collect(t, res, size)
	defer func() {
		for _, ep := range eps {
			ep.Close()
		}
	}()
	byPath, err := unix.Open("/proc/"+strconv.Itoa(os.Getpid())+"/fd/"+strconv.Itoa(eps[1].seg.fd), unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(byPath)
	for _, h := range []struct {
		name string
		fd   int
	}{{"received", fd}, {"reopened", byPath}, {"creator's", eps[0].seg.fd}} {
		for _, n := range []int64{0, bytes / 2, bytes - 4096, bytes + 4096, 2 * bytes} {
			if err := unix.Ftruncate(h.fd, n); err != unix.EPERM {
				t.Errorf("ftruncate of the %s segment from %d to %d bytes: %v, want EPERM", h.name, bytes, n, err)
			}
		}
	}
	checkMessagesWhole(t, eps)
}

// checkMessagesWhole sends, between every ordered pair, a message each of
// a fastbox's size, of one cell and of many cells, and checks each by its
// CRC-32.
func checkMessagesWhole(t *testing.T, eps map[int]*Endpoint) {
	t.Helper()
	for a := range len(eps) {
		for b := range len(eps) {
			if a == b {
				continue
			}
			for i, n := range []int{8, eps[a].CellPayload(), 10 * eps[a].CellPayload()} {
				msg := pattern(n, a*16+b+i)
				got := make([]byte, n)
				if _, err := exchange(t, eps[a], eps[b], i, msg, got); err != nil {
					t.Fatalf("%d bytes from rank %d to rank %d: %v", n, a, b, err)
				}
				if crc32.ChecksumIEEE(got) != crc32.ChecksumIEEE(msg) {
					t.Fatalf("%d bytes from rank %d to rank %d: CRC %#x, sent %#x", n, a, b, crc32.ChecksumIEEE(got), crc32.ChecksumIEEE(msg))
				}
			}
		}
	}
}
