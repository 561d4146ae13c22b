package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/knemesis/knemesis/tools/lmtbench/internal/harness"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/machine"
)

// at is a 1 MiB sample of 16 messages in round, taking secs (powers of two,
// so that every ratio below is exact).
func at(round int, secs float64, before, after string) harness.Sample {
	return harness.Sample{Size: 1 << 20, Iterations: 8, Messages: 16, Seconds: secs, Round: round,
		Before: machine.Placement{Class: before}, After: machine.Placement{Class: after}}
}

func ratios(t *testing.T, r Result) map[string]ClassRatios {
	t.Helper()
	if r.AutoVsBest == nil {
		t.Fatalf("auto result has no comparison")
	}
	out := map[string]ClassRatios{}
	for _, c := range r.AutoVsBest.ByClass {
		out[c.Placement] = c
	}
	if len(out) != 2 || r.AutoVsBest.ByClass[0].Placement != "far" {
		t.Fatalf("classes %+v, want far then near", r.AutoVsBest.ByClass)
	}
	return out
}

func wantRatio(t *testing.T, c ClassRatios, rounds int, ratio float64) {
	t.Helper()
	if c.Rounds != rounds || c.Ratio == nil || *c.Ratio != ratio {
		got := "null"
		if c.Ratio != nil {
			got = g(*c.Ratio)
		}
		t.Errorf("%s: %d rounds, ratio %s; want %d rounds, ratio %g", c.Placement, c.Rounds, got, rounds, ratio)
	}
}

func wantNone(t *testing.T, c ClassRatios) {
	t.Helper()
	if c.Rounds != 0 || c.Ratio != nil {
		t.Errorf("%s: %d rounds, ratio %v; want 0 rounds and no ratio", c.Placement, c.Rounds, c.Ratio)
	}
}

// TestCompareAutoPairsRoundsWithinOneClass: a round counts for a class only
// when auto and every backend stayed in it; the reference never competes.
func TestCompareAutoPairsRoundsWithinOneClass(t *testing.T) {
	results := []Result{
		Aggregate("pingpong", "shm", false, []harness.Sample{
			at(0, 0.5, "far", "far"), at(1, 0.5, "far", "far"), at(2, 0.125, "near", "near"), at(3, 0.25, "far", "far")}),
		Aggregate("pingpong", "cma", false, []harness.Sample{
			at(0, 0.125, "far", "far"), at(1, 0.25, "far", "near"), at(2, 0.5, "near", "near"), at(3, 0.5, "far", "far")}),
		Aggregate("pingpong", "auto", false, []harness.Sample{
			at(0, 0.0625, "far", "far"), at(1, 0.03125, "far", "far"), at(2, 0.25, "near", "near"), at(3, 0.5, "far", "far")}),
		Aggregate("pingpong", "memcpy", true, []harness.Sample{
			at(0, 0.001, "far", "far"), at(1, 0.001, "far", "far"), at(2, 0.001, "near", "near"), at(3, 0.001, "far", "far")}),
	}
	CompareAuto(results)
	for _, r := range results[:2] {
		if r.AutoVsBest != nil {
			t.Errorf("%s carries a comparison; only auto should", r.Backend)
		}
	}
	auto := results[2]
	if got := strings.Join(auto.AutoVsBest.Backends, ","); got != "shm,cma" {
		t.Errorf("compared backends %q, want shm,cma (not auto, not the memcpy reference)", got)
	}
	c := ratios(t, auto)
	// far: round 0 auto 2× cma, round 3 auto ½ shm; round 1 is out (cma
	// moved to near), though auto was 8× faster in it.
	wantRatio(t, c["far"], 2, (2+0.5)/2)
	// near: round 2 alone, auto ½ shm.
	wantRatio(t, c["near"], 1, 0.5)
}

func TestCompareAutoTooFewSameplacementRounds(t *testing.T) {
	results := []Result{
		Aggregate("stream", "shm", false, []harness.Sample{at(0, 0.5, "far", "far"), at(1, 0.5, "near", "near")}),
		Aggregate("stream", "pipe", false, []harness.Sample{at(0, 0.5, "far", "far")}), // round 1 missing
		Aggregate("stream", "auto", false, []harness.Sample{at(0, 0.5, "far", "near"), at(1, 0.5, "near", "near")}),
	}
	CompareAuto(results)
	c := ratios(t, results[2])
	wantNone(t, c["far"])
	wantNone(t, c["near"])
	var b bytes.Buffer
	if err := WriteTable(&b, results); err != nil {
		t.Fatal(err)
	}
	want := "auto ÷ best single backend: no round in which auto and every backend kept one placement\n"
	if !strings.Contains(b.String(), want) {
		t.Errorf("table lacks\n%s\ngot\n%s", want, b.String())
	}
}

func TestCompareAutoBestAndTies(t *testing.T) {
	results := []Result{
		Aggregate("bidir", "shm", false, []harness.Sample{at(0, 0.25, "far", "far"), at(1, 0.5, "far", "far"), at(2, 0.5, "near", "near")}),
		Aggregate("bidir", "vmsplice", false, []harness.Sample{at(0, 0.5, "far", "far"), at(1, 0.5, "far", "far"), at(2, 0.5, "near", "near")}),
		Aggregate("bidir", "auto", false, []harness.Sample{at(0, 0.25, "far", "far"), at(1, 0.25, "far", "far"), at(2, 0.125, "near", "near")}),
	}
	CompareAuto(results)
	c := ratios(t, results[2])
	// round 0: auto ties shm (1); round 1: shm and vmsplice tie, auto 2×.
	wantRatio(t, c["far"], 2, 1.5)
	wantRatio(t, c["near"], 1, 4)
	var b bytes.Buffer
	if err := WriteTable(&b, results); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"auto ÷ best single backend of shm, vmsplice (median over rounds in one placement",
		"1M    1.50 (2 rounds)  4.00 (1 round)\n",
		// The table's lower medians tie auto with shm: the first row keeps it.
		"best backend per size: 1M shm\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}

func TestCompareAutoNeedsAPeerAndAProbe(t *testing.T) {
	alone := []Result{Aggregate("pingpong", "auto", false, []harness.Sample{at(0, 0.5, "far", "far")}),
		Aggregate("pingpong", "memcpy", true, []harness.Sample{at(0, 0.5, "far", "far")})}
	CompareAuto(alone)
	if alone[0].AutoVsBest != nil {
		t.Errorf("auto beside only the reference got a comparison: %+v", alone[0].AutoVsBest)
	}
	unknown := []Result{Aggregate("pingpong", "auto", false, []harness.Sample{at(0, 0.5, "unknown", "unknown")}),
		Aggregate("pingpong", "shm", false, []harness.Sample{at(0, 0.5, "unknown", "unknown")})}
	CompareAuto(unknown)
	var b bytes.Buffer
	if err := WriteTable(&b, unknown); err != nil {
		t.Fatal(err)
	}
	if want := "auto ÷ best single backend: not computed — no placement probe"; !strings.Contains(b.String(), want) {
		t.Errorf("table lacks %q:\n%s", want, b.String())
	}
}

// TestBestComparesOneClass: a near row is faster, but far rows are compared
// (far being preferred, as in Aggregate) and the near one is named apart.
func TestBestComparesOneClass(t *testing.T) {
	results := []Result{
		Aggregate("pingpong", "shm", false, []harness.Sample{at(0, 0.125, "near", "near")}),
		Aggregate("pingpong", "pipe", false, []harness.Sample{at(0, 1, "far", "far")}),
		Aggregate("pingpong", "cma", false, []harness.Sample{at(0, 0.5, "far", "far")}),
		Aggregate("pingpong", "vmsplice", false, []harness.Sample{at(0, 0.01, "far", "near")}),
	}
	var b bytes.Buffer
	if err := WriteTable(&b, results); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if want := "best backend per size: 1M cma (far; 2 rows apart)\n"; !strings.Contains(out, want) {
		t.Errorf("table lacks %q:\n%s", want, out)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "1M ") && strings.Contains(line, "◀ best") != strings.Contains(line, " cma ") {
			t.Errorf("best marks only cma; line %q", line)
		}
	}
	mixed := []Result{Aggregate("pingpong", "shm", false, []harness.Sample{at(0, 0.125, "near", "far")})}
	b.Reset()
	if err := WriteTable(&b, mixed); err != nil {
		t.Fatal(err)
	}
	if want := "best backend per size: 1M none (placement moved)\n"; !strings.Contains(b.String(), want) {
		t.Errorf("table lacks %q:\n%s", want, b.String())
	}
}

// TestCompareEachSelector: auto and table are each compared with the
// single backends, never with each other, and the table prints a block
// for each.
func TestCompareEachSelector(t *testing.T) {
	results := []Result{
		Aggregate("pingpong", "shm", false, []harness.Sample{at(0, 0.5, "far", "far")}),
		Aggregate("pingpong", "auto", false, []harness.Sample{at(0, 0.5, "far", "far")}),
		Aggregate("pingpong", "table", false, []harness.Sample{at(0, 0.25, "far", "far")}),
	}
	CompareAuto(results)
	for _, r := range results[1:] {
		if got := strings.Join(r.AutoVsBest.Backends, ","); got != "shm" {
			t.Errorf("%s compared with %q, want shm alone", r.Backend, got)
		}
	}
	wantRatio(t, ratios(t, results[1])["far"], 1, 1)
	wantRatio(t, ratios(t, results[2])["far"], 1, 2)
	var out bytes.Buffer
	if err := WriteTable(&out, results); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"auto ÷ best single backend of shm", "table ÷ best single backend of shm"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}

// TestCompareOneRegime: a run whose readings showed one regime files every
// sample in machine.All; auto is compared in that one class, and the table
// shows one short column and a short best line.
func TestCompareOneRegime(t *testing.T) {
	all := machine.All
	results := []Result{
		Aggregate("pingpong", "shm", false, []harness.Sample{at(0, 0.5, all, all), at(1, 0.5, all, all)}),
		Aggregate("pingpong", "cma", false, []harness.Sample{at(0, 0.25, all, all), at(1, 0.25, all, all)}),
		Aggregate("pingpong", "auto", false, []harness.Sample{at(0, 0.5, all, all), at(1, 0.25, all, all)}),
	}
	CompareAuto(results)
	if bc := results[2].AutoVsBest.ByClass; len(bc) != 1 || bc[0].Placement != all || bc[0].Rounds != 2 || bc[0].Ratio == nil || *bc[0].Ratio != 0.75 {
		t.Fatalf("ByClass %+v, want one class %q over 2 rounds, ratio 0.75 (median of 0.5 and 1)", bc, all)
	}
	var b bytes.Buffer
	if err := WriteTable(&b, results); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"best backend per size: 1M cma\n", "size  all\n1M    0.75 (2 rounds)\n"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}
