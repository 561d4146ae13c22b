package topology

import (
	"errors"
	"os"
	"strings"
	"testing"
	"testing/fstest"
)

func TestParseCPUList(t *testing.T) {
	tests := []struct {
		in   string
		want CPUSet
		str  string
	}{
		{"0", CPUSet{0}, "0"},
		{"0-3,8-11\n", CPUSet{0, 1, 2, 3, 8, 9, 10, 11}, "0-3,8-11"},
		{"4,0,1-2,2", CPUSet{0, 1, 2, 4}, "0-2,4"},
		{"", nil, ""},
	}
	for _, tt := range tests {
		got, err := ParseCPUList(tt.in)
		if err != nil || !got.Equal(tt.want) || got.String() != tt.str {
			t.Errorf("ParseCPUList(%q) = %v (%q), %v; want %v (%q)", tt.in, got, got.String(), err, tt.want, tt.str)
		}
	}
	for _, bad := range []string{"a", "3-1", "1-", "-1", "0-99999999", "1,,2"} {
		if _, err := ParseCPUList(bad); err == nil {
			t.Errorf("ParseCPUList(%q) accepted", bad)
		}
	}
}

func TestReadSysfsFixtures(t *testing.T) {
	tests := []struct {
		fixture string
		cpus    string
		caches  []string // Cache.String() without source
	}{
		{"xeon-e5345", "0-7", []string{
			"L1d 32 KiB cpus 0", "L1d 32 KiB cpus 1", "L1d 32 KiB cpus 2", "L1d 32 KiB cpus 3",
			"L1d 32 KiB cpus 4", "L1d 32 KiB cpus 5", "L1d 32 KiB cpus 6", "L1d 32 KiB cpus 7",
			"L1i 32 KiB cpus 0", "L1i 32 KiB cpus 1", "L1i 32 KiB cpus 2", "L1i 32 KiB cpus 3",
			"L1i 32 KiB cpus 4", "L1i 32 KiB cpus 5", "L1i 32 KiB cpus 6", "L1i 32 KiB cpus 7",
			"L2 4 MiB cpus 0,4", "L2 4 MiB cpus 1,5", "L2 4 MiB cpus 2,6", "L2 4 MiB cpus 3,7",
		}},
		{"epyc-kvm", "0-1", []string{
			"L1d 32 KiB cpus 0", "L1d 32 KiB cpus 1", "L1i 32 KiB cpus 0", "L1i 32 KiB cpus 1",
			"L2 512 KiB cpus 0", "L2 512 KiB cpus 1", "L3 32 MiB cpus 0-1",
		}},
	}
	for _, tt := range tests {
		topo := mustSysfs(t, tt.fixture)
		if topo.CPUs.String() != tt.cpus {
			t.Errorf("%s: cpus %s, want %s", tt.fixture, topo.CPUs, tt.cpus)
		}
		var got []string
		for _, c := range topo.Caches {
			got = append(got, strings.TrimSuffix(c.String(), " (sysfs)"))
		}
		if strings.Join(got, "\n") != strings.Join(tt.caches, "\n") {
			t.Errorf("%s caches:\n%s\nwant:\n%s", tt.fixture, strings.Join(got, "\n"), strings.Join(tt.caches, "\n"))
		}
	}

	amd := mustSysfs(t, "amd-ccx")
	if len(amd.Caches) != 8*3+2 {
		t.Errorf("amd-ccx: %d caches, want 8 cores × 3 + 2 CCX L3", len(amd.Caches))
	}
	for _, pair := range []struct {
		a, b  int
		level int
	}{{0, 8, 3}, {0, 11, 3}, {1, 3, 3}, {5, 12, 3}} {
		if c, ok := amd.SharedCache(pair.a, pair.b); !ok || c.Level != pair.level {
			t.Errorf("amd-ccx cpus %d,%d share %v %v, want L%d", pair.a, pair.b, c, ok, pair.level)
		}
	}
	if c, ok := amd.SharedCache(3, 4); ok {
		t.Errorf("amd-ccx cpus 3,4 (two CCXs) share %s", c)
	}

	_, err := ReadSysfs(os.DirFS("testdata/vm-nocache"))
	if !errors.Is(err, ErrNoCacheInfo) {
		t.Errorf("vm-nocache: err = %v, want ErrNoCacheInfo", err)
	}
}

func TestReadSysfsErrors(t *testing.T) {
	good := func() fstest.MapFS {
		return fstest.MapFS{
			"online":                                {Data: []byte("0\n")},
			"cpu0/cache/index0/level":               {Data: []byte("2\n")},
			"cpu0/cache/index0/type":                {Data: []byte("Unified\n")},
			"cpu0/cache/index0/size":                {Data: []byte("1024K\n")},
			"cpu0/cache/index0/coherency_line_size": {Data: []byte("64\n")},
			"cpu0/cache/index0/shared_cpu_list":     {Data: []byte("0\n")},
		}
	}
	if topo, err := ReadSysfs(good()); err != nil || topo.Caches[0].Size != 1<<20 {
		t.Fatalf("good tree: %v, %v", topo, err)
	}
	tests := []struct {
		file, data, want string
	}{
		{"cpu0/cache/index0/level", "x", `cpu0/cache/index0/level = "x"`},
		{"cpu0/cache/index0/type", "Victim", `type = "Victim"`},
		{"cpu0/cache/index0/size", "lots", `size = "lots"`},
		{"cpu0/cache/index0/shared_cpu_list", "1", "does not contain cpu0"},
		{"cpu0/cache/index0/shared_cpu_list", "0-", `shared_cpu_list = "0-"`},
		{"online", "", "online lists no CPU"},
	}
	for _, tt := range tests {
		fsys := good()
		fsys[tt.file] = &fstest.MapFile{Data: []byte(tt.data)}
		_, err := ReadSysfs(fsys)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s=%q: err = %v, want it to contain %q", tt.file, tt.data, err, tt.want)
		}
	}
	fsys := good()
	delete(fsys, "cpu0/cache/index0/size")
	if _, err := ReadSysfs(fsys); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing size: err = %v, want not-exist naming the file", err)
	}
}

func TestOverride(t *testing.T) {
	o, err := ParseOverride("L2:4M:0+4,2+6,1+5,3+7; L1d:48K:0,1,2,3,4,5,6,7")
	if err != nil {
		t.Fatal(err)
	}
	topo, err := o.Apply(mustSysfs(t, "epyc-kvm").with8CPUs())
	if err != nil {
		t.Fatal(err)
	}
	c, ok := topo.SharedCache(2, 6)
	if !ok || c.Level != 3 {
		t.Errorf("2,6: %v %v (the L3 was not overridden and spans all)", c, ok)
	}
	if cs := topo.CachesOf(6); len(cs) != 3 || cs[1].Name() != "L2" || cs[1].Size != 4<<20 || cs[1].CPUs.String() != "2,6" || cs[1].Source != SourceOverride {
		t.Errorf("cpu6 caches: %v", cs)
	}
	cs := topo.CachesOf(0)
	if len(cs) != 4 || cs[0].Name() != "L1d" || cs[0].Size != 48<<10 || cs[0].Source != SourceOverride ||
		cs[1].Name() != "L1i" || cs[1].Source != SourceSysfs || cs[2].CPUs.String() != "0,4" {
		t.Errorf("cpu0: want L1d replaced, L1i kept, L2 0,4: %v", cs)
	}

	bad := map[string]string{
		"":                      "is empty",
		"L2:4M":                 "want LEVEL:SIZE:GROUPS",
		"L9:4M:0":               `level "L9"`,
		"X2:4M:0":               `level "X2"`,
		"L2:lots:0":             `bad size "lots"`,
		"L2:4M:0-1,1-2":         "cpu1 is in two groups",
		"L2:4M:0;L2:8M:1":       "given twice",
		"L2:4M:a":               `bad CPU group "a"`,
		"L3:8M:0-1;L1d:32K:0,x": `bad CPU group "x"`,
	}
	for spec, want := range bad {
		if _, err := ParseOverride(spec); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseOverride(%q) = %v, want error containing %q", spec, err, want)
		}
	}
	o, _ = ParseOverride("L2:1M:0-3")
	if _, err := o.Apply(mustSysfs(t, "epyc-kvm")); err == nil || !strings.Contains(err.Error(), "cpu2 in L2 is not an online CPU") {
		t.Errorf("override naming absent CPUs: %v", err)
	}
}

// with8CPUs widens the 2-CPU fixture so that overrides can name 8 CPUs:
// the L3 spans them all, the smaller caches keep their two CPUs.
func (t *Topology) with8CPUs() *Topology {
	out := &Topology{CPUs: CPUSet{0, 1, 2, 3, 4, 5, 6, 7}}
	for _, c := range t.Caches {
		if c.Level == 3 {
			c.CPUs = out.CPUs
		}
		out.Caches = append(out.Caches, c)
	}
	return out
}

func TestDetectFallsBackToCPUIDThenOverride(t *testing.T) {
	vm := os.DirFS("testdata/vm-nocache")
	cpuid := func(cpus CPUSet) (map[int]CPUIDInfo, error) {
		if cpus.String() != "0-1" {
			t.Errorf("CPUID asked for cpus %s, want the online 0-1", cpus)
		}
		return map[int]CPUIDInfo{0: mustDecode(t, epycKVM), 1: mustDecode(t, epycKVMcpu1)}, nil
	}
	topo, err := Detect(DetectOptions{Sysfs: vm, CPUID: cpuid, Override: CacheOverride{}})
	if err != nil {
		t.Fatal(err)
	}
	assertSameTopology(t, topo, mustSysfs(t, "epyc-kvm"), SourceCPUID)
	if len(topo.Notes) == 0 || !strings.Contains(topo.Notes[0], "sysfs skipped") {
		t.Errorf("notes %q do not say why sysfs was skipped", topo.Notes)
	}

	noCPUID := func(CPUSet) (map[int]CPUIDInfo, error) { return nil, ErrNoCPUID }
	if _, err := Detect(DetectOptions{Sysfs: vm, CPUID: noCPUID, Override: CacheOverride{}}); err == nil ||
		!strings.Contains(err.Error(), EnvCache) {
		t.Errorf("no source at all: err = %v, want advice naming %s", err, EnvCache)
	}

	t.Setenv(EnvCache, "L2:4M:0-1")
	topo, err = Detect(DetectOptions{Sysfs: vm, CPUID: noCPUID})
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := topo.SharedCache(0, 1); !ok || c.Source != SourceOverride || c.Size != 4<<20 {
		t.Errorf("env override: %v %v", c, ok)
	}
	t.Setenv(EnvCache, "L2:4M")
	if _, err := Detect(DetectOptions{Sysfs: vm, CPUID: noCPUID}); err == nil || !strings.Contains(err.Error(), EnvCache) {
		t.Errorf("bad env override: err = %v", err)
	}
}

func FuzzParseCPUList(f *testing.F) {
	for _, s := range []string{"0", "0-3,8-11", "4,0,1-2", "", "3-1", "0-99999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		set, err := ParseCPUList(s)
		if err != nil {
			return
		}
		again, err := ParseCPUList(set.String())
		if err != nil || !again.Equal(set) {
			t.Fatalf("%q → %s → %v, %v", s, set, again, err)
		}
	})
}

func FuzzParseOverride(f *testing.F) {
	for _, s := range []string{"L2:4M:0+4,2+6", "L2:512K:0,1;L3:32M:0-1", "L1d:32K:0-1;L1:8K:0", "L3:1G:0-65535"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		o, err := ParseOverride(s)
		if err != nil {
			return
		}
		topo, err := o.Apply(nil)
		if err != nil {
			t.Fatalf("%q parsed but does not apply: %v", s, err)
		}
		for _, c := range topo.Caches {
			if c.Size <= 0 || len(c.CPUs) == 0 || c.Source != SourceOverride {
				t.Fatalf("%q: cache %+v", s, c)
			}
		}
	})
}
