package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/knemesis/knemesis/internal/lineprobe"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/engine"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/machine"
)

// The built-in placement probe (Spec.Probe == machine.Builtin) times a
// cache line between ranks 0 and 1 themselves, on the last page of the
// job's shared memory, beyond what the backend asked for. It needs no
// program of its own, and it measures the two processes the sample ran
// in rather than two others the scheduler may place elsewhere: rank 0
// tells rank 1 (cmdProbe) and both take part, as auto's Attach does
// between the ranks of a job.

const (
	pageSize = 4096
	// lineRounds round trips take well under a millisecond, even between
	// two cores: short beside a sample, long enough for a steady median.
	lineRounds = 2048
)

// lineWords is the probe page: each rank's word on a block of its own
// (128 bytes: the adjacent-line prefetcher pairs lines).
type lineWords struct {
	rank [2]struct {
		word atomic.Uint64
		_    [120]byte
	}
}

// probePage is where the probe page starts in the job's shared memory: after
// the backend's bytes, rounded up to a page.
func probePage(spec Spec) int {
	if spec.Mode == Placement {
		return 0
	}
	b, err := engine.Lookup(spec.Backend)
	if err != nil {
		return 0
	}
	n := b.SharedBytes(slices.Max(spec.Sizes))
	return (n + pageSize - 1) / pageSize * pageSize
}

// sharedBytes is how much shared memory a job of spec gets.
func sharedBytes(spec Spec) int {
	if spec.Probe != machine.Builtin {
		return probePage(spec)
	}
	return probePage(spec) + pageSize
}

// lineProbe is one rank's side of the built-in probe.
type lineProbe struct {
	mem   []byte
	words *lineWords
	me    int
	calls uint16
}

// openLineProbe maps the probe page for rank me, or returns nil when spec
// uses another probe or me is neither rank 0 nor 1.
func openLineProbe(spec Spec, me int) (*lineProbe, error) {
	if spec.Probe != machine.Builtin || me > 1 {
		return nil, nil
	}
	mem, err := unix.Mmap(fdShared, int64(probePage(spec)), pageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mapping the placement probe's page: %w", err)
	}
	return &lineProbe{mem: mem, words: (*lineWords)(unsafe.Pointer(&mem[0])), me: me}, nil
}

// measure is one probe; rank 0 must have told rank 1 to take part. A peer
// that stops answering for machine.ProbeTimeout gives Unknown, as an
// overdue external probe does; one that answers slowly (other processes
// hold the CPUs) is waited for, and its reading says so by its latency.
func (p *lineProbe) measure() machine.Placement {
	p.calls++
	d, _, ok := lineprobe.Run{
		Mine:   &p.words.rank[p.me].word,
		Theirs: &p.words.rank[1-p.me].word,
		Call:   p.calls,
		Me:     uint16(p.me),
		Peer:   uint16(1 - p.me),
		Lead:   p.me == 0,
		Rounds: lineRounds,
		Stall:  machine.ProbeTimeout,
	}.Measure()
	if !ok {
		return machine.Unknown
	}
	return machine.LinePlacement(d)
}

func (p *lineProbe) close() {
	if p != nil {
		_ = unix.Munmap(p.mem)
	}
}

// placer takes the placement readings around rank 0's samples, with the
// external probe or the built-in one.
type placer struct {
	path string
	line *lineProbe
	tell func(cmd, size, iters int64) error
}

func (p placer) measure() (machine.Placement, error) {
	if p.line == nil {
		return machine.Probe(p.path), nil
	}
	if err := p.tell(cmdProbe, 0, 0); err != nil {
		return machine.Unknown, err
	}
	return p.line.measure(), nil
}

// placementWorker is a job of Mode Placement: one reading of the built-in
// probe, written by rank 0 as the Before of an empty sample.
func placementWorker(spec Spec, me int, out io.Writer) error {
	line, err := openLineProbe(spec, me)
	if err != nil {
		return err
	}
	defer line.close()
	if line == nil {
		return fmt.Errorf("placement job without the built-in probe (probe %q, rank %d)", spec.Probe, me)
	}
	p := line.measure()
	if me != 0 {
		return nil
	}
	return json.NewEncoder(out).Encode(Sample{Before: p, After: p})
}

// ProbePlacement reads the placement of two fresh processes with the
// built-in probe (lmtbench info, where no sample runs).
func ProbePlacement(ctx context.Context) machine.Placement {
	got := machine.Unknown
	spec := Spec{Mode: Placement, Probe: machine.Builtin, Samples: 1}
	if err := Run(ctx, spec, 2*machine.ProbeTimeout+5*time.Second, func(s Sample) { got = s.Before }); err != nil {
		return machine.Unknown
	}
	return got
}
