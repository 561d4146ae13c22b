// Package machine describes the computer lmtbench runs on: CPU model,
// kernel, which CPUs the benchmark may use, and where the hypervisor has
// placed them right now (the placement probe).
package machine

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/knemesis/knemesis/threshold"
	"github.com/knemesis/knemesis/topology"
)

// Facts are the machine facts recorded with every result.
type Facts struct {
	CPUModel string `json:"cpu_model"`
	Kernel   string `json:"kernel"`
	CPUs     []int  `json:"cpus"`   // the CPUs this process may run on
	Caches   string `json:"caches"` // "L1d 32 KiB ×2, …, L3 32 MiB ×1", from package threshold
	Hostname string `json:"hostname"`
	Go       string `json:"go"`
}

// Detect gathers the facts of this machine.
func Detect() Facts {
	f := Facts{CPUModel: cpuModel(), Go: runtime.Version()}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		f.Kernel = unix.ByteSliceToString(u.Release[:])
		f.Hostname = unix.ByteSliceToString(u.Nodename[:])
	}
	f.CPUs, _ = AllowedCPUs()
	if topo, err := Topology(); err == nil {
		f.Caches = threshold.ThisMachine(topo).Caches
	} else {
		f.Caches = "unknown: " + err.Error()
	}
	return f
}

var detected = sync.OnceValues(func() (*topology.Topology, error) {
	return topology.Detect(topology.DetectOptions{})
})

// Topology is the cache topology as package topology detects it (sysfs,
// then CPUID, then $KNEMESIS_CACHE), read once per process.
func Topology() (*topology.Topology, error) { return detected() }

// CachePair finds two distinct usable CPUs that share a cache (shared) or
// share none (!shared), and the cache they share.
func CachePair(shared bool) (a, b int, c topology.Cache, err error) {
	topo, err := Topology()
	if err != nil {
		return 0, 0, c, err
	}
	cpus, err := AllowedCPUs()
	if err != nil {
		return 0, 0, c, err
	}
	for i, a := range cpus {
		for _, b := range cpus[i+1:] {
			if c, ok := topo.SharedCache(a, b); ok == shared {
				return a, b, c, nil
			}
		}
	}
	if shared {
		return 0, 0, c, fmt.Errorf("no two usable CPUs share a cache here (caches: %s)", threshold.ThisMachine(topo).Caches)
	}
	return 0, 0, c, fmt.Errorf("every pair of usable CPUs shares a cache here (caches: %s)", threshold.ThisMachine(topo).Caches)
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if k, v, ok := strings.Cut(s.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// AllowedCPUs lists the CPUs this process may run on, in increasing order.
func AllowedCPUs() ([]int, error) { return topology.Affinity(0) }

// PinProcess binds every thread of this process to cpu. Threads the Go
// runtime starts later inherit the binding from the thread that creates
// them, so one pass over /proc/self/task pins the whole process.
func PinProcess(cpu int) error {
	var set unix.CPUSet
	set.Set(cpu)
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return fmt.Errorf("pinning to CPU %d: %w", cpu, err)
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, &set); err != nil && err != unix.ESRCH {
			return fmt.Errorf("pinning thread %d to CPU %d: %w", tid, cpu, err)
		}
	}
	runtime.GOMAXPROCS(1)
	return nil
}

// Placement is one reading of the placement probe.
type Placement struct {
	Class     string  `json:"class"`      // "far", "near", "all" (one regime) or "unknown"
	LatencyUs float64 `json:"latency_us"` // one-way cache-line latency; 0 when unknown
}

// Unknown is the placement reported when no probe is available.
var Unknown = Placement{Class: "unknown"}

// Builtin names lmtbench's own placement probe in place of a program's
// path: a cache line timed between the two ranks of the job (package
// internal/lineprobe). A run files its readings near or far by the
// regimes they show (FindRegimes); LinePlacement's class is provisional.
const Builtin = "builtin"

// LinePlacement is one reading of a one-way cache-line time, in class All
// until the run files it near or far by the regimes all its readings show
// (FindRegimes): one reading alone cannot say which regime it is in.
func LinePlacement(oneWay time.Duration) Placement {
	return Placement{Class: All, LatencyUs: float64(oneWay) / float64(time.Microsecond)}
}

// ProbePath is the placement probe the user named in
// $LMTBENCH_PLACEMENT_PROBE, or "" when none is named (lmtbench then uses
// the built-in probe). Nothing is looked for beside the repository: what
// lmtbench runs must not depend on the directory it is started from.
func ProbePath() string {
	return os.Getenv("LMTBENCH_PLACEMENT_PROBE")
}

// ProbeTimeout bounds one placement probe. It takes 40–90 ms on an idle
// 2-vCPU machine; when it takes seconds, other processes hold the CPUs and
// its ping-pong measures the scheduler, not the placement.
const ProbeTimeout = 2 * time.Second

// Probe runs the placement probe at path and parses its "far 0.281" line.
// An empty path, a failing or overdue probe or an unreadable answer gives
// Unknown: a missing probe must not stop the benchmark, only mark its
// results. The probe runs in its own process group, so that an overdue one
// is killed with the processes it started.
func Probe(path string) Placement {
	if path == "" {
		return Unknown
	}
	ctx, cancel := context.WithTimeout(context.Background(), ProbeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	out, err := cmd.Output()
	if err != nil {
		return Unknown
	}
	return ParseProbe(out)
}

// ParseProbe parses the probe's output.
func ParseProbe(out []byte) Placement {
	fields := strings.Fields(string(bytes.TrimSpace(out)))
	if len(fields) != 2 || (fields[0] != "far" && fields[0] != "near") {
		return Unknown
	}
	lat, err := strconv.ParseFloat(fields[1], 64)
	if err != nil {
		return Unknown
	}
	return Placement{Class: fields[0], LatencyUs: lat}
}
