// Package pins reads how many user pages the kernel holds pinned
// (pin_user_pages and friends), for tests that must leave none behind.
package pins

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Count returns nr_foll_pin_acquired - nr_foll_pin_released. The counters
// are kept per CPU and fold into /proc/vmstat lazily, so it first asks the
// kernel to fold them (root only; without root the figure may be off by a
// few pages either way).
func Count() (int64, error) {
	_ = os.WriteFile("/proc/sys/vm/stat_refresh", []byte("1"), 0)
	b, err := os.ReadFile("/proc/vmstat")
	if err != nil {
		return 0, err
	}
	var acq, rel int64 = -1, -1
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) != 2 {
			continue
		}
		v, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "nr_foll_pin_acquired":
			acq = v
		case "nr_foll_pin_released":
			rel = v
		}
	}
	if acq < 0 || rel < 0 {
		return 0, fmt.Errorf("/proc/vmstat lacks nr_foll_pin_acquired/released")
	}
	return acq - rel, nil
}

// WaitZero waits up to timeout for Count to reach 0: asynchronous copies
// and the files of exited processes release their pages shortly after.
func WaitZero(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		n, err := Count()
		if err != nil || n == 0 {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d pages still pinned after %v", n, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
