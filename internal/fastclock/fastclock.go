// Package fastclock reads a monotonic clock in nanoseconds for the
// statistics the LMT engine takes on every message, at well under the cost
// of time.Now.
//
// The engine reads the clock about five times per message, and a vDSO
// clock_gettime costs more than twice an RDTSC: on the development VM the
// stamps came to a quarter of the protocol's fixed cost for a small
// message through the shm ring (docs/performance.md, internal/fastclock).
// Where the kernel itself has chosen the TSC as its clocksource, it has
// checked that the counter runs at a constant rate and agrees across CPUs,
// which is what durations measured here need; fastclock then scales the
// counter with a rate measured once against the runtime's monotonic clock
// (as UCX does for its timers). Anywhere else it falls back to that clock.
//
// Readings are only meaningful within one process: subtract two of them.
package fastclock

import (
	"math/bits"
	"os"
	"strings"
	"sync"
	"time"
)

// clocksourceFile names the kernel's current clocksource.
const clocksourceFile = "/sys/devices/system/clocksource/clocksource0/current_clocksource"

// calibration is how long the counter's rate is measured for: each end is
// known to some 30 ns (see stamp), a few parts in 100000.
const calibration = 2 * time.Millisecond

var (
	once   sync.Once
	useTSC bool
	tsc0   uint64
	mult   uint64 // nanoseconds per tick, fixed point with 32 fraction bits
	origin = time.Now()
)

// Nanotime returns nanoseconds since an origin fixed for the process (its
// first call, at the latest).
func Nanotime() int64 {
	once.Do(setup)
	if useTSC {
		return scale(readTSC()-tsc0, mult)
	}
	return int64(time.Since(origin))
}

// scale converts ticks to nanoseconds at mult nanoseconds per tick (32
// fraction bits).
func scale(ticks, mult uint64) int64 {
	hi, lo := bits.Mul64(ticks, mult)
	return int64(hi<<32 | lo>>32)
}

// rate is the nanoseconds per tick, with 32 fraction bits, of a counter
// that advanced ticks (> 0) in elapsed.
func rate(elapsed time.Duration, ticks uint64) uint64 {
	q, _ := bits.Div64(uint64(elapsed)>>32, uint64(elapsed)<<32, ticks)
	return q
}

// Source tells which counter Nanotime reads: "tsc" or "runtime".
func Source() string {
	once.Do(setup)
	if useTSC {
		return "tsc"
	}
	return "runtime"
}

func setup() {
	if !haveTSC || !kernelUsesTSC(clocksourceFile) {
		return
	}
	start, c0, ok := stamp()
	if !ok {
		return
	}
	for time.Since(origin)-start < calibration {
	}
	end, c1, ok := stamp()
	if !ok || c1 <= c0 {
		return
	}
	mult, tsc0, useTSC = rate(end-start, c1-c0), c0, true
}

// stamp reads the runtime clock and the counter at one instant: between
// two runtime readings at most stampSlack apart, so that a preemption in
// the middle cannot skew the rate.
func stamp() (time.Duration, uint64, bool) {
	for range 100 {
		before := time.Since(origin)
		c := readTSC()
		after := time.Since(origin)
		if after-before <= stampSlack {
			return before + (after-before)/2, c, true
		}
	}
	return 0, 0, false
}

const stampSlack = 500 * time.Nanosecond

func kernelUsesTSC(path string) bool {
	b, err := os.ReadFile(path)
	return err == nil && strings.TrimSpace(string(b)) == "tsc"
}
