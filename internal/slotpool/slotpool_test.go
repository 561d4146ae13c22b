package slotpool

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// shared maps the same anonymous shared memory twice, as two processes
// would see one tmpfs file: different addresses, same bytes.
func shared(t *testing.T, size int) ([]byte, []byte) {
	t.Helper()
	fd, err := unix.MemfdCreate("slotpool-test", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		t.Fatal(err)
	}
	var maps [2][]byte
	for i := range maps {
		m, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if err != nil {
			t.Fatal(err)
		}
		maps[i] = m
		t.Cleanup(func() { unix.Munmap(m) })
	}
	return maps[0], maps[1]
}

func TestClaimAllThenNone(t *testing.T) {
	for _, n := range []int{1, 63, 64, 65, 130} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			a, b := shared(t, Size(n, 100))
			pa, err := New(a, n, 100)
			if err != nil {
				t.Fatal(err)
			}
			pb, _ := New(b, n, 100)
			seen := map[int]bool{}
			for i := range n {
				p := pa
				if i%2 == 1 {
					p = pb
				}
				s, ok := p.Claim()
				if !ok || s < 0 || s >= n || seen[s] {
					t.Fatalf("claim %d: slot %d, %v (seen %v)", i, s, ok, seen[s])
				}
				seen[s] = true
			}
			if s, ok := pb.Claim(); ok {
				t.Fatalf("claim %d of %d slots succeeded: slot %d", n+1, n, s)
			}
			if pa.InUse() != n {
				t.Fatalf("InUse %d, want %d", pa.InUse(), n)
			}
			if err := pb.Release(n - 1); err != nil {
				t.Fatal(err)
			}
			if s, ok := pa.Claim(); !ok || s != n-1 {
				t.Fatalf("claim after releasing slot %d: %d, %v", n-1, s, ok)
			}
		})
	}
}

func TestReleaseChecked(t *testing.T) {
	a, _ := shared(t, Size(10, 64))
	p, _ := New(a, 10, 64)
	s, _ := p.Claim()
	if err := p.Release(s); err != nil {
		t.Fatal(err)
	}
	if err := p.Release(s); !errors.Is(err, ErrNotClaimed) {
		t.Fatalf("second release of slot %d: %v, want ErrNotClaimed", s, err)
	}
	for _, i := range []int{-1, 10} {
		if err := p.Release(i); !errors.Is(err, ErrRange) {
			t.Fatalf("Release(%d): %v, want ErrRange", i, err)
		}
	}
	if p.InUse() != 0 {
		t.Fatalf("InUse %d after bad releases, want 0", p.InUse())
	}
}

func TestNewChecksGeometry(t *testing.T) {
	a, _ := shared(t, 4096)
	for _, c := range []struct{ n, size int }{{0, 64}, {1, 0}, {100, 64}} {
		if _, err := New(a, c.n, c.size); !errors.Is(err, ErrGeometry) {
			t.Errorf("New(%d slots of %d in 4096 bytes): %v, want ErrGeometry", c.n, c.size, err)
		}
	}
	if _, err := New(a[8:], 1, 64); !errors.Is(err, ErrGeometry) {
		t.Errorf("New on misaligned memory: %v, want ErrGeometry", err)
	}
}

// TestConcurrentHoldersNeverShare: goroutines on two mappings claim,
// stamp the slot with their id, check it is still theirs, and release, many
// times over a pool smaller than their number: no slot is ever held by two,
// slots do not overlap, and all are free at the end.
func TestConcurrentHoldersNeverShare(t *testing.T) {
	const n, size, workers, rounds = 5, 200, 8, 20000
	a, b := shared(t, Size(n, size))
	pools := [2]*Pool{}
	for i, m := range [][]byte{a, b} {
		p, err := New(m, n, size)
		if err != nil {
			t.Fatal(err)
		}
		pools[i] = p
	}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := pools[w%2]
			for r := 0; r < rounds; {
				s, ok := p.Claim()
				if !ok {
					continue
				}
				r++
				slot := p.Slot(s)
				stamp := uint64(w)<<32 | uint64(r)
				binary.LittleEndian.PutUint64(slot, stamp)
				binary.LittleEndian.PutUint64(slot[size-8:], stamp)
				if binary.LittleEndian.Uint64(slot) != stamp || binary.LittleEndian.Uint64(slot[size-8:]) != stamp {
					errs <- fmt.Errorf("worker %d: slot %d overwritten while held", w, s)
					return
				}
				if err := p.Release(s); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if u := pools[0].InUse(); u != 0 {
		t.Fatalf("%d slots still claimed", u)
	}
}
