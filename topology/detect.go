package topology

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
)

// DetectOptions says where [Detect] looks. The zero value reads this
// machine: sysfs, then CPUID, then $KNEMESIS_CACHE.
type DetectOptions struct {
	// Sysfs is a tree laid out like /sys/devices/system/cpu; nil means
	// os.DirFS(SysfsCPURoot).
	Sysfs fs.FS
	// CPUID reads each CPU's CPUID; nil means [ReadCPUID]. Tests inject
	// recorded values.
	CPUID func(CPUSet) (map[int]CPUIDInfo, error)
	// Override replaces levels of the detected topology. Nil means parse
	// $KNEMESIS_CACHE when it is set; an empty non-nil one ignores it.
	Override CacheOverride
}

// Detect finds the cache topology: from sysfs when it describes caches,
// else from CPUID on each online CPU, then with the override applied. Each
// cache records which of these it came from; Notes say why a source was
// skipped.
func Detect(opts DetectOptions) (*Topology, error) {
	sysfs := opts.Sysfs
	if sysfs == nil {
		sysfs = os.DirFS(SysfsCPURoot)
	}
	readCPUID := opts.CPUID
	if readCPUID == nil {
		readCPUID = ReadCPUID
	}
	override := opts.Override
	if override == nil {
		if spec, ok := os.LookupEnv(EnvCache); ok {
			o, err := ParseOverride(spec)
			if err != nil {
				return nil, err
			}
			override = o
		}
	}

	t, sysErr := ReadSysfs(sysfs)
	if sysErr != nil {
		cpus, err := onlineCPUs(sysfs)
		if err != nil {
			cpus = make(CPUSet, runtime.NumCPU())
			for i := range cpus {
				cpus[i] = i
			}
		}
		var cpuidErr error
		var per map[int]CPUIDInfo
		if per, cpuidErr = readCPUID(cpus); cpuidErr == nil {
			t, cpuidErr = TopologyFromCPUID(per)
		}
		switch {
		case cpuidErr == nil:
			t.Notes = append([]string{fmt.Sprintf("sysfs skipped: %v", sysErr)}, t.Notes...)
		case len(override) > 0:
			t = &Topology{CPUs: cpus, Notes: []string{
				fmt.Sprintf("sysfs skipped: %v", sysErr), fmt.Sprintf("cpuid skipped: %v", cpuidErr)}}
		default:
			return nil, fmt.Errorf("cache topology: %w; %w (set %s to describe the caches)", sysErr, cpuidErr, EnvCache)
		}
	}
	if len(override) > 0 {
		o, err := override.Apply(t)
		if err != nil {
			return nil, err
		}
		o.Notes = append(o.Notes, "levels replaced by "+EnvCache+" or the API")
		t = o
	}
	if len(t.Caches) == 0 {
		return nil, errors.New("cache topology: no cache described")
	}
	return t, nil
}
