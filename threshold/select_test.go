package threshold

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/knemesis/knemesis/internal/bytesize"
	"github.com/knemesis/knemesis/topology"
)

func TestDMAMinPaperCases(t *testing.T) {
	// §3.5: 4 MiB L2 shared by 2 processes → 1 MiB; no cache shared, each
	// process alone on its 4 MiB L2 → 2 MiB; a 6 MiB L2 → 1.5× as much.
	if got := DMAMinBytes(4<<20, 2); got != 1<<20 {
		t.Errorf("4 MiB / 2 users = %d, want 1 MiB", got)
	}
	if got := DMAMinBytes(4<<20, 1); got != 2<<20 {
		t.Errorf("4 MiB / 1 user = %d, want 2 MiB", got)
	}
	if got := DMAMinBytes(6<<20, 2); got != 3<<19 {
		t.Errorf("6 MiB / 2 users = %d, want 1.5 MiB", got)
	}
	if got := DMAMinBytes(4<<20, 0); got != 2<<20 {
		t.Errorf("0 users counts as 1: got %d", got)
	}

	xeon := mustSysfs(t, "xeon-e5345")
	x5460, err := topology.CacheOverride{{Level: 2, Type: topology.UnifiedCache, Size: 6 << 20, Groups: []topology.CPUSet{{0, 1}, {2, 3}}}}.Apply(
		&topology.Topology{CPUs: topology.CPUSet{0, 1, 2, 3}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		topo *topology.Topology
		p    Placement
		want int64
		why  string
	}{
		{"E5345 pair sharing L2", xeon, Placement{Sender: 0, Receiver: 4}, 1 << 20,
			"L2 shared by the pair 4 MiB / (2 × 2 cores sharing it)"},
		{"E5345 ping-pong, no cache shared", xeon, Placement{Sender: 0, Receiver: 1, JobCPUs: []int{0, 1}}, 2 << 20,
			"L2 of receiver cpu1, none shared 4 MiB / (2 × 1 job processes using it)"},
		{"E5345 fully populated, no cache shared", xeon, Placement{Sender: 0, Receiver: 1}, 1 << 20,
			"L2 of receiver cpu1, none shared 4 MiB / (2 × 2 cores sharing it)"},
		{"X5460 6 MiB L2 shared", x5460, Placement{Sender: 0, Receiver: 1}, 3 << 19,
			"L2 shared by the pair 6 MiB / (2 × 2 cores sharing it)"},
		{"E5345 Alltoall, 8 processes, 5 in flight", xeon, Placement{Sender: 0, Receiver: 1, JobCPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}, Concurrent: 5}, (1 << 20) / 5,
			"L2 of receiver cpu1, none shared 4 MiB / (2 × 2 job processes using it) / 5 concurrent transfers"},
	}
	for _, tt := range tests {
		got, _, err := DMAMin(tt.topo, tt.p)
		if err != nil || got.Bytes != tt.want || got.Why != tt.why || got.Source != SourceFormula {
			t.Errorf("%s: %v, %v; want %d because %q", tt.name, got, err, tt.want, tt.why)
		}
	}
	if _, _, err := DMAMin(xeon, Placement{Sender: 0, Receiver: 8}); err == nil || !strings.Contains(err.Error(), "cpu8") {
		t.Errorf("unknown receiver: err = %v", err)
	}
}

// compact renders a table as "eager<64 KiB | shm≥64 KiB | cma>1 MiB".
func compact(t *Table) string {
	parts := []string{"eager<" + bytesize.Format(t.LMTMin.Bytes)}
	for _, r := range t.Rules {
		b := string(r.Backend)
		if r.DMA {
			b += "+dma"
		}
		parts = append(parts, b+strings.Replace(r.Range(), " ", "", 1))
	}
	return strings.Join(parts, " | ")
}

func TestSelectionTables(t *testing.T) {
	xeon := mustSysfs(t, "xeon-e5345")
	amd := mustSysfs(t, "amd-ccx")
	kvm := mustSysfs(t, "epyc-kvm")
	all8 := []int{0, 1, 2, 3, 4, 5, 6, 7}
	tests := []struct {
		name string
		env  Env
		want string
	}{
		// The paper's machine.
		{"xeon shared L2, no module", Env{Topology: xeon, Placement: Placement{Sender: 0, Receiver: 4}},
			"eager<64 KiB | shm≥64 KiB"},
		{"xeon shared L2, knem+DMA", Env{Topology: xeon, Placement: Placement{Sender: 0, Receiver: 4}, Knem: true, DMA: true},
			"eager<64 KiB | shm≥64 KiB | knem+dma>1 MiB"},
		{"xeon no shared cache, knem", Env{Topology: xeon, Placement: Placement{Sender: 0, Receiver: 1, JobCPUs: []int{0, 1}}, Knem: true},
			"eager<16 KiB | knem≥16 KiB"},
		{"xeon no shared cache, knem+DMA", Env{Topology: xeon, Placement: Placement{Sender: 0, Receiver: 1, JobCPUs: []int{0, 1}}, Knem: true, DMA: true},
			"eager<16 KiB | knem≥16 KiB | knem+dma>2 MiB"},
		{"xeon no shared cache, no module", Env{Topology: xeon, Placement: Placement{Sender: 0, Receiver: 1}},
			"eager<16 KiB | cma≥16 KiB | cma-split≥24 KiB"},
		{"xeon no shared cache, cma-split refused", Env{Topology: xeon, Placement: Placement{Sender: 0, Receiver: 1}, Unavailable: []Backend{CMASplit}},
			"eager<16 KiB | cma≥16 KiB"},
		{"xeon no shared cache, only cma-split", Env{Topology: xeon, Placement: Placement{Sender: 0, Receiver: 1}, Unavailable: []Backend{CMA}},
			"eager<16 KiB | cma-split≥16 KiB"},
		{"xeon no shared cache, CMA refused", Env{Topology: xeon, Placement: Placement{Sender: 0, Receiver: 1}, Unavailable: []Backend{CMA, CMASplit}},
			"eager<64 KiB | vmsplice≥64 KiB"},
		{"xeon no shared cache, only copies", Env{Topology: xeon, Placement: Placement{Sender: 0, Receiver: 1}, Unavailable: []Backend{CMA, CMASplit, Vmsplice}},
			"eager<64 KiB | shm≥64 KiB"},
		// A measured cache line overrules the topology only toward
		// sharing less.
		{"xeon shared L2, measured far", Env{Topology: xeon, Placement: Placement{Sender: 0, Receiver: 4, LineLatency: 210 * time.Nanosecond, Apart: true}},
			"eager<16 KiB | cma≥16 KiB | cma-split≥24 KiB"},
		{"xeon no shared cache, measured near", Env{Topology: xeon, Placement: Placement{Sender: 0, Receiver: 1, LineLatency: 50 * time.Nanosecond}},
			"eager<16 KiB | cma≥16 KiB | cma-split≥24 KiB"},
		{"xeon Alltoall, knem+DMA, 5 in flight", Env{Topology: xeon, Placement: Placement{Sender: 0, Receiver: 1, JobCPUs: all8, Concurrent: 5}, Knem: true, DMA: true},
			"eager<4 KiB | knem≥4 KiB | knem+dma≥209716 B"},
		// AMD, L3 per CCX of 4 SMT-2 cores.
		{"amd same CCX, no module", Env{Topology: amd, Placement: Placement{Sender: 0, Receiver: 1}},
			"eager<64 KiB | shm≥64 KiB"},
		{"amd same CCX, two processes", Env{Topology: amd, Placement: Placement{Sender: 0, Receiver: 1, JobCPUs: []int{0, 1}}},
			"eager<64 KiB | shm≥64 KiB"},
		{"amd across CCXs, no module", Env{Topology: amd, Placement: Placement{Sender: 0, Receiver: 4}},
			"eager<16 KiB | cma≥16 KiB | cma-split≥24 KiB"},
		{"amd across CCXs, knem+DMA", Env{Topology: amd, Placement: Placement{Sender: 0, Receiver: 4}, Knem: true, DMA: true},
			"eager<16 KiB | knem≥16 KiB | knem+dma>1 MiB"},
		// This machine: the pair shares 32 MiB of L3, so the double copy
		// runs at every size (twice as fast as CMA in NetPIPE ping-pong,
		// baselines.md); only DMA, above DMA_min = 8 MiB, takes over.
		{"epyc-kvm, no module", Env{Topology: kvm, Placement: Placement{Sender: 0, Receiver: 1}},
			"eager<64 KiB | shm≥64 KiB"},
		// The same vCPUs measured on one core, then on two: sysfs says
		// the same in both placements.
		{"epyc-kvm, measured near", Env{Topology: kvm, Placement: Placement{Sender: 0, Receiver: 1, LineLatency: 52 * time.Nanosecond}},
			"eager<64 KiB | shm≥64 KiB"},
		{"epyc-kvm, measured far", Env{Topology: kvm, Placement: Placement{Sender: 0, Receiver: 1, LineLatency: 204 * time.Nanosecond, Apart: true}},
			"eager<16 KiB | cma≥16 KiB | cma-split≥24 KiB"},
		{"epyc-kvm, measured far, knem+DMA", Env{Topology: kvm, Placement: Placement{Sender: 0, Receiver: 1, LineLatency: 204 * time.Nanosecond, Apart: true}, Knem: true, DMA: true},
			"eager<16 KiB | knem≥16 KiB | knem+dma>8 MiB"},
		{"epyc-kvm, knem without DMA", Env{Topology: kvm, Placement: Placement{Sender: 0, Receiver: 1}, Knem: true},
			"eager<64 KiB | shm≥64 KiB"},
		{"epyc-kvm, knem+DMA", Env{Topology: kvm, Placement: Placement{Sender: 1, Receiver: 0}, Knem: true, DMA: true},
			"eager<64 KiB | shm≥64 KiB | knem+dma>8 MiB"},
		// A caller that rules shm out gets the next mechanism even
		// where the double copy would win.
		{"epyc-kvm, shm ruled out", Env{Topology: kvm, Placement: Placement{Sender: 0, Receiver: 1}, Unavailable: []Backend{Shm}},
			"eager<64 KiB | cma-split≥64 KiB"},
		{"epyc-kvm, only pipe", Env{Topology: kvm, Placement: Placement{Sender: 0, Receiver: 1}, Unavailable: []Backend{Shm, CMA, CMASplit, Vmsplice}},
			"eager<64 KiB | pipe≥64 KiB"},
		{"epyc-kvm, DMA bit without module access", Env{Topology: kvm, Placement: Placement{Sender: 0, Receiver: 1}, Knem: true, DMA: true, Unavailable: []Backend{Knem}},
			"eager<64 KiB | shm≥64 KiB"},
	}
	for _, tt := range tests {
		table, err := Build(tt.env)
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if got := compact(table); got != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.name, got, tt.want)
		}
	}
}

func TestSelectionVMWithoutCacheDirectories(t *testing.T) {
	// The VM fixture has no cache directories: CPUID decides, and gives
	// this machine's table.
	topo, err := topology.Detect(topology.DetectOptions{Sysfs: os.DirFS(fixtures + "vm-nocache"), CPUID: epycKVMCPUID, Override: topology.CacheOverride{}})
	if err != nil {
		t.Fatal(err)
	}
	table, err := Build(Env{Topology: topo, Placement: Placement{Sender: 0, Receiver: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := compact(table), "eager<64 KiB | shm≥64 KiB"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	if table.Cache.Source != topology.SourceCPUID {
		t.Errorf("DMA_min cache source %s, want cpuid", table.Cache.Source)
	}
}

func TestChoose(t *testing.T) {
	table, err := Build(Env{Topology: mustSysfs(t, "xeon-e5345"), Placement: Placement{Sender: 0, Receiver: 4}, Knem: true, DMA: true})
	if err != nil {
		t.Fatal(err)
	}
	for size, want := range map[int64]Choice{
		0: {Eager: true}, 64<<10 - 1: {Eager: true},
		64 << 10: {Backend: Shm}, 1 << 20: {Backend: Shm},
		1<<20 + 1: {Backend: Knem, DMA: true}, 1 << 40: {Backend: Knem, DMA: true},
	} {
		if got := table.Choose(size); got != want {
			t.Errorf("Choose(%d) = %+v, want %+v", size, got, want)
		}
	}
	if a := testing.AllocsPerRun(100, func() { table.Choose(3 << 20) }); a != 0 {
		t.Errorf("Choose allocates %v times", a)
	}
}

func BenchmarkChoose(b *testing.B) {
	topo, err := topology.ReadSysfs(os.DirFS(fixtures + "xeon-e5345"))
	if err != nil {
		b.Fatal(err)
	}
	table, err := Build(Env{Topology: topo, Placement: Placement{Sender: 0, Receiver: 1, JobCPUs: []int{0, 1}}, Knem: true, DMA: true})
	if err != nil {
		b.Fatal(err)
	}
	var sink Choice
	for i := 0; b.Loop(); i++ {
		sink = table.Choose(int64(i&(1<<22-1)) * 8)
	}
	_ = fmt.Sprint(sink)
}

// TestMeasuredLineOverrulesTopology: a pair measured apart (its line in
// the slow one of two regimes) is built as sharing nothing, with a note
// saying why; a slow line alone, in one regime, decides nothing.
func TestMeasuredLineOverrulesTopology(t *testing.T) {
	kvm := mustSysfs(t, "epyc-kvm")
	far, err := Build(Env{Topology: kvm, Placement: Placement{Sender: 0, Receiver: 1, LineLatency: 204 * time.Nanosecond, Apart: true}})
	if err != nil {
		t.Fatal(err)
	}
	if far.Shared || far.LineLatency != 204*time.Nanosecond || len(far.Notes) != 1 ||
		!strings.Contains(far.Notes[0], "shares its L3, but a cache line takes 204ns one way") {
		t.Errorf("far pair: shared %v, line %v, notes %q", far.Shared, far.LineLatency, far.Notes)
	}
	slow, err := Build(Env{Topology: kvm, Placement: Placement{Sender: 0, Receiver: 1, LineLatency: 400 * time.Nanosecond}})
	if err != nil {
		t.Fatal(err)
	}
	if !slow.Shared || len(slow.Notes) != 0 || compact(slow) != "eager<64 KiB | shm≥64 KiB" {
		t.Errorf("slow line in one regime: shared %v, notes %q, %s", slow.Shared, slow.Notes, compact(slow))
	}
}

// TestRegimesSmallSets: package auto's case, a few readings per rank.
func TestRegimesSmallSets(t *testing.T) {
	ns := time.Nanosecond
	for _, c := range []struct {
		readings []time.Duration
		two      bool
		far      time.Duration // a reading that must be far when two
	}{
		{[]time.Duration{148 * ns}, false, 0},
		{[]time.Duration{148 * ns, 160 * ns}, false, 0},
		{[]time.Duration{52 * ns, 3000 * ns}, false, 0}, // one reading is no regime
		{[]time.Duration{52 * ns, 0, 204 * ns, 55 * ns}, false, 0},
		{[]time.Duration{52 * ns, 3000 * ns, 55 * ns, 2900 * ns}, true, 2900 * ns}, // one CPU: two context switches
		{[]time.Duration{52 * ns, 0, 204 * ns, 55 * ns, 237 * ns}, true, 204 * ns},
		{[]time.Duration{140 * ns, 150 * ns, 160 * ns, 148 * ns, 152 * ns}, false, 0},
	} {
		r := FindRegimes(c.readings)
		if r.Two != c.two || c.two && (!r.Far(c.far) || r.Far(r.Low)) || !c.two && r.Far(c.readings[0]) {
			t.Errorf("%v: %+v (%s), want two regimes %v", c.readings, r, r, c.two)
		}
	}
}
