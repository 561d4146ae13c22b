//go:build !race

// The hostile rank's flipper writes its own fastboxes and line records
// from a second goroutine while its endpoint writes them too: a race in
// that process, on purpose, which the race detector would report.

package nemesis

import (
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/nemesis/launch/launchtest"
	"github.com/knemesis/knemesis/peerfault"
)

const (
	hostileRank, victimRank, honestRank = 1, 0, 2
	hostileRounds                       = 3000 // sends of the hostile rank
	// honestRounds of them come first: their headers are rewritten only
	// with values a correct rank writes, or with an adversarial value
	// put back at once, a pulse that only a second read would see.
	honestRounds = hostileRounds / 2
	honestMsgs   = 300
)

// TestHostileRank: rank 1 writes random and adversarial values into every
// field it may write for rank 0 (its fastboxes' and line records' headers,
// while they are being read, and the headers of the cells it hands over)
// for a fixed number of sends, then one cell no correct rank writes. Rank
// 0's receives from it complete with a message or a *peerfault.Error naming
// rank 1 and the field; it never panics, its endpoint never fails, and the
// messages of rank 2, which shares no structure with rank 1 but rank 0's
// receive queue, all arrive intact.
func TestHostileRank(t *testing.T) {
	launchtest.Run(t, 3, func(p launch.Proc) error {
		ep, err := JoinProc(p, &Options{CellSize: 1024, Cells: 16})
		if err != nil {
			return err
		}
		defer ep.Close()
		switch p.Rank {
		case hostileRank:
			return hostile(ep)
		case honestRank:
			for i := range honestMsgs {
				if err := ep.Send(victimRank, 0, honestMsg(i)); err != nil {
					return fmt.Errorf("honest send %d: %w", i, err)
				}
			}
			_, err := ep.Recv(victimRank, 1, nil)
			return err
		}
		return victim(ep)
	})
}

func honestMsg(i int) []byte { return pattern([]int{8, 100, 900, 4000, 30}[i%5], i) }

// victim receives from both ranks until rank 1 is failed and every
// message of rank 2 came.
func victim(ep *Endpoint) error {
	buf1, buf2 := make([]byte, 64<<10), make([]byte, 64<<10)
	var r1, r2 Request
	if err := ep.Irecv(&r1, hostileRank, AnyTag, buf1); err != nil {
		return err
	}
	if err := ep.Irecv(&r2, honestRank, 0, buf2); err != nil {
		return err
	}
	var blamed *peerfault.Error
	fromHostile, fromHonest := 0, 0
	for blamed == nil || fromHonest < honestMsgs {
		if err := ep.Poll(); err != nil {
			return fmt.Errorf("Poll failed the endpoint: %w", err)
		}
		if blamed == nil && r1.Done() {
			err := ep.Wait(&r1)
			switch {
			case errors.As(err, &blamed):
				if blamed.Rank != hostileRank || blamed.Field == "" || !errors.Is(err, ErrCorrupt) {
					return fmt.Errorf("receive from the hostile rank: %v, want rank %d's corrupt field", err, hostileRank)
				}
			case err == nil, errors.Is(err, ErrTruncated), errors.Is(err, ErrNoLMT):
				fromHostile++
				if err := ep.Irecv(&r1, hostileRank, AnyTag, buf1); err != nil {
					return err
				}
			default:
				return fmt.Errorf("receive %d from the hostile rank: %v", fromHostile, err)
			}
		}
		if fromHonest < honestMsgs && r2.Done() {
			if err := ep.Wait(&r2); err != nil {
				return fmt.Errorf("honest message %d: %w", fromHonest, err)
			}
			want := honestMsg(fromHonest)
			if got := buf2[:r2.Status().Count]; crc32.ChecksumIEEE(got) != crc32.ChecksumIEEE(want) || len(got) != len(want) {
				return fmt.Errorf("honest message %d: %d bytes, crc %08x; want %d, %08x", fromHonest, len(got), crc32.ChecksumIEEE(got), len(want), crc32.ChecksumIEEE(want))
			}
			fromHonest++
			if fromHonest < honestMsgs {
				if err := ep.Irecv(&r2, honestRank, 0, buf2); err != nil {
					return err
				}
			}
		}
	}
	if _, err := ep.Recv(hostileRank, AnyTag, buf1); !errors.Is(err, ErrCorrupt) {
		return fmt.Errorf("a receive from the failed rank: %v, want its error at once", err)
	}
	return ep.Send(honestRank, 1, nil)
}

// hostile sends hostileRounds messages to the victim, while a flipper
// rewrites the headers of its fastboxes and line records, some rounds
// through cells whose header it writes itself; then a cell of a kind no
// rank sends. It waits for the victim to close.
func hostile(ep *Endpoint) error {
	rng := rand.New(rand.NewPCG(47, 1))
	var stop atomic.Bool
	var round atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		flip(ep, rand.New(rand.NewPCG(47, 2)), &stop, &round)
	}()
	v := &ep.peers[victimRank]
	for i := range hostileRounds {
		round.Store(int64(i))
		if rng.IntN(8) == 0 {
			kind := uint32(kindMsg)
			if i >= honestRounds {
				kind = adversarialKind(rng)
			}
			if !rawCell(ep, v, kind, i >= honestRounds, rng) {
				break
			}
			continue
		}
		var r Request
		if err := ep.Isend(&r, victimRank, i%MaxTag, pattern(rng.IntN(3000), i)); err != nil {
			break // the victim's endpoint refuses nothing: a failed send is this rank's own doing
		}
		if !waitOrClosed(ep, &r) {
			break
		}
	}
	stop.Store(true)
	<-done
	rawCell(ep, v, 77, true, rng)
	for ep.seg.proc(victimRank).closed.Load() == 0 {
		ep.Poll()
		runtime.Gosched()
	}
	return nil
}

// waitOrClosed polls until r is done, or the victim closed: it no longer
// takes what this rank sends.
func waitOrClosed(ep *Endpoint, r *Request) bool {
	for !r.Done() {
		if ep.Poll() != nil || ep.seg.proc(victimRank).closed.Load() != 0 {
			return false
		}
		runtime.Gosched()
	}
	return true
}

// rawCell hands the victim one of this rank's cells with a header of its
// own making: a message as a correct rank sends it, or, when bad, any
// owner, source, sequence number, length and total.
func rawCell(ep *Endpoint, v *peer, kind uint32, bad bool, rng *rand.Rand) bool {
	var off uint64
	var c *cellHdr
	for off == 0 {
		var err error
		if off, c, err = ep.freeQ.dequeue(ep.seg); err != nil {
			return false
		}
		if off == 0 && (ep.Poll() != nil || ep.seg.proc(victimRank).closed.Load() != 0) {
			return false
		}
	}
	c.kind, c.owner, c.src = kind, uint32(hostileRank), uint32(hostileRank)
	c.seq, c.tag, c.len = v.sendSeq, int32(rng.IntN(MaxTag)), uint32(rng.IntN(ep.seg.payloadSize))
	c.total = uint64(c.len)
	if bad {
		c.total = adversarial(rng)
	}
	switch rng.IntN(6) {
	case 0:
		if bad {
			c.owner = rng.Uint32()
		}
	case 1:
		if bad {
			c.src = uint32(rng.IntN(4))
		}
	case 2:
		if bad {
			c.seq += uint32(rng.IntN(5))
		}
	case 3:
		if bad {
			c.len = uint32(adversarial(rng))
		}
	}
	if c.seq == v.sendSeq {
		v.sendSeq++
	}
	if err := v.recvQ.enqueue(ep.seg, off, c); err != nil {
		return false
	}
	v.wake()
	return true
}

// adversarial is a value at or past a bound, or any value.
func adversarial(rng *rand.Rand) uint64 {
	vals := []uint64{0, 1, linePayload, linePayload + 1, 1 << 20, 1 << 31, 1 << 32, 1 << 40, 1 << 62, math.MaxInt64, math.MaxUint64}
	if rng.IntN(2) == 0 {
		return rng.Uint64()
	}
	return vals[rng.IntN(len(vals))]
}

func adversarialKind(rng *rand.Rand) uint32 {
	kinds := []uint32{kindMsg, kindCont, kindRTS, kindControl, kindFboxSetup, kindAM, kindAgg, kindArena, 77}
	return kinds[rng.IntN(len(kinds))]
}

// flip rewrites, until stop, the header fields of this rank's fastboxes
// and line records to the victim, between the victim's look at a box and
// its use of what it read: during the first honestRounds sends with valid
// tags, and with adversarial lengths, totals, kinds and acknowledgments
// that it puts back at once; then with adversarial values that stay.
func flip(ep *Endpoint, rng *rand.Rand, stop *atomic.Bool, round *atomic.Int64) {
	v := &ep.peers[victimRank]
	word := func(p *uint32, val uint32, keep bool) {
		w := (*atomic.Uint32)(unsafe.Pointer(p))
		was := w.Swap(val)
		if !keep {
			w.CompareAndSwap(val, was)
		}
	}
	for n := 0; !stop.Load(); n++ {
		keep := round.Load() >= honestRounds && rng.IntN(256) == 0
		if fb := v.fbOut[rng.IntN(fboxSlots)]; fb != nil {
			switch rng.IntN(5) {
			case 0:
				word((*uint32)(unsafe.Pointer(&fb.tag)), uint32(rng.IntN(MaxTag)), true)
			case 1:
				w := (*atomic.Uint64)(unsafe.Pointer(&fb.total))
				bad := adversarial(rng)
				if was := w.Swap(bad); !keep {
					w.CompareAndSwap(bad, was)
				}
			case 2:
				word(&fb.len, uint32(adversarial(rng)), keep)
			case 3:
				word(&fb.kind, adversarialKind(rng), keep)
			case 4:
				word(&fb.ack, uint32(adversarial(rng)), keep)
			}
		}
		if r := v.lnOut; r != nil {
			f := r.fields(uint32(rng.IntN(lineSlots)))
			word((*uint32)(unsafe.Pointer(&f.tag)), uint32(rng.IntN(MaxTag)), true)
			word(&f.len, uint32(adversarial(rng)), keep)
		}
		if n%64 == 0 {
			runtime.Gosched()
		}
	}
}
