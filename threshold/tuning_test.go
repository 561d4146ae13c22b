package threshold

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/knemesis/knemesis/topology"
)

// curves are made-up throughputs (GB/s) shaped like baselines.md's
// NetPIPE figures on a machine whose pair shares a cache: eager best for
// small messages, shm best after, CMA at half of shm once the buffer is
// dirty in the peer's cache, knem absent.
var curves = map[Backend]map[int]float64{
	Eager:    {4 << 10: 6, 16 << 10: 8, 64 << 10: 9, 256 << 10: 9, 1 << 20: 8, 4 << 20: 7, 16 << 20: 6},
	Shm:      {4 << 10: 2, 16 << 10: 6, 64 << 10: 12, 256 << 10: 18, 1 << 20: 20, 4 << 20: 20, 16 << 20: 12},
	CMA:      {4 << 10: 1, 16 << 10: 3, 64 << 10: 6, 256 << 10: 8, 1 << 20: 9, 4 << 20: 9.8, 16 << 20: 12.2},
	Vmsplice: {4 << 10: 1, 16 << 10: 2, 64 << 10: 5, 256 << 10: 7, 1 << 20: 8, 4 << 20: 8.5, 16 << 20: 8},
	Pipe:     {4 << 10: 1, 16 << 10: 1.5, 64 << 10: 1.8, 256 << 10: 2, 1 << 20: 3, 4 << 20: 2.5, 16 << 20: 2},
}

var tuneSizes = []int{4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20}

func fakeMeasure(calls *[]string) MeasureFunc {
	return func(backend string, size int) (float64, error) {
		*calls = append(*calls, fmt.Sprintf("%s@%d", backend, size))
		c, ok := curves[Backend(backend)]
		if !ok {
			return 0, fmt.Errorf("no /dev/knem: %w", ErrBackendUnavailable)
		}
		return c[size] * 1e9, nil
	}
}

func TestTune(t *testing.T) {
	var calls []string
	tt, err := Tune(fakeMeasure(&calls), tuneSizes, Eager, Knem, CMA, Vmsplice, Shm, Pipe)
	if err != nil {
		t.Fatal(err)
	}
	// Knem is asked once, then dropped; the others at every size, in turn.
	if len(calls) != 1+5*len(tuneSizes) || calls[0] != "eager@4096" || calls[1] != "knem@4096" || calls[2] != "cma@4096" || calls[7] != "cma@16384" {
		t.Errorf("measure calls: %v", calls)
	}
	// 16 MiB: CMA 12.2 beats shm 12 by less than Tolerance, so shm stays.
	want := []TunedRule{{From: 64 << 10, Backend: Shm}}
	if fmt.Sprint(tt.Rules) != fmt.Sprint(want) || tt.LMTMin != 64<<10 {
		t.Errorf("rules %v lmt_min %d; want %v, 64 KiB", tt.Rules, tt.LMTMin, want)
	}
	if len(tt.Points) != 5*len(tuneSizes) {
		t.Errorf("%d points, want %d", len(tt.Points), 5*len(tuneSizes))
	}

	// Where CMA wins clearly at 16 MiB, it takes over there.
	saved := curves[CMA][16<<20]
	curves[CMA][16<<20] = 15
	defer func() { curves[CMA][16<<20] = saved }()
	tt, err = Tune(fakeMeasure(new([]string)), tuneSizes, Shm, CMA)
	if err != nil {
		t.Fatal(err)
	}
	want = []TunedRule{{From: 4 << 10, Backend: Shm}, {From: 16 << 20, Backend: CMA}}
	if fmt.Sprint(tt.Rules) != fmt.Sprint(want) || tt.LMTMin != 0 {
		t.Errorf("rules %v lmt_min %d; want %v without eager", tt.Rules, tt.LMTMin, want)
	}

	failing := func(string, int) (float64, error) { return 0, errors.New("peer died") }
	if _, err := Tune(failing, tuneSizes, Shm); err == nil || !strings.Contains(err.Error(), "shm at 4096 bytes: peer died") {
		t.Errorf("failing measure: %v", err)
	}
	zero := func(string, int) (float64, error) { return 0, nil }
	if _, err := Tune(zero, tuneSizes, Shm); err == nil || !strings.Contains(err.Error(), "not a positive rate") {
		t.Errorf("zero rate: %v", err)
	}
	if _, err := Tune(fakeMeasure(new([]string)), []int{4096, 4096}); err == nil {
		t.Error("non-ascending sizes accepted")
	}
	if _, err := Tune(fakeMeasure(new([]string)), tuneSizes, "dma"); err == nil || !strings.Contains(err.Error(), `"dma"`) {
		t.Errorf("unknown backend: %v", err)
	}
	if _, err := Tune(fakeMeasure(new([]string)), tuneSizes, Knem); !errors.Is(err, ErrBackendUnavailable) {
		t.Errorf("nothing measurable: %v", err)
	}
}

func TestSweepSizes(t *testing.T) {
	s := SweepSizes()
	if len(s) != 15 || s[0] != 4096 || s[14] != 64<<20 {
		t.Errorf("SweepSizes = %v", s)
	}
}

func testMachine() Machine {
	return Machine{CPUModel: "AMD EPYC", CPUs: 2, Caches: "L1d 32 KiB ×2, L1i 32 KiB ×2, L2 512 KiB ×2, L3 32 MiB ×1",
		Kernel: "6.18.44", HostHash: "0123456789abcdef"}
}

func TestTuningFileRoundTripAndForeign(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "tuning.json")
	kvm := mustSysfs(t, "epyc-kvm")
	if got := cacheSummary(kvm); got != testMachine().Caches {
		t.Errorf("cacheSummary = %q", got)
	}
	f := &TuningFile{Machine: testMachine(), Measured: time.Date(2026, 11, 22, 5, 0, 0, 0, time.UTC)}
	f.Put(TunedTable{SharedCache: true, Concurrent: 1, Pair: [2]int{0, 1}, LMTMin: 32 << 10,
		Rules: []TunedRule{{From: 32 << 10, Backend: Shm}, {From: 32 << 20, Backend: CMA}}})
	f.Put(TunedTable{SharedCache: true, Concurrent: 1, Pair: [2]int{0, 1}, LMTMin: 48 << 10,
		Rules: []TunedRule{{From: 48 << 10, Backend: Shm}, {From: 32 << 20, Backend: CMA}}})
	if len(f.Tables) != 1 {
		t.Fatalf("Put of the same pair kind added a table: %d", len(f.Tables))
	}
	if err := f.Save(path); err != nil {
		t.Fatal(err)
	}
	got, err := LoadTuning(path, testMachine())
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", f) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, f)
	}

	// The table built from it uses the measured switches.
	table, err := Build(Env{Topology: kvm, Placement: Placement{Sender: 0, Receiver: 1}, Tuning: got})
	if err != nil {
		t.Fatal(err)
	}
	if c := compact(table); c != "eager<48 KiB | shm≥48 KiB | cma≥32 MiB" || table.LMTMin.Source != SourceTuning || table.Rules[1].Source != SourceTuning {
		t.Errorf("tuned table %s (lmt source %s)", c, table.LMTMin.Source)
	}
	// A pair that does not share a cache has no measured table: formula.
	table, err = Build(Env{Topology: mustSysfs(t, "xeon-e5345"), Placement: Placement{Sender: 0, Receiver: 1}, Tuning: got})
	if err != nil || compact(table) != "eager<16 KiB | cma≥16 KiB | cma-split≥24 KiB" || table.Rules[0].Source != SourceFormula {
		t.Errorf("unshared pair with shared-only tuning: %v %v", table, err)
	}
	// A measured backend that is not available now voids the table.
	table, err = Build(Env{Topology: kvm, Placement: Placement{Sender: 0, Receiver: 1}, Tuning: got, Unavailable: []Backend{CMA}})
	if err != nil || compact(table) != "eager<64 KiB | shm≥64 KiB" || len(table.Notes) != 1 {
		t.Errorf("tuning with a missing backend: %s notes %q %v", compact(table), table.Notes, err)
	}

	foreign := testMachine()
	foreign.CPUModel = "Intel(R) Xeon(R) CPU E5345 @ 2.33GHz"
	foreign.Kernel = "2.6.30"
	_, err = LoadTuning(path, foreign)
	if !errors.Is(err, ErrForeignTuning) || !strings.Contains(err.Error(), `cpu model "Intel(R) Xeon(R) CPU E5345 @ 2.33GHz" here, "AMD EPYC" in file`) ||
		!strings.Contains(err.Error(), `kernel "2.6.30" here`) {
		t.Errorf("foreign file: %v", err)
	}

	if _, err := LoadTuning(filepath.Join(dir, "absent.json"), testMachine()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("absent file: %v", err)
	}
}

// TestTuneMultiRail: the backends Tune measures by default include
// multirail; where it is fastest (16 MiB here, clearly past cma-split) the
// tuned table names it, the file keeps it through a save and a load, and
// the table built from it sends those sizes by it, unless multirail is
// refused (as it is wherever CMA is), which voids the measured table.
func TestTuneMultiRail(t *testing.T) {
	if !slices.Contains(Backends, MultiRail) || !MultiRail.Valid() {
		t.Fatalf("Backends %v: want multirail among them, and valid", Backends)
	}
	curves[CMASplit] = map[int]float64{4 << 10: 0.5, 16 << 10: 2, 64 << 10: 5, 256 << 10: 8, 1 << 20: 10, 4 << 20: 13, 16 << 20: 16}
	curves[MultiRail] = map[int]float64{4 << 10: 0.5, 16 << 10: 2, 64 << 10: 5, 256 << 10: 8, 1 << 20: 10, 4 << 20: 13.2, 16 << 20: 19}
	defer delete(curves, CMASplit)
	defer delete(curves, MultiRail)
	var calls []string
	tt, err := Tune(fakeMeasure(&calls), tuneSizes)
	if err != nil {
		t.Fatal(err)
	}
	// knem is absent and dropped after one call; the six others
	// measured at every size.
	if len(calls) != 1+6*len(tuneSizes) || !slices.Contains(calls, "multirail@16777216") {
		t.Errorf("measure calls: %v", calls)
	}
	// At 4 MiB multirail is within Tolerance of shm; at 16 MiB 19 beats
	// cma-split's 16 and shm's 12.
	want := []TunedRule{{From: 4 << 10, Backend: Shm}, {From: 16 << 20, Backend: MultiRail}}
	if fmt.Sprint(tt.Rules) != fmt.Sprint(want) {
		t.Fatalf("rules %v, want %v", tt.Rules, want)
	}

	tt.SharedCache = true
	f := &TuningFile{Machine: testMachine()}
	f.Put(*tt)
	path := filepath.Join(t.TempDir(), "tuning.json")
	if err := f.Save(path); err != nil {
		t.Fatal(err)
	}
	got, err := LoadTuning(path, testMachine())
	if err != nil {
		t.Fatal(err)
	}
	kvm := mustSysfs(t, "epyc-kvm")
	table, err := Build(Env{Topology: kvm, Placement: Placement{Sender: 0, Receiver: 1}, Tuning: got})
	if c := compact(table); err != nil || c != "eager<64 KiB | shm≥64 KiB | multirail≥16 MiB" || table.Choose(32<<20).Backend != MultiRail {
		t.Errorf("tuned table %s, %v; want multirail from 16 MiB", c, err)
	}
	refused := []Backend{CMA, CMASplit, MultiRail}
	table, err = Build(Env{Topology: kvm, Placement: Placement{Sender: 0, Receiver: 1}, Tuning: got, Unavailable: refused})
	if err != nil || compact(table) != "eager<64 KiB | shm≥64 KiB" ||
		!slices.Equal(table.Notes, []string{"tuning file ignored: measured backend multirail is not available now"}) {
		t.Errorf("tuning with multirail refused: %s notes %q %v", compact(table), table.Notes, err)
	}
}

// TestLoadTuningRejects: every file LoadTuning refuses is refused for its
// own reason, named exactly, with the file's machine matching this one, so
// that no case passes by being rejected as foreign.
func TestLoadTuningRejects(t *testing.T) {
	dir := t.TempDir()
	m, err := jsonMachine(testMachine())
	if err != nil {
		t.Fatal(err)
	}
	m = strings.TrimSpace(m)
	table := func(rules string, extra string) string {
		return `{"version": 1, "machine": ` + m + `, "tables": [` + rules + extra + `]}`
	}
	good := `{"shared_cache": true, "concurrent": 1, "lmt_min": 4096, "rules": [{"from": 4096, "backend": "shm"}]}`
	for _, c := range []struct {
		name, content string
		want          string // the error after "tuning file <path>: "
	}{
		{"version", `{"version": 2, "machine": ` + m + `, "tables": []}`, "version 2, this program reads 1"},
		{"no-version", `{"machine": ` + m + `, "tables": []}`, "version 0, this program reads 1"},
		{"unknown-field", `{"version": 1, "machine": ` + m + `, "tables": [], "bogus": 1}`, `json: unknown field "bogus"`},
		{"unknown-table-field", table(`{"rules": [{"from": 1, "backend": "shm"}], "dma_min": 5}`, ""), `json: unknown field "dma_min"`},
		{"no-rules", table(`{"rules": []}`, ""), "table 0: no rules"},
		{"backend", table(`{"rules": [{"from": 1, "backend": "dma"}]}`, ""), `table 0: rule 0: unknown backend "dma"`},
		{"eager-rule", table(`{"rules": [{"from": 1, "backend": "eager"}]}`, ""), `table 0: rule 0: unknown backend "eager"`},
		{"negative-from", table(`{"rules": [{"from": -1, "backend": "shm"}]}`, ""), "table 0: rule 0: sizes must ascend (from -1)"},
		{"order", table(`{"rules": [{"from": 9, "backend": "shm"}, {"from": 9, "backend": "cma"}]}`, ""), "table 0: rule 1: sizes must ascend (from 9)"},
		{"descending", table(`{"rules": [{"from": 9, "backend": "shm"}, {"from": 8, "backend": "cma"}]}`, ""), "table 0: rule 1: sizes must ascend (from 8)"},
		{"lmt-min", table(good+`, {"concurrent": 2, "lmt_min": -5, "rules": [{"from": 1, "backend": "cma"}]}`, ""), "table 1: negative lmt_min -5"},
		{"type", `{"version": "1"}`, "json: cannot unmarshal string into Go struct field TuningFile.version of type int"},
		{"empty", ``, "empty"},
		{"truncated", table(good, "")[:60], "unexpected EOF"},
		{"not-json", "version = 1\n", "invalid character 'v' looking for beginning of value"},
		{"two-objects", table(good, "") + "\n{}\n", fmt.Sprintf("data after the JSON object, which ends at byte %d", len(table(good, "")))},
	} {
		p := filepath.Join(dir, c.name+".json")
		if err := os.WriteFile(p, []byte(c.content), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := LoadTuning(p, testMachine())
		if want := "tuning file " + p + ": " + c.want; err == nil || err.Error() != want {
			t.Errorf("%s: err = %v\nwant %s", c.name, err, want)
		}
		if errors.Is(err, ErrForeignTuning) {
			t.Errorf("%s: rejected as foreign: the case tests nothing", c.name)
		}
	}
	// The good table alone loads: the cases above differ from an
	// acceptable file only by what they name.
	p := filepath.Join(dir, "good.json")
	if err := os.WriteFile(p, []byte(table(good, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	if f, err := LoadTuning(p, testMachine()); err != nil || len(f.Tables) != 1 || f.Tables[0].LMTMin != 4096 {
		t.Errorf("good file: %+v, %v", f, err)
	}
}

func jsonMachine(m Machine) (string, error) {
	var b bytes.Buffer
	err := (&TuningFile{Machine: m}).writeMachine(&b)
	return b.String(), err
}

func TestDefaultTuningPath(t *testing.T) {
	t.Setenv(EnvTuning, "/tmp/x/tuning.json")
	if p, err := DefaultTuningPath(); err != nil || p != "/tmp/x/tuning.json" {
		t.Errorf("with %s: %q %v", EnvTuning, p, err)
	}
	t.Setenv(EnvTuning, "")
	t.Setenv("XDG_CONFIG_HOME", "/cfg")
	if p, err := DefaultTuningPath(); err != nil || p != "/cfg/knemesis/tuning.json" {
		t.Errorf("default: %q %v", p, err)
	}
}

func TestLoadAndDescribe(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tuning.json")
	here := testMachine()
	cfg := Config{
		Detect:     topology.DetectOptions{Sysfs: os.DirFS(fixtures + "epyc-kvm"), Override: topology.CacheOverride{}},
		TuningPath: path,
		Machine:    &here,
		Env:        Env{Placement: Placement{Sender: 0, Receiver: 1}},
	}
	info, err := Load(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(info.TuningStatus, "none") || len(info.Warnings) != 0 {
		t.Errorf("no file: status %q warnings %q", info.TuningStatus, info.Warnings)
	}
	var out bytes.Buffer
	if err := info.Describe(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"L3   32 MiB   cpus 0-1  sysfs",
		"pair         L3 shared",
		"DMA_min      8 MiB (formula: L3 shared by the pair 32 MiB / (2 × 2 cores sharing it))",
		"eager→LMT    64 KiB (default: MPICH2-Nemesis hardwired LMT switch)",
		"≥ 64 KiB    shm",
	} {
		if !strings.Contains(strings.Join(strings.Fields(out.String()), " "), strings.Join(strings.Fields(want), " ")) {
			t.Errorf("Describe lacks %q:\n%s", want, out.String())
		}
	}

	foreign := here
	foreign.HostHash = "ffffffffffffffff"
	f := &TuningFile{Machine: foreign}
	f.Put(TunedTable{SharedCache: true, Rules: []TunedRule{{From: 4096, Backend: Pipe}}})
	if err := f.Save(path); err != nil {
		t.Fatal(err)
	}
	info, err = Load(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if info.TuningStatus != "ignored" || len(info.Warnings) != 1 || !strings.Contains(info.Warnings[0], "another machine") ||
		compact(info.Table) != "eager<64 KiB | shm≥64 KiB" {
		t.Errorf("foreign file: status %q warnings %q table %s", info.TuningStatus, info.Warnings, compact(info.Table))
	}
}

// TestInfoFor: For builds another pair's table from what Load found — the
// tuning file included — and keeps Load's warnings but not its table's
// notes.
func TestInfoFor(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tuning.json")
	here := testMachine()
	f := &TuningFile{Machine: here}
	f.Put(TunedTable{SharedCache: true, LMTMin: 32 << 10, Rules: []TunedRule{{From: 32 << 10, Backend: Pipe}, {From: 1 << 20, Backend: Vmsplice}}})
	if err := f.Save(path); err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		Detect:     topology.DetectOptions{Sysfs: os.DirFS(fixtures + "epyc-kvm"), Override: topology.CacheOverride{}},
		TuningPath: path,
		Machine:    &here,
		Env:        Env{Placement: Placement{Sender: 0, Receiver: 1}, Unavailable: []Backend{Vmsplice}},
	}
	info, err := Load(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := compact(info.Table), "eager<64 KiB | shm≥64 KiB"; got != want || len(info.Warnings) != 1 ||
		info.Warnings[0] != "tuning file ignored: measured backend vmsplice is not available now" {
		t.Errorf("Load with vmsplice ruled out: %s, warnings %q; want %s and the tuning file's refusal", got, info.Warnings, want)
	}
	other, err := info.For(Env{Placement: Placement{Sender: 1, Receiver: 0}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := compact(other.Table), "eager<32 KiB | pipe≥32 KiB | vmsplice≥1 MiB"; got != want || len(other.Warnings) != 0 ||
		other.TuningStatus != "loaded" || other.Topology != info.Topology {
		t.Errorf("For: %s, warnings %q, status %q; want %s from the loaded file, no warning, Load's topology",
			got, other.Warnings, other.TuningStatus, want)
	}
	if _, err := info.For(Env{Placement: Placement{Sender: 0, Receiver: 7}}); !errors.Is(err, ErrUnknownCPU) {
		t.Errorf("For with cpu7: %v, want ErrUnknownCPU", err)
	}
}
