package topology

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/knemesis/knemesis/internal/bytesize"
)

// SysfsCPURoot is where Linux describes CPUs; [ReadSysfs] takes an fs.FS
// rooted there (os.DirFS(SysfsCPURoot)) so that tests can pass recorded trees.
const SysfsCPURoot = "/sys/devices/system/cpu"

// ErrNoCacheInfo means the source describes no cache at all, as in many
// virtual machines; the caller falls back to the next source.
var ErrNoCacheInfo = errors.New("no cache information")

// ReadSysfs reads the cache topology of the online CPUs from a tree laid out
// like /sys/devices/system/cpu: cpuN/cache/indexM/{level,type,size,
// coherency_line_size,shared_cpu_list}. It returns an error wrapping
// ErrNoCacheInfo when no CPU has a cache directory.
func ReadSysfs(fsys fs.FS) (*Topology, error) {
	cpus, err := onlineCPUs(fsys)
	if err != nil {
		return nil, err
	}
	t := &Topology{CPUs: cpus}
	seen := map[string]bool{}
	for _, cpu := range cpus {
		dir := fmt.Sprintf("cpu%d/cache", cpu)
		entries, err := fs.ReadDir(fsys, dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("sysfs: %w", err)
		}
		for _, e := range entries {
			if !strings.HasPrefix(e.Name(), "index") {
				continue
			}
			c, err := readSysfsCache(fsys, path.Join(dir, e.Name()))
			if err != nil {
				return nil, err
			}
			if !c.CPUs.Contains(cpu) {
				return nil, fmt.Errorf("sysfs: %s/%s: shared_cpu_list %s does not contain cpu%d", dir, e.Name(), c.CPUs, cpu)
			}
			key := fmt.Sprint(c.Level, c.Type, c.CPUs)
			if !seen[key] {
				seen[key] = true
				t.Caches = append(t.Caches, c)
			}
		}
	}
	if len(t.Caches) == 0 {
		return nil, fmt.Errorf("sysfs: no cpu*/cache/index* directories for cpus %s: %w", cpus, ErrNoCacheInfo)
	}
	t.sortCaches()
	return t, nil
}

// onlineCPUs reads "online"; without it, every cpuN directory counts.
func onlineCPUs(fsys fs.FS) (CPUSet, error) {
	if b, err := fs.ReadFile(fsys, "online"); err == nil {
		set, err := ParseCPUList(string(b))
		if err != nil {
			return nil, fmt.Errorf("sysfs: online: %w", err)
		}
		if len(set) == 0 {
			return nil, errors.New("sysfs: online lists no CPU")
		}
		return set, nil
	}
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("sysfs: %w", err)
	}
	var set CPUSet
	for _, e := range entries {
		if n, err := strconv.Atoi(strings.TrimPrefix(e.Name(), "cpu")); err == nil && strings.HasPrefix(e.Name(), "cpu") && n >= 0 && n < MaxCPU {
			set = append(set, n)
		}
	}
	if len(set) == 0 {
		return nil, errors.New("sysfs: neither an online file nor cpuN directories")
	}
	slices.Sort(set)
	return set, nil
}

func readSysfsCache(fsys fs.FS, dir string) (Cache, error) {
	c := Cache{Source: SourceSysfs}
	read := func(name string) (string, error) {
		b, err := fs.ReadFile(fsys, path.Join(dir, name))
		if err != nil {
			return "", fmt.Errorf("sysfs: %w", err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	bad := func(name, val string, err error) error {
		return fmt.Errorf("sysfs: %s/%s = %q: %v", dir, name, val, err)
	}
	s, err := read("level")
	if err != nil {
		return c, err
	}
	if c.Level, err = strconv.Atoi(s); err != nil || c.Level < 1 || c.Level > 7 {
		return c, bad("level", s, errors.New("want 1..7"))
	}
	if s, err = read("type"); err != nil {
		return c, err
	}
	switch t := CacheType(s); t {
	case DataCache, InstructionCache, UnifiedCache:
		c.Type = t
	default:
		return c, bad("type", s, errors.New("want Data, Instruction or Unified"))
	}
	if s, err = read("size"); err != nil {
		return c, err
	}
	if c.Size, err = bytesize.Parse(s, maxCacheSize); err != nil || c.Size == 0 {
		return c, bad("size", s, errors.New("want a size such as 32K"))
	}
	// Some hypervisors omit the line size; it is informative only.
	if s, err := read("coherency_line_size"); err == nil {
		if c.LineSize, err = strconv.Atoi(s); err != nil || c.LineSize < 0 {
			return c, bad("coherency_line_size", s, errors.New("want a byte count"))
		}
	}
	if s, err = read("shared_cpu_list"); err != nil {
		return c, err
	}
	if c.CPUs, err = ParseCPUList(s); err != nil {
		return c, bad("shared_cpu_list", s, err)
	}
	return c, nil
}
