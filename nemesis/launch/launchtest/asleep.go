package launchtest

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// WaitChildrenAsleep waits until every child process of this one (the
// other ranks of a job) has been asleep (state S: a futex doze, a
// blocking receive; or D) at three looks 10 ms apart, and fails tb after
// limit. Benchmarks that measure a pair beside idle ranks start with it:
// a fixed pause is not enough, since on a loaded machine many ranks can
// still be spinning through their first polls after a second, and the
// pair would be measured against them rather than against idle ranks.
func WaitChildrenAsleep(tb testing.TB, limit time.Duration) {
	tb.Helper()
	deadline := time.Now().Add(limit)
	for calm := 0; calm < 3; {
		if time.Now().After(deadline) {
			tb.Fatalf("the other ranks were not all asleep after %v", limit)
		}
		time.Sleep(10 * time.Millisecond)
		if childrenAsleep() {
			calm++
		} else {
			calm = 0
		}
	}
}

// childrenAsleep reports whether every child of this process is in state
// S or D (/proc/<pid>/stat: "pid (comm) state ppid ...").
func childrenAsleep() bool {
	self := strconv.Itoa(os.Getpid())
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		stat, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(stat)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 1 && f[1] == self && f[0] != "S" && f[0] != "D" {
			return false
		}
	}
	return true
}
