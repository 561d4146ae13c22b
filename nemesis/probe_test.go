package nemesis

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/nemesis/launch/launchtest"
)

// TestLineLatency: three ranks probe each pair in turn, twice, and get a
// positive one-way time no longer than the call that measured it took (a
// bound by order, not by speed: 3 ranks on 2 CPUs are preempted at will);
// a rank whose peer never takes part gets
// ErrProbeTimeout naming it, and a later probe of the same pair still
// matches its partner's.
func TestLineLatency(t *testing.T) {
	launchtest.Run(t, 3, func(p launch.Proc) error {
		ep, err := JoinProc(p, nil)
		if err != nil {
			return err
		}
		defer ep.Close()
		for pass := range 2 {
			for peer := range 3 {
				if peer == p.Rank {
					continue
				}
				if err := probePair(ep, peer); err != nil {
					return fmt.Errorf("pass %d: %w", pass, err)
				}
			}
		}
		// Rank 2 skips this probe with rank 0, whose call must time out;
		// rank 1's probe with rank 0 then works.
		switch p.Rank {
		case 0:
			_, err := ep.LineLatency(2, 64, 50*time.Millisecond)
			if !errors.Is(err, ErrProbeTimeout) {
				return fmt.Errorf("probe of an absent rank 2: %v, want ErrProbeTimeout", err)
			}
			if err := probePair(ep, 1); err != nil {
				return fmt.Errorf("after the timeout: %w", err)
			}
		case 1:
			if err := probePair(ep, 0); err != nil {
				return fmt.Errorf("after rank 0's timeout: %w", err)
			}
		}
		return barrier(ep)
	})
}

// probePair probes peer. Each rank taking its peers in ascending order,
// the pairs meet in the order 0-1, 0-2, 1-2 without waiting on a cycle.
func probePair(ep *Endpoint, peer int) error {
	start := time.Now()
	d, err := ep.LineLatency(peer, 256, 10*time.Second)
	call := time.Since(start)
	if err != nil {
		return fmt.Errorf("probe with rank %d: %w", peer, err)
	}
	if d <= 0 || d > call {
		return fmt.Errorf("probe with rank %d: %v one way, in a call of %v", peer, d, call)
	}
	return nil
}

func TestLineLatencyBadArguments(t *testing.T) {
	ep := joinLocal(t, 2, nil)[0]
	for _, c := range []struct {
		peer, rounds int
		timeout      time.Duration
		want         error
	}{
		{0, 64, time.Second, ErrInvalidRank},
		{5, 64, time.Second, ErrInvalidRank},
		{1, 15, time.Second, ErrInvalidArg},
		{1, 64, 0, ErrInvalidArg},
	} {
		if _, err := ep.LineLatency(c.peer, c.rounds, c.timeout); !errors.Is(err, c.want) {
			t.Errorf("LineLatency(%d, %d, %v) = %v, want %v", c.peer, c.rounds, c.timeout, err, c.want)
		}
	}
}
