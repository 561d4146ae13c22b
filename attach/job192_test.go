package attach_test

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/knemesis/knemesis/attach"
	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/nemesis/launch/launchtest"
	"github.com/knemesis/knemesis/shm"
)

// TestJob192LMT is nemesis's TestJob192 for large messages: 192 ranks,
// oversubscribed on this machine, run an all-to-all of 64 KiB messages
// through the shm LMT (the eager limit set to 16 KiB) with checksums, every
// ordered pair using its ring. Then every rank adds up the sizes of the
// shared files it owns (rank 0 the segment; each rank its pool and the
// rings it writes), read through /proc/self/map_files, and rank 0 checks
// the job's totals (checkFootprint): the files are exactly what
// shm.FootprintOf and nemesis.SegmentSize say (lmtbench info), which would
// not hold if a pair had fallen back to the ring's own slots, the file
// system allocated no more than that, and it is at most 1 GiB. Nothing is
// left in /dev/shm.
func TestJob192LMT(t *testing.T) {
	if unix.Geteuid() != 0 {
		t.Skip("lacks root: needs CAP_SYS_ADMIN to stat mapped, unlinked files through /proc/self/map_files")
	}
	const procs = 192
	job := launch.NewJobName()
	launchtest.RunOpts(t, procs, launchtest.Options{Job: job}, func(p launch.Proc) error {
		ep, err := nemesis.JoinProc(p, nil)
		if err != nil {
			return err
		}
		defer ep.Close()
		l, err := attach.Attach(ep, attach.Options{EagerMax: 16 << 10, Prefer: []string{lmt.Shm}})
		if err != nil {
			return err
		}
		defer l.Close()
		t0 := time.Now()
		if err := allToAllLMT(ep, 64<<10); err != nil {
			return err
		}
		if err := gatherMemory(ep, t0); err != nil {
			return err
		}
		return barrier(ep)
	})
	if left, _ := filepath.Glob("/dev/shm/*" + job + "*"); len(left) != 0 {
		t.Fatalf("left in /dev/shm after the job: %v", left)
	}
}

// allToAllLMT sends every other rank a size-byte message, 8 peers at a
// time, and checks what arrives by CRC against the pattern of its sender.
func allToAllLMT(ep *nemesis.Endpoint, size int) error {
	const window, tag = 8, 34
	n, me := ep.Size(), ep.Rank()
	out, in := make([][]byte, window), make([][]byte, window)
	for i := range out {
		out[i], in[i] = make([]byte, size), make([]byte, size)
	}
	want := make([]byte, size)
	sends, recvs := make([]nemesis.Request, window), make([]nemesis.Request, window)
	for k := 1; k < n; k += window {
		launchtest.Progress() // the job advances: see launchtest.Options.Timeout
		w := min(window, n-k)
		for j := range w {
			src, dst := (me-k-j+2*n)%n, (me+k+j)%n
			if err := ep.Irecv(&recvs[j], src, tag, in[j]); err != nil {
				return err
			}
			pattern(out[j], me, dst)
			if err := ep.Isend(&sends[j], dst, tag, out[j]); err != nil {
				return err
			}
		}
		for j := range w {
			if err := ep.Wait(&recvs[j]); err != nil {
				return err
			}
			src := (me - k - j + 2*n) % n
			pattern(want, src, me)
			if st := recvs[j].Status(); st.Source != src || st.Count != size || crc32.ChecksumIEEE(in[j]) != crc32.ChecksumIEEE(want) {
				return fmt.Errorf("%d-byte message from rank %d: source %d, %d bytes, or content differs", size, src, st.Source, st.Count)
			}
			if err := ep.Wait(&sends[j]); err != nil {
				return err
			}
		}
	}
	return nil
}

// pattern fills b with bytes that depend on the pair and the offset.
func pattern(b []byte, src, dst int) {
	x := uint32(src*7919+dst*104729) | 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
}

// gatherMemory: every rank measures the shared files it owns once all
// have finished the all-to-all (nothing is freed before Close, so this is
// the peak) and rank 0 checks and prints the job's totals.
func gatherMemory(ep *nemesis.Endpoint, t0 time.Time) error {
	const tag = 35
	if err := barrier(ep); err != nil {
		return err
	}
	owned, err := ownedMemory(ep.Job(), ep.Rank())
	if err != nil {
		return err
	}
	if ep.Rank() != 0 {
		var b [16]byte
		binary.LittleEndian.PutUint64(b[:], owned.size)
		binary.LittleEndian.PutUint64(b[8:], owned.allocated)
		return ep.Send(0, tag, b[:])
	}
	total := owned
	for range ep.Size() - 1 {
		var b [16]byte
		if _, err := ep.Recv(nemesis.AnySource, tag, b[:]); err != nil {
			return err
		}
		total.size += binary.LittleEndian.Uint64(b[:])
		total.allocated += binary.LittleEndian.Uint64(b[8:])
	}
	n := ep.Size()
	want, err := jobFootprint(n)
	if err != nil {
		return err
	}
	fmt.Printf("LMT all-to-all of 64 KiB at %d ranks in %v; shared memory at its peak: %.1f MiB allocated (at most %.1f) of %.1f MiB of files: the segment, %d pools and %d rings\n",
		n, time.Since(t0).Round(time.Millisecond), float64(total.allocated)/(1<<20), float64(want.most)/(1<<20), float64(total.size)/(1<<20), n, n*(n-1))
	return checkFootprint(n, total, want)
}

// memory is what shared files hold: their sizes (st_size, exactly what
// their creators asked for) and what the file system allocated for them
// (st_blocks × 512, which depends on the kernel's tmpfs accounting).
type memory struct{ size, allocated uint64 }

// jobBudget is the most shared memory a job of 192 ranks may take.
const jobBudget = 1 << 30

// footprint is what the library says a job of n ranks creates when every
// pair moves large messages through the shm LMT: the segment, n pools and
// n(n-1) rings. files is the sizes of those files as created; most is the
// most the file system may allocate for them: all of the segment and the
// pools, and each ring but its fixed slots, sparse unless the pair had to
// fall back to them.
type footprint struct{ files, most uint64 }

func jobFootprint(n int) (footprint, error) {
	seg, err := nemesis.SegmentSize(n, nil)
	if err != nil {
		return footprint{}, err
	}
	f := shm.FootprintOf(lmt.Config{})
	rings := uint64(n) * uint64(n-1)
	return footprint{files: seg + f.Job(n) + rings*f.FixedRing, most: seg + f.Job(n)}, nil
}

// checkFootprint holds on any host: the files are exactly the sizes the
// library created; the file system allocated at most what the footprint
// says (it may allocate less: untouched or reclaimed pages), which a pair
// fallen back to its ring's own slots would exceed by 512 KiB; and that is
// within budget.
func checkFootprint(n int, got memory, want footprint) error {
	switch {
	case got.size != want.files:
		return fmt.Errorf("the job's shared files take %d bytes; the segment, %d pools and %d rings should take %d", got.size, n, n*(n-1), want.files)
	case got.allocated > want.most:
		return fmt.Errorf("the file system allocated %d bytes for the job's shared files, more than the %d the segment, %d pools and %d rings take without fixed slots", got.allocated, want.most, n, n*(n-1))
	case want.most > jobBudget:
		return fmt.Errorf("the job may hold %d bytes of shared memory, more than %d", want.most, jobBudget)
	}
	return nil
}

// ownedMemory sums the shared files of job this rank owns among its
// mappings: the segment (rank 0), its pool, the rings it writes. Each is
// counted once in the job, whoever else maps it.
//
// /proc/self/maps comes a page per read, and the process's other goroutines
// (the runtime's heap, the engine's progress) map and unmap between reads,
// so one pass may miss a mapping; the count is taken again until two passes
// agree.
func ownedMemory(job string, rank int) (memory, error) {
	last, err := ownedMemoryOnce(job, rank)
	for err == nil {
		var again memory
		if again, err = ownedMemoryOnce(job, rank); err == nil && again == last {
			return again, nil
		}
		last = again
	}
	return memory{}, err
}

func ownedMemoryOnce(job string, rank int) (memory, error) {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return memory{}, err
	}
	defer f.Close()
	seen := map[uint64]bool{}
	var sum memory
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 {
			continue
		}
		name := fields[5]
		mine := strings.Contains(name, "knemesis-"+job+"-lmt-"+strconv.Itoa(rank)+"-") ||
			strings.HasSuffix(name, "knemesis-"+job+"-lmtpool-"+strconv.Itoa(rank)) ||
			rank == 0 && name == "/memfd:knemesis-segment" // a sealed memfd, served to the ranks
		if !mine {
			continue
		}
		var st unix.Stat_t
		if err := unix.Stat("/proc/self/map_files/"+fields[0], &st); err != nil {
			return memory{}, fmt.Errorf("stat of the mapping of %s: %w", name, err)
		}
		if !seen[st.Ino] {
			seen[st.Ino] = true
			sum.size += uint64(st.Size)
			sum.allocated += uint64(st.Blocks) * 512
		}
	}
	return sum, sc.Err()
}

// TestJobFootprintFormula: for every job size up to 192, what the library
// says the job's shared files take is the segment plus n pools and n(n-1)
// rings of the backend's footprint, grows with every rank, is whole pages
// (so that a file system allocating in pages needs no more) and stays
// within the budget; checkFootprint accepts those files however little
// of them is allocated, and refuses one byte more of files, one page more
// allocated, or a footprint past the budget.
func TestJobFootprintFormula(t *testing.T) {
	f := shm.FootprintOf(lmt.Config{})
	page := uint64(os.Getpagesize())
	var prev footprint
	for n := 2; n <= 192; n++ {
		want, err := jobFootprint(n)
		if err != nil {
			t.Fatal(err)
		}
		seg, _ := nemesis.SegmentSize(n, nil)
		pools, rings := uint64(n)*f.Pool, uint64(n*(n-1))*f.Ring
		if want.most != seg+pools+rings || want.files != want.most+uint64(n*(n-1))*f.FixedRing {
			t.Fatalf("n=%d: footprint %+v; the segment, pools and rings add up to %d allocated at most, %d in files", n, want, seg+pools+rings, seg+pools+rings+uint64(n*(n-1))*f.FixedRing)
		}
		if want.most <= prev.most || want.files <= prev.files || want.most%page != 0 || want.files%page != 0 || want.most > jobBudget {
			t.Fatalf("n=%d: footprint %+v after %+v at n-1: want both larger, whole %d-byte pages, at most %d allocated", n, want, prev, page, jobBudget)
		}
		prev = want
		for _, good := range []memory{{want.files, want.most}, {want.files, want.most - page}, {want.files, 0}} {
			if err := checkFootprint(n, good, want); err != nil {
				t.Fatalf("n=%d: %+v: %v", n, good, err)
			}
		}
		bad := []memory{{want.files + 1, want.most}, {want.files - page, want.most}, {want.files, want.most + page}}
		for _, m := range bad {
			if checkFootprint(n, m, want) == nil {
				t.Fatalf("n=%d: checkFootprint accepted %+v against %+v", n, m, want)
			}
		}
	}
	if checkFootprint(192, memory{2 * jobBudget, jobBudget + 1}, footprint{2 * jobBudget, jobBudget + 1}) == nil {
		t.Fatal("checkFootprint accepted a footprint past the budget")
	}
}

// barrier: everyone reports to rank 0, which answers everyone.
func barrier(ep *nemesis.Endpoint) error {
	const tag = 36
	var b [1]byte
	if ep.Rank() != 0 {
		if err := ep.Send(0, tag, b[:]); err != nil {
			return err
		}
		_, err := ep.Recv(0, tag, b[:])
		return err
	}
	for range ep.Size() - 1 {
		if _, err := ep.Recv(nemesis.AnySource, tag, b[:]); err != nil {
			return err
		}
	}
	for r := 1; r < ep.Size(); r++ {
		if err := ep.Send(r, tag, b[:]); err != nil {
			return err
		}
	}
	return nil
}
