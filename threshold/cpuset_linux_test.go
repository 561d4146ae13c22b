package threshold

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestAffinity: the mask matches the kernel's own account of it in
// /proc/self/status, and a pid that names no process is an error.
func TestAffinity(t *testing.T) {
	got, err := Affinity(0)
	if err != nil {
		t.Fatal(err)
	}
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	var want CPUSet
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			if want, err = ParseCPUList(v); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(want) == 0 || !slices.Equal(got, want) {
		t.Errorf("Affinity(0) = %v, /proc/self/status says %v", got, want)
	}
	if _, err := Affinity(1 << 30); !errors.Is(err, unix.ESRCH) {
		t.Errorf("Affinity of a pid that names no process: %v, want ESRCH", err)
	}
}

// TestReadCPUIDLeavesProcessMask: reading CPUID pins threads one CPU at a
// time; the mask the kernel reports for the process (its main thread's,
// which the runtime parks rather than ends when a locked goroutine exits
// on it) must come out as it went in, or every peer reading this process's
// affinity would think it pinned.
func TestReadCPUIDLeavesProcessMask(t *testing.T) {
	before, err := Affinity(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		if _, err := ReadCPUID(before); errors.Is(err, ErrNoCPUID) {
			t.Skip("no CPUID instruction on this architecture")
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if after, err := Affinity(os.Getpid()); err != nil || !slices.Equal(after, before) {
		t.Errorf("process mask %v before 20 ReadCPUID, %v after (%v)", before, after, err)
	}
}
