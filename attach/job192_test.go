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
// ordered pair using its ring. Then every rank adds up the blocks fstat
// counts for the shared files it owns (rank 0 the segment; each rank its
// pool and the rings it writes), read through /proc/self/map_files, and
// rank 0 prints the job's total: at most 1 GiB, and exactly what
// shm.FootprintOf and nemesis.SegmentSize say (lmtbench info), which would
// not hold if a pair had fallen back to the ring's own slots. Nothing is
// left in /dev/shm.
func TestJob192LMT(t *testing.T) {
	if unix.Geteuid() != 0 {
		t.Skip("needs root (CAP_SYS_ADMIN) to stat mapped, unlinked files through /proc/self/map_files")
	}
	const procs = 192
	job := launch.NewJobName()
	launchtest.RunOpts(t, procs, launchtest.Options{Job: job, Timeout: 4 * time.Minute}, func(p launch.Proc) error {
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

// gatherMemory: every rank measures the shared memory it owns once all
// have finished the all-to-all (nothing is freed before Close, so this is
// the peak) and rank 0 checks and prints the job's total.
func gatherMemory(ep *nemesis.Endpoint, t0 time.Time) error {
	const tag = 35
	if err := barrier(ep); err != nil {
		return err
	}
	owned, err := ownedBlocks(ep.Job(), ep.Rank())
	if err != nil {
		return err
	}
	var b [8]byte
	if ep.Rank() != 0 {
		binary.LittleEndian.PutUint64(b[:], owned)
		return ep.Send(0, tag, b[:])
	}
	total := owned
	for range ep.Size() - 1 {
		if _, err := ep.Recv(nemesis.AnySource, tag, b[:]); err != nil {
			return err
		}
		total += binary.LittleEndian.Uint64(b[:])
	}
	n := ep.Size()
	seg, err := nemesis.SegmentSize(n, nil)
	if err != nil {
		return err
	}
	f := shm.FootprintOf(lmt.Config{})
	fmt.Printf("LMT all-to-all of 64 KiB at %d ranks in %v; shared memory at its peak, fstat blocks: %d bytes (%.1f MiB): segment %.1f MiB, %d pools and %d rings\n",
		n, time.Since(t0).Round(time.Millisecond), total, float64(total)/(1<<20), float64(seg)/(1<<20), n, n*(n-1))
	if want := seg + f.Job(n); total != want {
		return fmt.Errorf("the job holds %d bytes of shared memory; the segment, %d pools and %d rings should take %d", total, n, n*(n-1), want)
	}
	if total > 1<<30 {
		return fmt.Errorf("the job holds %d bytes of shared memory, more than 1 GiB", total)
	}
	return nil
}

// ownedBlocks sums the blocks (fstat) of the shared files of job this rank
// owns among its mappings: the segment (rank 0), its pool, the rings it
// writes. Each is counted once in the job, whoever else maps it.
func ownedBlocks(job string, rank int) (uint64, error) {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	seen := map[uint64]bool{}
	var sum uint64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 {
			continue
		}
		name := fields[5]
		mine := strings.Contains(name, "knemesis-"+job+"-lmt-"+strconv.Itoa(rank)+"-") ||
			strings.HasSuffix(name, "knemesis-"+job+"-lmtpool-"+strconv.Itoa(rank)) ||
			rank == 0 && strings.Contains(name, job) && !strings.Contains(name, "-lmt")
		if !mine {
			continue
		}
		var st unix.Stat_t
		if err := unix.Stat("/proc/self/map_files/"+fields[0], &st); err != nil {
			return 0, fmt.Errorf("stat of the mapping of %s: %w", name, err)
		}
		if !seen[st.Ino] {
			seen[st.Ino] = true
			sum += uint64(st.Blocks) * 512
		}
	}
	return sum, sc.Err()
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
