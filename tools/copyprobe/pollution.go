package copyprobe

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrNoCacheCounters is wrapped by OpenCacheMissCounter's error where the
// machine exposes no hardware cache-miss counter (as in most VMs).
var ErrNoCacheCounters = errors.New("hardware cache-miss counter not supported")

// CacheMissCounter counts the last-level cache misses of the thread that
// opened it (PERF_COUNT_HW_CACHE_MISSES), as PAPI did for the paper's
// Table 2. The caller must stay on that thread (runtime.LockOSThread).
type CacheMissCounter struct {
	fd int
}

// OpenCacheMissCounter starts counting the calling thread's cache misses.
func OpenCacheMissCounter() (*CacheMissCounter, error) {
	attr := unix.PerfEventAttr{
		Type:   unix.PERF_TYPE_HARDWARE,
		Config: unix.PERF_COUNT_HW_CACHE_MISSES,
		Size:   uint32(unsafe.Sizeof(unix.PerfEventAttr{})),
		Bits:   unix.PerfBitExcludeKernel | unix.PerfBitExcludeHv,
	}
	fd, err := unix.PerfEventOpen(&attr, 0, -1, -1, unix.PERF_FLAG_FD_CLOEXEC)
	if err != nil {
		// ENOENT: no such event on this PMU; EOPNOTSUPP/ENODEV: no PMU.
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENODEV) {
			return nil, fmt.Errorf("%w: perf_event_open: %w", ErrNoCacheCounters, err)
		}
		return nil, fmt.Errorf("perf_event_open for cache misses: %w", err)
	}
	return &CacheMissCounter{fd: fd}, nil
}

// Read returns the misses counted so far.
func (c *CacheMissCounter) Read() (uint64, error) {
	var buf [8]byte
	n, err := unix.Read(c.fd, buf[:])
	if err != nil {
		return 0, fmt.Errorf("reading the cache-miss counter: %w", err)
	}
	if n != len(buf) {
		return 0, fmt.Errorf("reading the cache-miss counter: %d bytes, want 8", n)
	}
	return binary.NativeEndian.Uint64(buf[:]), nil
}

// Close stops counting.
func (c *CacheMissCounter) Close() error { return unix.Close(c.fd) }

// Pollution is how much a transfer evicts the receiver's working set.
type Pollution struct {
	Rounds int
	// Baseline is the median time to re-read the working set when nothing
	// ran since the previous read; AfterTransfer when one transfer did.
	Baseline, AfterTransfer time.Duration
	// Slowdown is AfterTransfer / Baseline: 1.0 means the transfer left
	// the working set in cache, larger means it evicted it.
	Slowdown float64
	// BaselineMisses and AfterMisses are the median cache misses of the
	// re-reads, when MissesErr is nil.
	BaselineMisses, AfterMisses uint64
	// MissesErr says why misses were not counted (ErrNoCacheCounters
	// where the machine has no such counter).
	MissesErr error
}

// cacheLine is the granule of the working set: one load per line.
const cacheLine = 64

// wordsPerLine is how many uint64 a cache line holds.
const wordsPerLine = cacheLine / 8

// MeasurePollution measures cache pollution in the receiving process
// directly, for machines without hardware counters. It builds a working
// set of workingSetBytes (size it to the cache under study) and re-reads
// it after a read that left it cached, with and without a call to
// transfer in between, alternating for rounds of each, and compares the
// median re-read times. transfer typically receives one message; the
// sender must send rounds of them.
//
// The re-read chases pointers through the working set's cache lines in a
// random cyclic order, so that each load waits for the previous one and
// the hardware prefetcher cannot hide an eviction: the time is the sum of
// the lines' load latencies, and what a transfer evicted shows as misses.
//
// The re-reads run on one locked OS thread; where perf_event_open has a
// cache-miss counter, their misses are reported too.
func MeasurePollution(workingSetBytes, rounds int, transfer func() error) (Pollution, error) {
	switch {
	case workingSetBytes < 2*cacheLine:
		return Pollution{}, fmt.Errorf("copyprobe: working set of %d bytes, want at least two %d-byte cache lines", workingSetBytes, cacheLine)
	case rounds < 1:
		return Pollution{}, fmt.Errorf("copyprobe: %d rounds, want at least 1", rounds)
	case transfer == nil:
		return Pollution{}, errors.New("copyprobe: nil transfer")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()

	ws := newChase(workingSetBytes / cacheLine)
	res := Pollution{Rounds: rounds}
	counter, err := OpenCacheMissCounter()
	if err != nil {
		res.MissesErr = err
	} else {
		defer counter.Close()
	}
	base := make([]sample, rounds)
	after := make([]sample, rounds)
	for i := range rounds {
		ws.chase()
		if base[i], err = reread(ws, counter); err != nil {
			return res, err
		}
		ws.chase()
		if err := transfer(); err != nil {
			return res, fmt.Errorf("copyprobe: transfer in round %d: %w", i, err)
		}
		if after[i], err = reread(ws, counter); err != nil {
			return res, err
		}
	}
	res.Baseline, res.BaselineMisses = median(base)
	res.AfterTransfer, res.AfterMisses = median(after)
	res.Slowdown = float64(res.AfterTransfer) / float64(max(res.Baseline, 1))
	return res, nil
}

// chaseSet is a working set whose cache lines form one random cycle: the
// first word of line i holds the index of the line after it.
type chaseSet []uint64

func newChase(lines int) chaseSet {
	ws := make(chaseSet, lines*wordsPerLine)
	// Sattolo's algorithm: a uniformly random permutation with one cycle.
	next := make([]int, lines)
	for i := range next {
		next[i] = i
	}
	for i := lines - 1; i > 0; i-- {
		j := rand.IntN(i)
		next[i], next[j] = next[j], next[i]
	}
	for i, n := range next {
		ws[i*wordsPerLine] = uint64(n)
	}
	return ws
}

// chase visits every line once, each load depending on the previous one.
func (ws chaseSet) chase() {
	lines := uint64(len(ws) / wordsPerLine)
	var at uint64
	for range lines {
		at = ws[at*wordsPerLine]
	}
	runtime.KeepAlive(at)
}

type sample struct {
	d      time.Duration
	misses uint64
}

func reread(ws chaseSet, counter *CacheMissCounter) (sample, error) {
	var m0, m1 uint64
	var err error
	if counter != nil {
		if m0, err = counter.Read(); err != nil {
			return sample{}, err
		}
	}
	t0 := time.Now()
	ws.chase()
	d := time.Since(t0)
	if counter != nil {
		if m1, err = counter.Read(); err != nil {
			return sample{}, err
		}
	}
	return sample{d: d, misses: m1 - m0}, nil
}

func median(s []sample) (time.Duration, uint64) {
	ds := make([]time.Duration, len(s))
	ms := make([]uint64, len(s))
	for i, x := range s {
		ds[i], ms[i] = x.d, x.misses
	}
	slices.Sort(ds)
	slices.Sort(ms)
	return ds[len(ds)/2], ms[len(ms)/2]
}
