package harness

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
)

// recordLink carries whole records, as a tag of a nemesis endpoint does
// for Pair: one Write is one message, one Read takes one.
type recordLink struct{ out, in chan []byte }

func (l recordLink) Write(p []byte) (int, error) {
	l.out <- append([]byte(nil), p...)
	return len(p), nil
}

func (l recordLink) Read(p []byte) (int, error) {
	m, ok := <-l.in
	if !ok {
		return 0, errors.New("link closed")
	}
	return copy(p, m), nil
}

// pairOverLinks runs Pair in two goroutines over record links.
func pairOverLinks(t *testing.T, spec Spec, corruptBy1 int) ([]Sample, error, error) {
	t.Helper()
	sent := new(atomic.Int64)
	a, b := make(chan []byte, 1024), make(chan []byte, 1024)
	c01, c10 := make(chan []byte, 16), make(chan []byte, 16)
	done1 := make(chan error, 1)
	go func() {
		done1 <- Pair(spec, &chanEngine{out: b, in: a, corrupt: corruptBy1, sent: sent}, recordLink{c10, c01}, recordLink{c10, c01}, 1, nil)
	}()
	var samples []Sample
	err0 := Pair(spec, &chanEngine{out: a, in: b, corrupt: -1, sent: sent}, recordLink{c01, c10}, recordLink{c01, c10}, 0,
		func(s Sample) error { samples = append(samples, s); return nil })
	if err0 != nil {
		close(c01) // unblocks rank 1's read of the next command
	}
	return samples, err0, <-done1
}

// TestPair: the shapes that run across nodes take the same samples over
// record links as over the parent's pipes, with no placement probe, and a
// corrupted message fails the check before anything is timed.
func TestPair(t *testing.T) {
	for _, mode := range []string{PingPong, NetPIPE, Bidir, Stream} {
		spec := Spec{Mode: mode, Backend: "auto", Sizes: []int{8, 65536}, Iters: 5, Samples: 2}
		samples, err0, err1 := pairOverLinks(t, spec, -1)
		if err0 != nil || err1 != nil {
			t.Fatalf("%s: rank errors %v, %v", mode, err0, err1)
		}
		if len(samples) != 4 {
			t.Fatalf("%s: %d samples, want 2 per size", mode, len(samples))
		}
		for i, s := range samples {
			if s.Size != spec.Sizes[i/2] || s.Iterations != 5 || s.Messages != 5*MessagesPerIteration(mode) || s.Seconds <= 0 {
				t.Errorf("%s sample %d: %+v", mode, i, s)
			}
			if s.Before.Class != "unknown" || s.After.Class != "unknown" {
				t.Errorf("%s sample %d: placement %v→%v; want unknown", mode, i, s.Before, s.After)
			}
		}
	}
	spec := Spec{Mode: PingPong, Backend: "auto", Sizes: []int{4096}, Iters: 5, Samples: 1}
	samples, err0, _ := pairOverLinks(t, spec, 100)
	if err0 == nil || !strings.Contains(err0.Error(), "byte 100") || len(samples) != 0 {
		t.Fatalf("byte 100 flipped by rank 1: rank 0 got %v and %d samples; want the check to name byte 100, no sample", err0, len(samples))
	}
	for _, bad := range []Spec{
		{Mode: Latency, Sizes: []int{8}, Iters: 1, Samples: 1},
		{Mode: PingPong, Sizes: []int{8}, Iters: 1, Samples: 1, Probe: "builtin"},
	} {
		if err := Pair(bad, nil, nil, nil, 0, nil); err == nil {
			t.Errorf("Pair(%+v) ran; want a refusal", bad)
		}
	}
}
