package nemesis

import (
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/knemesis/knemesis/internal/fdpass"
)

// creatorWatch measures, for a rank waiting for its job's segment, whether
// the rank creating it is at work: the CPU time of the process serving the
// job's name (rendezvous.go), which it does from before it builds the
// segment. Filling a large segment on an oversubscribed machine can take
// the creator many seconds; while its CPU time grows the waiting ranks
// keep waiting, and once it stops for a whole JoinTimeout they give up. A
// creator that died is not counted: another rank 0 of a job of the same
// name may still come.
type creatorWatch struct {
	path   string // the segment's name
	looked time.Time
	cpu    uint64
}

// creatorLookEvery spaces the looks at the server: every waiting rank
// makes them.
const creatorLookEvery = 100 * time.Millisecond

// progress returns the creator's CPU time in clock ticks, looked up at
// most every creatorLookEvery.
func (w *creatorWatch) progress() uint64 {
	if time.Since(w.looked) < creatorLookEvery {
		return w.cpu
	}
	w.looked = time.Now()
	if fdpass.CheckDir(w.path, segObject) != nil {
		w.cpu = 0
		return 0
	}
	switch pid, ok := fdpass.Probe(w.path); {
	case !ok:
		w.cpu = 0
	case pid > 0:
		w.cpu = cpuTicks(pid)
	}
	// pid 0: too busy serving other ranks to answer; it was at work.
	return w.cpu
}

// cpuTicks is the user and system time of process pid (/proc/<pid>/stat:
// "pid (comm) state ppid ..." with utime and stime the 12th and 13th
// fields after the command), 0 when it is gone.
func cpuTicks(pid int) uint64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 || f[0] == "Z" || f[0] == "X" {
		return 0
	}
	utime, err1 := strconv.ParseUint(f[11], 10, 64)
	stime, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return utime + stime
}
