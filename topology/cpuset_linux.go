package topology

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Affinity returns the CPUs process pid (0: this one) may run on: the
// affinity mask of its main thread, which launchers set before exec and
// every thread inherits. (sched_getaffinity(0) would read the calling
// thread's instead, which a locked goroutine may have pinned.)
func Affinity(pid int) (CPUSet, error) {
	if pid == 0 {
		pid = os.Getpid()
	}
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(pid, &set); err != nil {
		return nil, fmt.Errorf("reading the CPU affinity of pid %d: %w", pid, err)
	}
	cpus := make(CPUSet, 0, set.Count())
	for c := 0; len(cpus) < cap(cpus); c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}
