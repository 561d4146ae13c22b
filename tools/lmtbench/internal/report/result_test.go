package report

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/knemesis/knemesis/tools/lmtbench/internal/harness"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/machine"
)

func sample(secs float64, before, after string) harness.Sample {
	return harness.Sample{
		Size: 1 << 20, Iterations: 10, Messages: 20, Seconds: secs,
		CPUSeconds: [2]float64{secs / 2, secs / 4},
		Before:     machine.Placement{Class: before, LatencyUs: map[string]float64{"far": 0.28, "near": 0.06}[before]},
		After:      machine.Placement{Class: after},
	}
}

func TestAggregateKeepsAgreeingFarSamples(t *testing.T) {
	r := Aggregate("pingpong", "shm", false, []harness.Sample{
		sample(0.010, "near", "near"), // near: faster, but far wins when there is one
		sample(0.030, "far", "far"),
		sample(0.001, "far", "near"), // placement moved: dropped
		sample(0.020, "far", "far"),
		sample(0.040, "far", "far"),
	})
	if r.Placement != "far" || r.Samples != 5 || r.SamplesKept != 3 {
		t.Fatalf("placement %q kept %d/%d; want far 3/5", r.Placement, r.SamplesKept, r.Samples)
	}
	if r.Seconds != 0.030 || r.Iterations != 10 || r.Messages != 20 {
		t.Errorf("median sample %g s, %d iterations; want the 0.030 s one", r.Seconds, r.Iterations)
	}
	if want := 20.0 * (1 << 20) / 0.030; math.Abs(r.BytesPerSec-want) > 1e-9*want {
		t.Errorf("bytes_per_sec %g, want %g", r.BytesPerSec, want)
	}
	if want := 0.030 / 20 * 1e6; math.Abs(r.LatencyUs-want) > 1e-9*want {
		t.Errorf("latency_us %g, want %g", r.LatencyUs, want)
	}
	if want := (0.015 + 0.0075) / (20 * (1 << 20)); math.Abs(r.CPUSecondsPerByte-want) > 1e-9*want {
		t.Errorf("cpu_seconds_per_byte %g, want %g", r.CPUSecondsPerByte, want)
	}
	if r.PlacementLatencyUs != 0.28 {
		t.Errorf("placement latency %g, want 0.28", r.PlacementLatencyUs)
	}
	if got := len(r.KeptSamples()); got != 3 {
		t.Errorf("%d kept samples for benchfmt, want 3", got)
	}
}

func TestAggregateFallsBackToNearThenMixed(t *testing.T) {
	r := Aggregate("stream", "cma", false, []harness.Sample{sample(0.01, "near", "near"), sample(0.02, "far", "near")})
	if r.Placement != "near" || r.SamplesKept != 1 || r.Seconds != 0.01 {
		t.Errorf("got %s %d/%d %g s; want near 1/2 0.01 s", r.Placement, r.SamplesKept, r.Samples, r.Seconds)
	}
	r = Aggregate("stream", "cma", false, []harness.Sample{sample(0.01, "near", "far"), sample(0.03, "far", "near"), sample(0.02, "far", "near")})
	if r.Placement != "mixed" || r.SamplesKept != 3 || r.Seconds != 0.02 {
		t.Errorf("got %s %d/%d %g s; want mixed 3/3 with the median 0.02 s", r.Placement, r.SamplesKept, r.Samples, r.Seconds)
	}
	r = Aggregate("stream", "cma", false, []harness.Sample{sample(0.01, "unknown", "unknown")})
	if r.Placement != "unknown" || r.SamplesKept != 1 {
		t.Errorf("got %s %d/%d; want unknown 1/1", r.Placement, r.SamplesKept, r.Samples)
	}
}

func TestTableMarksFastestBackendNotReference(t *testing.T) {
	results := []Result{
		Aggregate("pingpong", "memcpy", true, []harness.Sample{sample(0.001, "far", "far")}),
		Aggregate("pingpong", "shm", false, []harness.Sample{sample(0.020, "far", "far")}),
		Aggregate("pingpong", "cma", false, []harness.Sample{sample(0.010, "far", "far")}),
	}
	var b bytes.Buffer
	if err := WriteTable(&b, results); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if !strings.Contains(out, "best backend per size: 1M cma\n") {
		t.Errorf("winner line missing or wrong:\n%s", out)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "◀ best") && !strings.Contains(line, " cma ") {
			t.Errorf("wrong row marked best: %q", line)
		}
	}
}
