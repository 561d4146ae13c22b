package topology

import (
	"errors"
	"os"
	"runtime"
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
	// A thread that pinned itself does not change what the process may
	// run on.
	if len(got) > 1 {
		cpu := got[len(got)-1]
		for try := 0; ; try++ {
			fromPinned, own, onMain := affinityFromPinnedThread(t, cpu)
			if onMain && try < 100 {
				continue // the main thread's mask is the process's
			}
			if onMain || !slices.Equal(own, CPUSet{cpu}) {
				t.Fatalf("could not pin a thread other than the main one to cpu%d (own mask %v)", cpu, own)
			}
			if !slices.Equal(fromPinned, got) {
				t.Errorf("Affinity(0) from a thread pinned to cpu%d = %v, want the process mask %v", cpu, fromPinned, got)
			}
			break
		}
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
			t.Skip("lacks cpuid: no CPUID instruction on this architecture")
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if after, err := Affinity(os.Getpid()); err != nil || !slices.Equal(after, before) {
		t.Errorf("process mask %v before 20 ReadCPUID, %v after (%v)", before, after, err)
	}
}

// affinityFromPinnedThread pins a locked goroutine's thread to cpu, reads
// Affinity(0) and the thread's own mask there, and unpins it again.
// onMain reports that the goroutine ran on the main thread (not pinned).
func affinityFromPinnedThread(t *testing.T, cpu int) (fromPinned, own CPUSet, onMain bool) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // the thread ends with the goroutine
		if onMain = unix.Gettid() == os.Getpid(); onMain {
			return
		}
		var one, all unix.CPUSet
		one.Set(cpu)
		if err := unix.SchedGetaffinity(0, &all); err != nil {
			t.Error(err)
			return
		}
		if err := unix.SchedSetaffinity(0, &one); err != nil {
			t.Error(err)
			return
		}
		fromPinned, _ = Affinity(0)
		own, _ = Affinity(unix.Gettid())
		_ = unix.SchedSetaffinity(0, &all)
	}()
	<-done
	return fromPinned, own, onMain
}
