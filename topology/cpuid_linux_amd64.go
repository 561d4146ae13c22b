package topology

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// cpuid executes the CPUID instruction on the calling thread's CPU.
func cpuid(leaf, subleaf uint32) (eax, ebx, ecx, edx uint32)

// HostCPUID is a CPUIDFunc running the instruction on the current CPU. The
// APIC ID in the answer is the one of whatever CPU the thread is on; use
// [ReadCPUID] to read each CPU.
func HostCPUID(leaf, subleaf uint32) Regs {
	a, b, c, d := cpuid(leaf, subleaf)
	return Regs{a, b, c, d}
}

// ReadCPUID decodes CPUID on each of the given CPUs. Each CPU is read from
// a goroutine locked to its OS thread, which it pins to that CPU and
// unpins before it exits, still locked: the runtime then discards the
// thread, except the process's main thread, which it cannot end and parks
// for good instead. That thread's mask is the one /proc/<pid>/status and
// sched_getaffinity(pid) report for the whole process, so it must not stay
// pinned. (Threads the runtime needs meanwhile are not cloned from a
// locked thread, whose affinity they would inherit, but from its template
// thread.)
func ReadCPUID(cpus CPUSet) (map[int]CPUIDInfo, error) {
	out := make(map[int]CPUIDInfo, len(cpus))
	for _, cpu := range cpus {
		type result struct {
			info CPUIDInfo
			err  error
		}
		ch := make(chan result, 1)
		go func() {
			runtime.LockOSThread() // never unlocked: see above
			var was, set unix.CPUSet
			if err := unix.SchedGetaffinity(0, &was); err != nil {
				ch <- result{err: fmt.Errorf("cpuid: the thread's CPU mask: %w", err)}
				return
			}
			set.Set(cpu)
			if err := unix.SchedSetaffinity(0, &set); err != nil {
				ch <- result{err: fmt.Errorf("cpuid: pin to cpu%d: %w", cpu, err)}
				return
			}
			info, err := DecodeCPUID(HostCPUID)
			if uerr := unix.SchedSetaffinity(0, &was); uerr != nil && err == nil {
				err = fmt.Errorf("cpuid: unpin from cpu%d: %w", cpu, uerr)
			}
			ch <- result{info, err}
		}()
		r := <-ch
		if r.err != nil {
			return nil, r.err
		}
		out[cpu] = r.info
	}
	return out, nil
}
