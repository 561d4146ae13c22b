package coll_test

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/knemesis/knemesis"
	"github.com/knemesis/knemesis/coll"
	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/nemesis/launch/launchtest"
)

// namesRank reports whether err says that job rank w is where the
// collective failed.
func namesRank(err error, w int) bool {
	var e *coll.Error
	return errors.As(err, &e) && e.Origin == w
}

// TestRankDiesMidCollective: rank 2 of 5 starts a 1 MiB Allreduce (its
// reduce-scatter sends posted) and dies; every other rank's Allreduce
// fails with an error naming rank 2, and the communicator refuses the
// next collective, instead of hanging.
func TestRankDiesMidCollective(t *testing.T) {
	const victim = 2
	launchtest.RunOpts(t, 5, launchtest.Options{Timeout: 3 * time.Minute, ExitEarly: []int{victim}}, func(p launch.Proc) error {
		ep, err := knemesis.JoinProc(p, nil)
		if err != nil {
			return err
		}
		defer ep.Close()
		world := coll.World(ep.Endpoint)
		x := make([]float64, 128<<10)
		for i := range x {
			x[i] = float64(p.Rank + i)
		}
		got := make([]float64, len(x))
		if err := coll.Allreduce(world, x, got, coll.Sum[float64]()); err != nil {
			return err
		}
		if p.Rank == victim {
			if _, err := coll.Iallreduce(world, x, got, coll.Sum[float64]()); err != nil {
				return err
			}
			os.Exit(0) // without closing: a crash
		}
		err = coll.Allreduce(world, x, got, coll.Sum[float64]())
		if err == nil {
			return fmt.Errorf("the Allreduce that rank %d died in succeeded", victim)
		}
		if !namesRank(err, victim) {
			return fmt.Errorf("the error does not name rank %d: %w", victim, err)
		}
		if err := coll.Barrier(world); !errors.Is(err, coll.ErrBroken) {
			return fmt.Errorf("a Barrier after the failure: %v, want ErrBroken", err)
		}
		return nil
	})
}

// TestMismatch: ranks that call a collective with another count, element
// type, reduction or operation, or with a bad argument, get a clear error,
// and the others one naming where it began; nobody hangs.
func TestMismatch(t *testing.T) {
	launchtest.RunOpts(t, 3, launchtest.Options{Timeout: 3 * time.Minute}, func(p launch.Proc) error {
		ep, err := nemesis.JoinProc(p, nil)
		if err != nil {
			return err
		}
		defer ep.Close()
		world := coll.World(ep)
		comms := make([]*coll.Comm, 5)
		for i := range comms {
			if comms[i], err = world.Dup(); err != nil {
				return err
			}
		}
		r := p.Rank
		cases := []struct {
			name  string
			run   func(c *coll.Comm) error
			field string // what the MismatchError names
		}{
			{"count", func(c *coll.Comm) error {
				k := 4
				if r == 1 {
					k = 5
				}
				return coll.Allreduce(c, make([]int64, k), make([]int64, k), coll.Sum[int64]())
			}, "payload bytes"},
			{"element type", func(c *coll.Comm) error {
				if r == 0 {
					return coll.Allreduce(c, make([]float64, 4), make([]float64, 4), coll.Sum[float64]())
				}
				return coll.Allreduce(c, make([]int64, 4), make([]int64, 4), coll.Sum[int64]())
			}, "element type"},
			{"reduction", func(c *coll.Comm) error {
				op := coll.Sum[int64]()
				if r == 2 {
					op = coll.Max[int64]()
				}
				return coll.Allreduce(c, make([]int64, 4), make([]int64, 4), op)
			}, "reduction"},
			{"operation", func(c *coll.Comm) error {
				if r == 1 {
					return coll.Allgather(c, make([]int64, 4), make([]int64, 12))
				}
				return coll.Allreduce(c, make([]int64, 4), make([]int64, 4), coll.Sum[int64]())
			}, "operation"},
			{"bad argument", func(c *coll.Comm) error {
				n := 4
				if r == 1 {
					n = 3 // recv shorter than send: refused at once
				}
				return coll.Allreduce(c, make([]int64, 4), make([]int64, n), coll.Sum[int64]())
			}, ""},
		}
		for i, tc := range cases {
			err := tc.run(comms[i])
			var me *coll.MismatchError
			var ae *coll.AbortError
			switch {
			case err == nil:
				return fmt.Errorf("%s: no error", tc.name)
			case tc.field == "" && r == 1:
				if !errors.Is(err, coll.ErrInvalidArg) {
					return fmt.Errorf("%s: %v, want ErrInvalidArg", tc.name, err)
				}
			case tc.field == "":
				if !errors.As(err, &ae) || ae.Origin != 1 {
					return fmt.Errorf("%s: %v, want an AbortError from rank 1", tc.name, err)
				}
			case errors.As(err, &me):
				if me.Field != tc.field {
					return fmt.Errorf("%s: the mismatch names %q: %v", tc.name, me.Field, err)
				}
			case errors.As(err, &ae):
				if !slices.Contains([]string{"a disagreement between ranks (count, type, operation or argument)"}, ae.Cause) {
					return fmt.Errorf("%s: %v", tc.name, err)
				}
			default:
				return fmt.Errorf("%s: %v, want a MismatchError or an AbortError", tc.name, err)
			}
			t.Logf("rank %d, %s: %v", r, tc.name, err)
		}
		return coll.Barrier(world)
	})
}

// TestLibraryTrafficApart: an application receive with both wildcards,
// posted before collectives run, takes the application's message and no
// collective's, and the collectives' results are right.
func TestLibraryTrafficApart(t *testing.T) {
	launchtest.Run(t, 3, func(p launch.Proc) error {
		ep, err := nemesis.JoinProc(p, nil)
		if err != nil {
			return err
		}
		defer ep.Close()
		world := coll.World(ep)
		var r nemesis.Request
		got := make([]byte, 16)
		if p.Rank == 0 {
			if err := ep.Irecv(&r, nemesis.AnySource, nemesis.AnyTag, got); err != nil {
				return err
			}
		}
		for k := range 3 {
			x := []int64{int64(p.Rank + k)}
			sum := make([]int64, 1)
			if err := coll.Allreduce(world, x, sum, coll.Sum[int64]()); err != nil {
				return err
			}
			if want := int64(3 + 3*k); sum[0] != want {
				return fmt.Errorf("Allreduce %d: %d, want %d", k, sum[0], want)
			}
			if err := coll.Bcast(world, x, 1); err != nil {
				return err
			}
			if x[0] != int64(1+k) {
				return fmt.Errorf("Bcast %d: %d, want %d", k, x[0], 1+k)
			}
		}
		if p.Rank == 0 && r.Done() {
			return fmt.Errorf("the wildcard receive completed before the application sent anything: %+v", r.Status())
		}
		// Rank 2 sends only once rank 0 has looked: rank 2 can leave the
		// last Bcast while rank 0, still in it, polls, and that poll
		// would rightly match the application's message. No rank leaves
		// this Barrier before rank 0 has entered it, after its check; a
		// collective message the receive took during the Barrier would
		// show in its status below.
		if err := coll.Barrier(world); err != nil {
			return err
		}
		if p.Rank == 2 {
			if err := ep.Send(0, 9, []byte("application")); err != nil {
				return err
			}
		}
		if p.Rank == 0 {
			if err := ep.Wait(&r); err != nil {
				return err
			}
			if st := r.Status(); st.Source != 2 || st.Tag != 9 || string(got[:st.Count]) != "application" {
				return fmt.Errorf("the wildcard receive got %+v %q", st, got[:st.Count])
			}
		}
		return coll.Barrier(world)
	})
}
