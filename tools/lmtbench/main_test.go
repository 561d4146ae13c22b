package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"github.com/knemesis/knemesis/internal/pages"
	"image/png"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/threshold"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/report"
	"github.com/knemesis/knemesis/topology"
)

// These tests build lmtbench and run it as a user would: its ranks are
// re-executions of the built binary, so nothing here runs in-process.

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
	buildOut  []byte
)

func lmtbench(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "lmtbench-test")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "lmtbench")
		buildOut, buildErr = exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
	})
	if buildErr != nil {
		t.Fatalf("go build: %v\n%s", buildErr, buildOut)
	}
	return binPath
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

type runResult struct {
	code           int
	stdout, stderr string
}

func run(t *testing.T, args ...string) runResult {
	t.Helper()
	return runEnv(t, nil, args...)
}

func runEnv(t *testing.T, env []string, args ...string) runResult {
	t.Helper()
	cmd := exec.Command(lmtbench(t), args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running lmtbench %v: %v", args, err)
	}
	return runResult{code, out.String(), errOut.String()}
}

// fast are flags that keep a measurement short: fixed iterations, one
// sample, no placement probe, no copy counting.
var fast = []string{"--iters", "20", "--samples", "1", "--placement-probe", "none", "--copies=false"}

func TestBadInputIsOneLineAndNonZeroExit(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--backends", "foo"}, 2, `lmtbench: --backends: unknown backend "foo" (known: eager, shm, pipe, vmsplice, cma, cma-write, cma-split, multirail, multirail-knem, multirail-shm, knem, arena, arena-copy, auto, auto-arena, auto-copy, table, memcpy, put-allocated, put-knem, put-knem-attach, put-cma, put-am, get-allocated, get-knem, get-knem-attach, get-cma, get-am)`},
		{[]string{"--backends", "shm,"}, 2, `lmtbench: --backends: unknown backend ""`},
		{[]string{"--sizes", "4Q"}, 2, `lmtbench: --sizes: size "4Q": unknown unit "Q" (use B, K/KiB, M/MiB or G/GiB)`},
		{[]string{"--sizes", "4K-1x"}, 2, `lmtbench: --sizes: size "1x": unknown unit "x"`},
		{[]string{"--sizes", "0"}, 2, `lmtbench: --sizes: size "0": a 0-byte message means nothing here (smallest is 1)`},
		{[]string{"pingpong", "--sizes", "0-4K"}, 2, "a 0-byte message means nothing here"},
		{[]string{"--sizes", "64K-4K"}, 2, `size range "64K-4K": 64K is above 4K`},
		{[]string{"--sizes", "2G"}, 2, "larger than the 1G limit"},
		{[]string{"alltoall", "-n", "64"}, 2, "lmtbench: alltoall -n 64: more processes than this machine can run at once"},
		{[]string{"alltoall", "-n", "1"}, 2, "lmtbench: alltoall -n 1: want at least 2 processes"},
		{[]string{"alltoall", "-n", "2", "--backends", "memcpy", "--sizes", "4K"}, 2, "lmtbench: alltoall: memcpy is a two-process reference and has no alltoall"},
		{[]string{"pingpong", "--procs", "3"}, 2, "lmtbench: pingpong runs between 2 processes; --procs/-n 3 applies to alltoall"},
		{[]string{"bogus"}, 2, `lmtbench: unknown command "bogus"`},
		{[]string{"--iters", "x"}, 2, `invalid value "x" for flag -iters`},
		{[]string{"--iters", "-3"}, 2, "lmtbench: --iters -3: want a positive count"},
		{[]string{"--samples", "0"}, 2, "lmtbench: --samples 0: want at least 1"},
		{[]string{"--warmup", "-1s"}, 2, "lmtbench: --warmup -1s: want a duration of 0 or more"},
		{[]string{"--plot", "out.jpg"}, 2, `lmtbench: --plot "out.jpg": want a file ending in .png or .svg`},
		{[]string{"--json", "--csv"}, 2, "lmtbench: --json, --csv and --benchfmt each replace the table; pick one"},
		{[]string{"--cpus", "0,4096"}, 2, "CPU 4096 is not one this process may use"},
		{[]string{"--cpus", "0"}, 2, `--cpus "0": name one CPU per process, 2 of them`},
		{[]string{"--cpus", "near"}, 2, `--cpus "near": want apart, same, shared, unshared, none or a list`},
		{[]string{"pingpong", "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"pollution", "--working-set", "64"}, 2, "lmtbench: --working-set 64: want at least two 64-byte cache lines"},
		{[]string{"pollution", "--working-set", "1T"}, 2, `lmtbench: --working-set: size "1T": unknown unit "T"`},
		{[]string{"pingpong", "--working-set", "1M"}, 2, "lmtbench: --working-set applies to pollution, not pingpong"},
		{[]string{"pollution", "--plot", "p.png"}, 2, "lmtbench: --plot draws throughput; pollution has none to draw"},
		{[]string{"bidir", "--reuse"}, 2, "lmtbench: --reuse applies to pingpong, not bidir"},
		{[]string{"--hugepages=maybe"}, 2, `lmtbench: invalid boolean value "maybe" for -hugepages: parse error`},
		{[]string{"bidir", "--hugepages"}, 2, "lmtbench: --hugepages applies to the ping-pong sweep (lmtbench, lmtbench pingpong), not bidir"},
		{[]string{"--hugepages", "--csv"}, 2, "lmtbench: --hugepages: --csv and --benchfmt have no page-size column; use --json, whose rows carry pages"},
		{[]string{"--hugepages", "--plot", "p.png"}, 2, "lmtbench: --hugepages prints its own table of both page sizes; --plot and --report draw one row per backend"},
		{[]string{"tune", "--backends", "cma-write"}, 2, `lmtbench: --backends: tune measures the selector's backends (eager, knem, cma, cma-split, multirail, vmsplice, shm, pipe), not "cma-write"`},
		{[]string{"--vm", "--plot", "p.png"}, 2, "lmtbench: --plot with --vm: the guest's files vanish when it powers off"},
		{[]string{"tune", "--vm"}, 2, "lmtbench: tune with --vm: the tuning file would describe an emulated CPU"},
	} {
		r := run(t, tc.args...)
		lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
		if r.code != tc.code || len(lines) != 1 || !strings.Contains(lines[0], tc.want) {
			t.Errorf("lmtbench %s: exit %d, stderr %q; want exit %d and one line containing %q",
				strings.Join(tc.args, " "), r.code, r.stderr, tc.code, tc.want)
		}
		if r.stdout != "" {
			t.Errorf("lmtbench %s: bad input still printed %q on stdout", strings.Join(tc.args, " "), r.stdout)
		}
	}
}

// TestUnavailableBackendSaysWhyAndHow asks for knem where the module is not
// loaded, as on a host whose kernel cannot load modules.
func TestUnavailableBackendSaysWhyAndHow(t *testing.T) {
	if _, err := os.Stat("/dev/knem"); err == nil {
		t.Skip("lacks no-knem-device: needs a machine without the knem module: /dev/knem exists here, so knem is available")
	}
	r := run(t, "--backends", "knem")
	want := "lmtbench: --backends: knem: /dev/knem missing — load the module with modprobe knem"
	if r.code != 1 || !strings.HasPrefix(r.stderr, want) || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("exit %d, stderr %q; want exit 1 and one line starting %q", r.code, r.stderr, want)
	}
}

func TestHelpExitsZero(t *testing.T) {
	r := run(t, "-h")
	if r.code != 0 || !strings.Contains(r.stderr, "usage: lmtbench") || !strings.Contains(r.stderr, "-sizes") {
		t.Fatalf("lmtbench -h: exit %d, stderr %q", r.code, r.stderr)
	}
}

// checkConsistent asserts the derived figures follow from the raw ones.
func checkConsistent(t *testing.T, what string, size, messages int, seconds, bps, lat float64) {
	t.Helper()
	if messages <= 0 || seconds <= 0 {
		t.Fatalf("%s: messages %d, seconds %g; want both positive", what, messages, seconds)
	}
	wantBPS := float64(messages) * float64(size) / seconds
	wantLat := seconds / float64(messages) * 1e6
	if math.Abs(bps-wantBPS) > 1e-6*wantBPS || math.Abs(lat-wantLat) > 1e-6*wantLat {
		t.Errorf("%s: bytes_per_sec %g latency_us %g; want %g and %g from messages×size/seconds", what, bps, lat, wantBPS, wantLat)
	}
}

func TestJSONSchema(t *testing.T) {
	r := run(t, append([]string{"pingpong", "--backends", "memcpy", "--sizes", "4K,64KiB", "--json"}, fast...)...)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var raw []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &raw); err != nil {
		t.Fatalf("--json output is not a JSON array: %v\n%s", err, r.stdout)
	}
	for _, key := range []string{"mode", "backend", "size", "iterations", "seconds", "bytes_per_sec",
		"latency_us", "cpu_seconds_per_byte", "placement", "samples_kept", "cpus", "machine"} {
		for i, obj := range raw {
			if _, ok := obj[key]; !ok {
				t.Errorf("result %d has no %q: %v", i, key, obj)
			}
		}
	}
	var results []report.Result
	if err := json.Unmarshal([]byte(r.stdout), &results); err != nil {
		t.Fatal(err)
	}
	if len(results) != 2 || results[0].Size != 4096 || results[1].Size != 65536 {
		t.Fatalf("want results for 4096 and 65536 bytes, got %+v", results)
	}
	for _, res := range results {
		if res.Mode != "pingpong" || res.Backend != "memcpy" || !res.Reference {
			t.Errorf("result %+v: want a pingpong memcpy reference result", res)
		}
		if res.Iterations != 20 || res.Messages != 40 {
			t.Errorf("size %d: %d iterations, %d messages; want 20 and 40 (ping-pong moves two per iteration)", res.Size, res.Iterations, res.Messages)
		}
		checkConsistent(t, "json", res.Size, res.Messages, res.Seconds, res.BytesPerSec, res.LatencyUs)
		if res.Placement != "unknown" || res.Samples != 1 || res.SamplesKept != 1 {
			t.Errorf("size %d: placement %q %d/%d; want unknown 1/1 without a probe", res.Size, res.Placement, res.SamplesKept, res.Samples)
		}
		if res.CopiesPerByte != nil {
			t.Errorf("size %d: copies_per_byte %v reported though no probe ran", res.Size, res.CopiesPerByte)
		}
		if !slices.Equal(res.CPUs, []int{0, 1}) || res.Machine.Kernel == "" || res.Machine.CPUModel == "" {
			t.Errorf("size %d: cpus %v, machine %+v; want 0,1 and the machine facts", res.Size, res.CPUs, res.Machine)
		}
	}
}

func TestCSVSchema(t *testing.T) {
	r := run(t, append([]string{"stream", "--backends", "memcpy", "--sizes", "8K-32K", "--csv"}, fast...)...)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	rows, err := csv.NewReader(strings.NewReader(r.stdout)).ReadAll()
	if err != nil {
		t.Fatalf("--csv output does not parse: %v\n%s", err, r.stdout)
	}
	if !slices.Equal(rows[0], report.CSVHeader) {
		t.Fatalf("header %v, want %v", rows[0], report.CSVHeader)
	}
	if len(rows) != 4 {
		t.Fatalf("%d rows, want the header and 8K, 16K, 32K", len(rows))
	}
	col := map[string]int{}
	for i, name := range rows[0] {
		col[name] = i
	}
	num := func(row []string, name string) float64 {
		v, err := strconv.ParseFloat(row[col[name]], 64)
		if err != nil {
			t.Fatalf("column %s = %q: %v", name, row[col[name]], err)
		}
		return v
	}
	for i, row := range rows[1:] {
		size := int(num(row, "size"))
		if size != 8192<<i || row[col["backend"]] != "memcpy" || row[col["mode"]] != "stream" {
			t.Errorf("row %d: %v", i, row)
		}
		if num(row, "iterations") != 20 || num(row, "messages") != 20 {
			t.Errorf("row %d: stream moves one message per iteration: %v", i, row)
		}
		checkConsistent(t, "csv", size, int(num(row, "messages")), num(row, "seconds"), num(row, "bytes_per_sec"), num(row, "latency_us"))
		if row[col["copies_per_byte_user"]] != "" || row[col["copies_mode"]] != "" {
			t.Errorf("row %d: copy columns filled though no probe ran: %v", i, row)
		}
		cpu := num(row, "cpu_seconds_per_byte")
		sum := num(row, "cpu_seconds_per_byte_rank0") + num(row, "cpu_seconds_per_byte_rank1")
		// getrusage keeps user+system monotonic by holding back short
		// intervals, so 20 small messages may read as 0 CPU seconds.
		if cpu < 0 || math.Abs(cpu-sum) > 1e-9*cpu {
			t.Errorf("row %d: cpu_seconds_per_byte %g is not the sum of the ranks' shares", i, cpu)
		}
		if row[col["cpus"]] != "0 1" || row[col["kernel"]] == "" {
			t.Errorf("row %d: cpus %q kernel %q", i, row[col["cpus"]], row[col["kernel"]])
		}
	}
}

func TestPlotIsWrittenAndDecodes(t *testing.T) {
	file := filepath.Join(t.TempDir(), "sweep.png")
	r := run(t, append([]string{"bidir", "--backends", "memcpy", "--sizes", "4K-64K", "--plot", file}, fast...)...)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatalf("--plot wrote nothing: %v", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s is not a PNG: %v", file, err)
	}
	if b := img.Bounds(); b.Dx() < 200 || b.Dy() < 100 {
		t.Errorf("plot is %v, too small to read", b)
	}
	svg := filepath.Join(t.TempDir(), "sweep.svg")
	r = run(t, append([]string{"pingpong", "--backends", "memcpy", "--sizes", "4K-64K", "--plot", svg}, fast...)...)
	b, err := os.ReadFile(svg)
	if r.code != 0 || err != nil || !bytes.Contains(b, []byte("<svg")) || !bytes.Contains(b, []byte("memcpy")) {
		t.Errorf("--plot .svg: exit %d, %v, %d bytes without an <svg> naming the backend; stderr %q", r.code, err, len(b), r.stderr)
	}
}

func TestBenchfmtLines(t *testing.T) {
	r := run(t, append([]string{"pingpong", "--backends", "memcpy", "--sizes", "4K", "--benchfmt"}, fast...)...)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var bench []string
	for _, line := range strings.Split(r.stdout, "\n") {
		if strings.HasPrefix(line, "Benchmark") {
			bench = append(bench, line)
		}
	}
	if len(bench) != 1 {
		t.Fatalf("want one benchmark line, got:\n%s", r.stdout)
	}
	f := strings.Fields(bench[0])
	if f[0] != "BenchmarkPingPong/backend=memcpy/size=4K" || f[1] != "40" || f[3] != "ns/op" || f[5] != "MB/s" || f[7] != "cpu-ns/B" {
		t.Errorf("benchmark line %q does not have the Go benchmark shape", bench[0])
	}
	if !strings.Contains(r.stdout, "goos: linux\n") {
		t.Errorf("no goos header for benchstat:\n%s", r.stdout)
	}
}

// TestSweepEndToEnd runs the default command over two real backends with
// the placement probe (when the machine has one) and the copy probes (when
// they load), and checks the table, the winner and the copy counts: two
// user copies per byte for the shm ring, one kernel copy for CMA.
func TestSweepEndToEnd(t *testing.T) {
	r := run(t, "--backends", "shm,cma", "--sizes", "64K,1M", "--iters", "20", "--samples", "2")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{"machine:", "backends (each checked", "ping-pong (IMB: latency is half the round trip)"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
	rows := map[string][]string{}
	winners := ""
	for _, line := range strings.Split(r.stdout, "\n") {
		f := strings.Fields(line)
		if len(f) >= 7 && (f[0] == "64K" || f[0] == "1M") {
			rows[f[0]+" "+f[1]] = f
		}
		if w, ok := strings.CutPrefix(line, "best backend per size: "); ok {
			winners = w
		}
	}
	for _, key := range []string{"64K shm", "64K cma", "1M shm", "1M cma"} {
		if rows[key] == nil {
			t.Errorf("no row for %s:\n%s", key, r.stdout)
		}
	}
	// A winner is picked among the rows of one placement class; the
	// placement may move between rows, and during all of them.
	best := `(shm|cma)( \((far|near|all); 1 row apart\))?|none \(placement moved\)`
	if !regexp.MustCompile(`^64K (` + best + `), 1M (` + best + `)$`).MatchString(winners) {
		t.Errorf("winner line %q, want one of the two backends per size", winners)
	}
	if os.Geteuid() == 0 {
		// copies/B column: user/kernel/dma; dma is "?" without the module.
		for key, want := range map[string]*regexp.Regexp{
			"1M shm": regexp.MustCompile(`^2\.0\d/0\.00/\?$`),
			"1M cma": regexp.MustCompile(`^0\.00/1\.00/\?$`),
		} {
			if f := rows[key]; f == nil || !want.MatchString(f[5]) {
				t.Errorf("%s copies %v, want %v", key, f, want)
			}
		}
	}
	if r.stderr != "" {
		t.Errorf("stderr not empty without a terminal: %q", r.stderr)
	}
}

// TestCPUsByCacheSharing describes the caches through package threshold's
// override, so that the pairing logic is checked the same on any machine
// with two CPUs.
func TestCPUsByCacheSharing(t *testing.T) {
	allL3 := []string{"KNEMESIS_CACHE=L2:512K:0,1;L3:32M:0-1"}
	splitL3 := []string{"KNEMESIS_CACHE=L2:512K:0,1;L3:32M:0,1"}
	r := runEnv(t, allL3, "--cpus", "unshared", "--sizes", "4K")
	if r.code != 1 || !strings.HasPrefix(r.stderr, "lmtbench: --cpus unshared: every pair of usable CPUs shares a cache here (caches: ") {
		t.Errorf("unshared with one L3: exit %d, stderr %q", r.code, r.stderr)
	}
	r = runEnv(t, splitL3, "--cpus", "shared", "--sizes", "4K")
	if r.code != 1 || !strings.HasPrefix(r.stderr, "lmtbench: --cpus shared: no two usable CPUs share a cache here") {
		t.Errorf("shared with split L3: exit %d, stderr %q", r.code, r.stderr)
	}
	for _, tc := range []struct {
		env  []string
		cpus string
	}{{allL3, "shared"}, {splitL3, "unshared"}} {
		r = runEnv(t, tc.env, append([]string{"pingpong", "--backends", "memcpy", "--cpus", tc.cpus, "--sizes", "4K", "--json"}, fast...)...)
		var results []report.Result
		if err := json.Unmarshal([]byte(r.stdout), &results); r.code != 0 || err != nil || len(results) != 1 {
			t.Fatalf("--cpus %s: exit %d, %v, stderr %q", tc.cpus, r.code, err, r.stderr)
		}
		if c := results[0].CPUs; len(c) != 2 || c[0] == c[1] {
			t.Errorf("--cpus %s pinned to %v; want two distinct CPUs", tc.cpus, c)
		}
	}
}

// TestCopiesOfTheReference counts the memcpy reference's copies with the
// eBPF probes: exactly one user-space copy per byte (memcopy.Copy, uprobe)
// and, in the kernel, only the harness's few control bytes.
func TestCopiesOfTheReference(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("lacks root: the copy probes need root (CAP_BPF and CAP_PERFMON) to load")
	}
	r := run(t, "copies", "--backends", "memcpy", "--sizes", "64K,4M", "--csv")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	rows, err := csv.NewReader(strings.NewReader(r.stdout)).ReadAll()
	if err != nil || len(rows) != 3 {
		t.Fatalf("want header and two rows: %v\n%s", err, r.stdout)
	}
	col := map[string]int{}
	for i, name := range rows[0] {
		col[name] = i
	}
	for _, row := range rows[1:] {
		user, err1 := strconv.ParseFloat(row[col["copies_per_byte_user"]], 64)
		kernel, err2 := strconv.ParseFloat(row[col["copies_per_byte_kernel"]], 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("row %v: copies not numbers (%v, %v); probes: %s", row, err1, err2, row[col["copies_mode"]])
		}
		// The uprobe on memcopy.Copy's first instruction fires again when
		// the call re-enters through Go's stack check (preemption request,
		// stack growth): at most one extra message per job is tolerated
		// here. The 4M job moves 2 + 8×2 = 18 messages.
		size, _ := strconv.Atoi(row[col["size"]])
		messages := 2 + 2*max(8, (8<<20)/size/2)
		if user < 1 || user > 1+1.0/float64(messages)+1e-9 || kernel > 0.001 {
			t.Errorf("size %d: user %.5f kernel %.5f copies per byte; want 1 (at most one re-entered call more) and ~0", size, user, kernel)
		}
		if !strings.Contains(row[col["copies_mode"]], "user=uprobe") {
			t.Errorf("copies_mode %q does not name the uprobe", row[col["copies_mode"]])
		}
	}
}

// TestPollutionSchema sizes the working set from the receiver's L2 as
// package threshold reports it, here overridden to 256 KiB.
func TestPollutionSchema(t *testing.T) {
	env := []string{"KNEMESIS_CACHE=L2:256K:0,1;L3:32M:0-1"}
	r := runEnv(t, env, "pollution", "--backends", "memcpy", "--sizes", "64K", "--iters", "5", "--samples", "1", "--placement-probe", "none", "--json")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var results []report.Result
	if err := json.Unmarshal([]byte(r.stdout), &results); err != nil || len(results) != 1 {
		t.Fatalf("want one result: %v\n%s", err, r.stdout)
	}
	p := results[0].Pollution
	if results[0].Mode != "pollution" || p == nil {
		t.Fatalf("no pollution in %+v", results[0])
	}
	if p.WorkingSet != 256<<10 || p.Rounds != 5 || p.BaselineNs <= 0 || p.AfterNs <= 0 {
		t.Errorf("pollution %+v; want a 256 KiB working set, 5 rounds, positive times", *p)
	}
	if want := float64(p.AfterNs) / float64(p.BaselineNs); math.Abs(p.Slowdown-want) > 1e-9*want {
		t.Errorf("slowdown %g, want after/baseline = %g", p.Slowdown, want)
	}
}

// TestLatencyFromZeroBytes runs the small-message path from an empty
// message: 0 bytes is a size there, with a latency and no per-byte figures.
func TestLatencyFromZeroBytes(t *testing.T) {
	r := run(t, append([]string{"latency", "--backends", "eager", "--sizes", "0,64", "--json"}, fast...)...)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var results []report.Result
	if err := json.Unmarshal([]byte(r.stdout), &results); err != nil || len(results) != 2 {
		t.Fatalf("want two results: %v\n%s", err, r.stdout)
	}
	empty, small := results[0], results[1]
	if empty.Size != 0 || empty.Mode != "latency" || empty.Backend != "eager" || empty.Messages != 40 || empty.LatencyUs <= 0 {
		t.Errorf("0-byte result %+v", empty)
	}
	if empty.BytesPerSec != 0 || empty.CPUSecondsPerByte != 0 {
		t.Errorf("0-byte result has per-byte figures: %g B/s, %g CPU s/B", empty.BytesPerSec, empty.CPUSecondsPerByte)
	}
	checkConsistent(t, "latency 64", small.Size, small.Messages, small.Seconds, small.BytesPerSec, small.LatencyUs)
}

// TestTuneWritesAFileTheSelectorLoads tunes over two backends at two sizes,
// checks the file records this machine and every measured point, and that
// `lmtbench info` then reports the selector loaded it.
func TestTuneWritesAFileTheSelectorLoads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tuning.json")
	r := run(t, "tune", "--backends", "eager,shm", "--sizes", "64K,256K", "--iters", "10", "--samples", "1",
		"--placement-probe", "none", "--tuning-file", path)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "tuning file written: "+path) {
		t.Errorf("tune does not say where it wrote:\n%s", r.stdout)
	}
	topo, err := topology.Detect(topology.DetectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := threshold.LoadTuning(path, threshold.ThisMachine(topo))
	if err != nil {
		t.Fatalf("the tuning file does not load as this machine's: %v", err)
	}
	if len(f.Tables) == 0 {
		t.Fatal("no table in the tuning file")
	}
	var got []string
	for _, p := range f.Tables[0].Points {
		if !(p.BytesPerSec > 0) {
			t.Errorf("point %+v has no throughput", p)
		}
		got = append(got, fmt.Sprintf("%s@%d", p.Backend, p.Size))
	}
	slices.Sort(got)
	if want := []string{"eager@262144", "eager@65536", "shm@262144", "shm@65536"}; !slices.Equal(got, want) {
		t.Errorf("points %v, want %v", got, want)
	}
	info := runEnv(t, []string{"KNEMESIS_TUNING=" + path}, "info", "--placement-probe", "none")
	if info.code != 0 || !strings.Contains(info.stdout, path+": loaded") {
		t.Errorf("info with the tuning file: exit %d\n%s%s", info.code, info.stdout, info.stderr)
	}
	// It names what auto's Learner weighs beside the table, multirail
	// among them, usable here or not.
	if !regexp.MustCompile(`(?m)^  auto's Learner weighs, per peer and size class, from the table's choice: eager .*\bcma-split multirail\b`).MatchString(info.stdout) {
		t.Errorf("info does not say auto's Learner weighs multirail:\n%s", info.stdout)
	}
	// A pair sharing a cache also shows the table auto falls back to when
	// its probe measures the ranks apart: the formula's, the tuning file
	// holding no measurement of such a pair.
	_, shared := topo.SharedCache(0, 1)
	apart := "measured apart (package auto finds the pair's cache line in the slow one of two regimes):\n    < 16 KiB  eager\n    ≥ 16 KiB  cma\n    ≥ 24 KiB  cma-split\n"
	if strings.Contains(info.stdout, apart) != shared {
		t.Errorf("info for a pair sharing a cache %v: measured-apart table %v, want %v\n%s", shared, !shared, shared, info.stdout)
	}
}

// TestTuneSplitsPlacements gives tune a placement probe that says far for
// the first round and near for the second: on a machine whose only pair
// shares a cache (as this VM's sysfs says, wherever its vCPUs run), the
// near round makes the table of pairs sharing a cache and the far round
// that of pairs measured apart, each from its own samples.
func TestTuneSplitsPlacements(t *testing.T) {
	topo, err := topology.Detect(topology.DetectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, hasShared, hasUnshared := topo.Pairs(); !hasShared || hasUnshared {
		t.Skipf("lacks cpus-all-share-a-cache: tune splits placements only where every pair of CPUs shares a cache (here: a sharing pair %v, a pair sharing none %v)", hasShared, hasUnshared)
	}
	dir := t.TempDir()
	probe, path := filepath.Join(dir, "probe"), filepath.Join(dir, "tuning.json")
	// 2 backends × 2 sizes a round, each job probing before and after.
	script := "#!/bin/sh\nn=$(( $(cat \"$0.count\" 2>/dev/null || echo 0) + 1 ))\necho $n > \"$0.count\"\n" +
		"if [ $n -le 8 ]; then echo far 0.28; else echo near 0.06; fi\n"
	if err := os.WriteFile(probe, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	r := run(t, "tune", "--backends", "eager,shm", "--sizes", "64K,256K", "--iters", "10", "--samples", "2",
		"--placement-probe", probe, "--tuning-file", path)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	f, err := threshold.LoadTuning(path, threshold.ThisMachine(topo))
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[bool]int{}
	for _, tt := range f.Tables {
		kinds[tt.SharedCache]++
		if len(tt.Points) != 4 {
			t.Errorf("table sharing %v has %d points, want 4 (2 backends × 2 sizes)", tt.SharedCache, len(tt.Points))
		}
	}
	if len(f.Tables) != 2 || kinds[true] != 1 || kinds[false] != 1 {
		t.Errorf("%d tables, by sharing a cache %v; want one of each", len(f.Tables), kinds)
	}
	if !strings.Contains(r.stdout, "(measured apart: far samples, filed as sharing no cache)") {
		t.Errorf("tune does not say it filed the far samples apart:\n%s", r.stdout)
	}
}

// TestAlltoallSchema runs a two-process Alltoall over shm: every rank sends
// to every other, latency is the time of one collective.
func TestAlltoallSchema(t *testing.T) {
	r := run(t, append([]string{"alltoall", "-n", "2", "--backends", "shm", "--sizes", "64K", "--json"}, fast...)...)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var results []report.Result
	if err := json.Unmarshal([]byte(r.stdout), &results); err != nil || len(results) != 1 {
		t.Fatalf("want one result: %v\n%s", err, r.stdout)
	}
	res := results[0]
	if res.Mode != "alltoall" || res.Procs != 2 || res.Iterations != 20 || res.Messages != 40 {
		t.Errorf("result %+v; want alltoall over 2 processes, 20 iterations of 2 messages", res)
	}
	if want := res.Seconds / 20 * 1e6; math.Abs(res.LatencyUs-want) > 1e-9*want {
		t.Errorf("latency_us %g, want the time of one Alltoall %g", res.LatencyUs, want)
	}
	if want := 40 * 65536 / res.Seconds; math.Abs(res.BytesPerSec-want) > 1e-9*want {
		t.Errorf("bytes_per_sec %g, want %g", res.BytesPerSec, want)
	}
}

// TestRoundsInterleaveBackends gives the job a placement probe that says
// far for its first four calls and near after: each job probes twice (before
// and after its one sample), so only rounds that run every backend back to
// back put round 0 of shm and auto in far and round 1 in near. Measuring
// each backend's rounds in a row would leave no round of one placement.
func TestRoundsInterleaveBackends(t *testing.T) {
	probe := filepath.Join(t.TempDir(), "probe")
	script := "#!/bin/sh\nn=$(( $(cat \"$0.count\" 2>/dev/null || echo 0) + 1 ))\necho $n > \"$0.count\"\n" +
		"if [ $n -le 4 ]; then echo far 0.28; else echo near 0.06; fi\n"
	if err := os.WriteFile(probe, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	r := run(t, "pingpong", "--backends", "shm,auto", "--sizes", "64K", "--iters", "20", "--samples", "2",
		"--placement-probe", probe, "--copies=false", "--json")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var results []report.Result
	if err := json.Unmarshal([]byte(r.stdout), &results); err != nil || len(results) != 2 {
		t.Fatalf("want two results: %v\n%s", err, r.stdout)
	}
	shm, auto := results[0], results[1]
	for _, res := range results {
		if res.Placement != "far" || res.SamplesKept != 1 || res.Samples != 2 {
			t.Errorf("%s: placement %s %d/%d; want far 1/2", res.Backend, res.Placement, res.SamplesKept, res.Samples)
		}
	}
	if shm.AutoVsBest != nil {
		t.Errorf("shm carries auto_vs_best: %+v", shm.AutoVsBest)
	}
	c := auto.AutoVsBest
	if c == nil || !slices.Equal(c.Backends, []string{"shm"}) || len(c.ByClass) != 2 {
		t.Fatalf("auto_vs_best %+v; want shm compared in far and near", c)
	}
	// Both far results are round 0's samples, so far's ratio is theirs.
	want := (float64(auto.Messages) / auto.Seconds) / (float64(shm.Messages) / shm.Seconds)
	far, near := c.ByClass[0], c.ByClass[1]
	if far.Placement != "far" || far.Rounds != 1 || far.Ratio == nil || math.Abs(*far.Ratio-want) > 1e-12*want {
		t.Errorf("far %+v; want 1 round, ratio %g", far, want)
	}
	if near.Placement != "near" || near.Rounds != 1 || near.Ratio == nil || !(*near.Ratio > 0) {
		t.Errorf("near %+v; want 1 round with a ratio", near)
	}
}

// TestBuiltinPlacementProbe: --placement-probe builtin brackets every sample
// of a ping-pong and of an alltoall job with a cache line timed between
// ranks 0 and 1, and a result's placement is then what the readings said.
func TestBuiltinPlacementProbe(t *testing.T) {
	for _, args := range [][]string{
		{"pingpong", "--backends", "memcpy,shm", "--sizes", "4K,64K"},
		{"alltoall", "-n", "2", "--backends", "shm", "--sizes", "64K"},
	} {
		r := run(t, append(args, "--iters", "20", "--samples", "2", "--copies=false", "--placement-probe", "builtin", "--json")...)
		if r.code != 0 {
			t.Fatalf("%v: exit %d: %s", args, r.code, r.stderr)
		}
		var results []report.Result
		if err := json.Unmarshal([]byte(r.stdout), &results); err != nil || len(results) == 0 {
			t.Fatalf("%v: want results: %v\n%s", args, err, r.stdout)
		}
		for _, res := range results {
			if !slices.Contains([]string{"near", "far", "all", "mixed"}, res.Placement) || res.Samples != 2 {
				t.Errorf("%v: %s %d: placement %q over %d samples; want near, far, all or mixed over 2", args, res.Backend, res.Size, res.Placement, res.Samples)
			}
		}
	}
}

// TestBuiltinProbeWithLargeBuffers: the worker's large buffers bring a
// garbage collection before the probe page is mapped; the shared memory's
// descriptor must survive it. It used to be closed by the finalizer of an
// *os.File the engine had dropped: "mapping the placement probe's page: bad
// file descriptor" from 8 MiB on, in every sweep that used the built-in probe.
func TestBuiltinProbeWithLargeBuffers(t *testing.T) {
	out, err := exec.Command(lmtbench(t), "pingpong", "--backends", "shm,memcpy", "--sizes", "8M",
		"--iters", "2", "--samples", "1", "--copies=false", "--placement-probe", "builtin").CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, b := range []string{"shm", "memcpy"} {
		if !regexp.MustCompile(`(?m)^ +8M +` + b + ` .* (near|far|all) 1/1`).Match(out) {
			t.Errorf("no 8M %s sample classed near, far or all:\n%s", b, out)
		}
	}
}

// TestPlacementProbeDefaultsToBuiltin: without $LMTBENCH_PLACEMENT_PROBE,
// run anywhere, lmtbench brackets its samples with its own built-in probe
// and says so, in info as in a sweep, with how it files them.
func TestPlacementProbeDefaultsToBuiltin(t *testing.T) {
	for _, args := range [][]string{
		{"pingpong", "--backends", "memcpy", "--sizes", "4K", "--iters", "20", "--samples", "1", "--copies=false"},
		{"info"},
	} {
		cmd := exec.Command(lmtbench(t), args...)
		cmd.Dir = t.TempDir()
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "LMTBENCH_PLACEMENT_PROBE=") {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		if !regexp.MustCompile(`(?m)^placement: .*built-in probe`).Match(out) {
			t.Errorf("%v: no word of the built-in probe:\n%s", args, out)
		}
		if args[0] == "pingpong" && !regexp.MustCompile(`(?m)^ +4K +memcpy .* (near|far|all) 1/1`).Match(out) {
			t.Errorf("%v: the sample is not classed near, far or all:\n%s", args, out)
		}
		if args[0] == "info" && !regexp.MustCompile(`(?m)^placement: \d+\.\d{3} µs .*never by a fixed line`).Match(out) {
			t.Errorf("info: no reading of the built-in probe:\n%s", out)
		}
		// This machine's /dev/shm is a roomy tmpfs: its line has no problem.
		if args[0] == "info" && !regexp.MustCompile(`(?m)^/dev/shm:  tmpfs, \d+ [MG]iB, \d+ [MG]iB free$`).Match(out) {
			t.Errorf("info: no /dev/shm line, or one with a problem:\n%s", out)
		}
	}
}

// TestSplitRails: a split backend's rows say how it cut the message over
// its rails, the JSON carries the bytes of each (which add up to the
// size), and the table ends with each split backend's throughput over the
// best single rail's, both sides and its name shown. The 1 MiB message of
// cma-split is cut in exact halves; multirail-knem, without /dev/knem
// here, runs on the read and write rails as multirail does;
// multirail-shm adds the shm ring's piece.
func TestSplitRails(t *testing.T) {
	args := append([]string{"pingpong", "--backends", "cma,cma-write,cma-split,multirail,multirail-knem,multirail-shm", "--sizes", "1M"}, fast...)
	r := run(t, append(args, "--json")...)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var results []report.Result
	if err := json.Unmarshal([]byte(r.stdout), &results); err != nil {
		t.Fatal(err)
	}
	for _, res := range results {
		want := strings.HasPrefix(res.Backend, "cma-split") || strings.HasPrefix(res.Backend, "multirail")
		sum := res.Rails[lmt.ReadRail] + res.Rails[lmt.WriteRail] + res.Rails[lmt.KnemRail] + res.Rails[lmt.RingRail]
		if got := sum == 1<<20; got != want || res.Backend == "cma-split" && res.Rails != [lmt.NumRails]int64{lmt.ReadRail: 1 << 19, lmt.WriteRail: 1 << 19} {
			t.Errorf("%s: rails %v, want them to add up to 1 MiB: %v (cma-split: halves)", res.Backend, res.Rails, want)
		}
		if ring := res.Rails[lmt.RingRail] > 0; ring != (res.Backend == "multirail-shm") {
			t.Errorf("%s: rails %v: a ring piece only for multirail-shm", res.Backend, res.Rails)
		}
	}
	r = run(t, args...)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^ +1M +cma-split .* rails read:write 50:50`),
		regexp.MustCompile(`(?m)^ +1M +multirail .* rails read:write \d+:\d+`),
		regexp.MustCompile(`(?m)^ +1M +multirail-knem .* rails read:write \d+:\d+`),
		regexp.MustCompile(`(?m)^ +1M +multirail-shm .* rails read:ring:write \d+:\d+:\d+`),
		regexp.MustCompile(`(?m)^split ÷ best single rail of the run`),
		regexp.MustCompile(`(?m)^1M +cma-split ÷ cma(-write)? +[\d.]+ GB/s ÷ [\d.]+ GB/s += [\d.]+  rails read:write 50:50$`),
		regexp.MustCompile(`(?m)^1M +multirail ÷ cma(-write)? +[\d.]+ GB/s ÷ [\d.]+ GB/s += [\d.]+  rails read:write \d+:\d+$`),
		regexp.MustCompile(`(?m)^1M +multirail-knem ÷ cma(-write)? +[\d.]+ GB/s ÷ [\d.]+ GB/s += [\d.]+  rails read:write \d+:\d+$`),
		regexp.MustCompile(`(?m)^1M +multirail-shm ÷ cma(-write)? +[\d.]+ GB/s ÷ [\d.]+ GB/s += [\d.]+  rails read:ring:write \d+:\d+:\d+$`),
	} {
		if !want.MatchString(r.stdout) {
			t.Errorf("table lacks %v:\n%s", want, r.stdout)
		}
	}
	if regexp.MustCompile(`(?m)^ +1M +cma(-write)? .*rails`).MatchString(r.stdout) {
		t.Errorf("a single-rail row shows rails:\n%s", r.stdout)
	}
}

// TestUnderLauncherWithoutNetmod: the plain lmtbench, in a PMIx launcher's
// environment, does not run a sweep per rank: rank 0 says in one line how
// to build the multi-node one and fails; the other ranks leave quietly.
func TestUnderLauncherWithoutNetmod(t *testing.T) {
	want := `lmtbench: started by a PMIx launcher (mpirun, srun), but this lmtbench has no network module: build the multi-node one with go build -tags "ofi pmix" ./tools/lmtbench (needs libfabric-dev and libpmix-dev)` + "\n"
	r := runEnv(t, []string{"PMIX_NAMESPACE=test-job", "PMIX_RANK=0"}, "pingpong", "--sizes", "8")
	if r.code != 2 || r.stderr != want || r.stdout != "" {
		t.Fatalf("rank 0: status %d, stdout %q, stderr %q; want 2 and %q alone", r.code, r.stdout, r.stderr, want)
	}
	r = runEnv(t, []string{"PMIX_NAMESPACE=test-job", "PMIX_RANK=1"}, "pingpong", "--sizes", "8")
	if r.code != 0 || r.stderr != "" || r.stdout != "" {
		t.Fatalf("rank 1: status %d, stdout %q, stderr %q; want 0 and nothing said", r.code, r.stdout, r.stderr)
	}
	// Outside a launcher, its flags are refused by name.
	want = "lmtbench: --peer applies under a PMIx launcher (mpirun, srun), which starts the ranks itself\n"
	if r = run(t, "pingpong", "--peer", "1"); r.code != 2 || r.stderr != want {
		t.Fatalf("--peer without a launcher: status %d, stderr %q; want 2 and %q", r.code, r.stderr, want)
	}
}

// TestHugepagesEndToEnd: --hugepages prints the line saying which huge
// pages the buffers ask for (or why none), then one row per backend and
// size with both throughputs (memcpy joins cma for its estimate), the cma
// estimate per size, and the knem line.
func TestHugepagesEndToEnd(t *testing.T) {
	r := run(t, "--hugepages", "--backends", "shm,cma", "--sizes", "4M,8M", "--iters", "2", "--samples", "1", "--placement-probe", "none", "--progress=false")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	sys, cfg := pages.Host()
	huge := pages.Decide(sys, cfg, pages.Anon, 8<<20, 0).Mode != pages.Small
	lines := strings.Split(r.stdout, "\n")
	if want := "hugepages: huge = "; huge && !strings.HasPrefix(lines[0], want) || !huge && !strings.HasPrefix(lines[0], "hugepages: no huge pages") {
		t.Fatalf("first line %q (host has huge pages: %v)", lines[0], huge)
	}
	num := regexp.MustCompile(`^[0-9]+$`)
	rows := map[string]int{}
	for _, line := range lines[1:] {
		f := strings.Fields(line)
		if len(f) < 5 || (f[1] != "4M" && f[1] != "8M") {
			continue
		}
		rows[f[0]+" "+f[1]]++
		ok := num.MatchString(f[2]) && (huge && num.MatchString(f[3]) && strings.HasSuffix(f[4], "x") || !huge && f[3] == "-" && f[4] == "-")
		if !ok {
			t.Errorf("row %q: want small and huge MB/s and their ratio", line)
		}
	}
	for _, k := range []string{"shm 4M", "cma 4M", "memcpy 4M", "shm 8M", "cma 8M", "memcpy 8M"} {
		if rows[k] != 1 {
			t.Errorf("%d rows for %s, want 1:\n%s", rows[k], k, r.stdout)
		}
	}
	if len(rows) != 6 {
		t.Errorf("%d rows, want 6:\n%s", len(rows), r.stdout)
	}
	for _, want := range []string{"cma pinning and page walk, estimate: ", "\n  4M: small ", "\n  8M: small ", "\nknem: "} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
}
