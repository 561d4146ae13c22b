package coll

import (
	"errors"
	"fmt"
	"testing"

	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/nemesis/launch/launchtest"
)

// messages counts what an endpoint sent through its queues and fastboxes.
func messages(ep *nemesis.Endpoint) uint64 {
	s := ep.Stats()
	return s.FastboxMsgs + s.QueueMsgs + s.RTS + s.ArenaSends
}

// TestShmNoQueueTraffic: on a communicator of one node, barriers and
// broadcasts and reductions of up to a slot go through the shared lines
// alone: the endpoint sends no message for them, and the results are
// right.
func TestShmNoQueueTraffic(t *testing.T) {
	launchtest.Run(t, 3, func(p launch.Proc) error {
		ep, err := nemesis.JoinProc(p, nil)
		if err != nil {
			return err
		}
		defer ep.Close()
		world := World(ep)
		if err := Barrier(world); err != nil { // sets the shared file up, by messages
			return err
		}
		if world.shm.state != shmOn {
			return fmt.Errorf("the world of one node has no shared file (state %d)", world.shm.state)
		}
		before := messages(ep)
		for k := range 50 {
			if err := Barrier(world); err != nil {
				return err
			}
			x := make([]float64, shmSlot/8)
			for i := range x {
				x[i] = float64(p.Rank*k + i)
			}
			sum := make([]float64, len(x))
			if err := Allreduce(world, x, sum, Sum[float64]()); err != nil {
				return err
			}
			for i := range sum {
				if want := float64(3*i + 3*k); sum[i] != want {
					return fmt.Errorf("Allreduce %d: element %d is %v, want %v", k, i, sum[i], want)
				}
			}
			root := k % 3
			b := []int32{int32(p.Rank + k)}
			if err := Bcast(world, b, root); err != nil {
				return err
			}
			if b[0] != int32(root+k) {
				return fmt.Errorf("Bcast %d from %d: %d, want %d", k, root, b[0], root+k)
			}
			m := []int64{int64(p.Rank * k)}
			if err := Reduce(world, m, m, Max[int64](), root); err != nil {
				return err
			}
			if p.Rank == root && m[0] != int64(2*k) {
				return fmt.Errorf("Reduce %d at %d: %d, want %d", k, root, m[0], 2*k)
			}
		}
		if sent := messages(ep) - before; sent != 0 {
			return fmt.Errorf("%d messages sent for collectives in shared memory, want 0", sent)
		}
		return Barrier(world)
	})
}

// TestShmHostileRank: a rank that writes an impossible epoch into its
// arrive line fails the hub's barrier with a PeerDataError naming it and
// the field, and the other ranks' with an AbortError naming it too.
func TestShmHostileRank(t *testing.T) {
	const hostile = 1
	launchtest.Run(t, 3, func(p launch.Proc) error {
		ep, err := nemesis.JoinProc(p, nil)
		if err != nil {
			return err
		}
		defer ep.Close()
		world := World(ep)
		if err := Barrier(world); err != nil {
			return err
		}
		if p.Rank == hostile {
			world.shmFlag(hostile, lineArrive).Store(1 << 60)
			_, err := ep.Recv(0, 5, nil) // until the others are done
			return err
		}
		err = Barrier(world)
		var de *PeerDataError
		var ae *AbortError
		switch {
		case err == nil:
			return errors.New("the barrier passed a rank that never arrived")
		case p.Rank == 0 && (!errors.As(err, &de) || de.Rank != hostile || de.Field != "arrive epoch" || de.Value != 1<<60):
			return fmt.Errorf("hub: %v, want a PeerDataError for rank %d's arrive epoch", err, hostile)
		case p.Rank != 0 && (!errors.As(err, &ae) || ae.Origin != hostile):
			return fmt.Errorf("rank %d: %v, want an AbortError naming rank %d", p.Rank, err, hostile)
		}
		t.Logf("rank %d: %v", p.Rank, err)
		if p.Rank == 0 {
			return ep.Send(hostile, 5, nil)
		}
		return nil
	})
}
