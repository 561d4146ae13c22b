package knemesis_test

import (
	"errors"
	"fmt"
	"hash/crc32"
	"testing"
	"unsafe"

	"github.com/knemesis/knemesis"
	"github.com/knemesis/knemesis/coll"
	"github.com/knemesis/knemesis/internal/jobtest"
	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/nemesis/launch/launchtest"
)

// celsius is a named type over a number: the constraint takes it by its
// underlying type.
type celsius float64

// TestTypedCalls: two ranks joined by knemesis.Join move slices of every
// fixed-size numeric type (and a named one) with the typed calls, empty,
// eager and by the LMT, each way and with Sendrecv; the receiver checks
// every message by its CRC and its element count, and the sender that the
// large one went by rendezvous.
func TestTypedCalls(t *testing.T) {
	launchtest.Run(t, 2, func(p launch.Proc) error {
		ep, err := knemesis.JoinProc(p, nil)
		if err != nil {
			return err
		}
		defer ep.Close()
		for seed, f := range []func(*knemesis.Endpoint, int) error{
			typedRound[int8], typedRound[int16], typedRound[int32], typedRound[int64], typedRound[int],
			typedRound[uint8], typedRound[uint16], typedRound[uint32], typedRound[uint64], typedRound[uint], typedRound[uintptr],
			typedRound[float32], typedRound[float64], typedRound[complex64], typedRound[complex128], typedRound[celsius],
		} {
			if err := f(ep, seed); err != nil {
				return err
			}
		}
		return nil
	})
}

// typedSizes are the element counts of typedRound for T: none, an eager
// message and one past the eager limit, by the LMT.
func typedSizes[T coll.Number]() []int {
	var zero T
	size := int(unsafe.Sizeof(zero))
	return []int{0, 1000 / size, (1<<20)/size + 3}
}

// typedRound sends messages of T from rank 0 to rank 1 with Isend and
// Recv, back with Send and Irecv, and both ways at once with Sendrecv.
func typedRound[T coll.Number](ep *knemesis.Endpoint, seed int) error {
	name := fmt.Sprintf("%T", *new(T))
	for _, n := range typedSizes[T]() {
		out, in := make([]T, n), make([]T, n)
		sum := fill(out, seed)
		var r knemesis.Request
		switch ep.Rank() {
		case 0:
			if err := knemesis.Isend(ep, &r, 1, seed, out); err != nil {
				return err
			}
			if err := ep.Wait(&r); err != nil {
				return fmt.Errorf("%s Isend of %d: %w", name, n, err)
			}
			if big := n*int(unsafe.Sizeof(out[0])) > 1<<20; big != r.ViaLMT() {
				return fmt.Errorf("%s Isend of %d elements: by the LMT %v, want %v", name, n, r.ViaLMT(), big)
			}
			if err := knemesis.Irecv(ep, &r, 1, seed, in); err != nil {
				return err
			}
			if err := ep.Wait(&r); err != nil {
				return fmt.Errorf("%s Irecv of %d: %w", name, n, err)
			}
			if err := check(name+" Irecv", r.Status(), in, sum); err != nil {
				return err
			}
		case 1:
			st, err := knemesis.Recv(ep, 0, seed, in)
			if err != nil {
				return fmt.Errorf("%s Recv of %d: %w", name, n, err)
			}
			if err := check(name+" Recv", st, in, sum); err != nil {
				return err
			}
			if err := knemesis.Send(ep, 0, seed, out); err != nil {
				return fmt.Errorf("%s Send of %d: %w", name, n, err)
			}
		}
		clear(in)
		peer := 1 - ep.Rank()
		st, err := knemesis.Sendrecv(ep, peer, seed, out, peer, seed, in)
		if err != nil {
			return fmt.Errorf("%s Sendrecv of %d: %w", name, n, err)
		}
		if err := check(name+" Sendrecv", st, in, sum); err != nil {
			return err
		}
	}
	return nil
}

// fill writes a pattern of seed into s's bytes and returns their CRC.
func fill[T coll.Number](s []T, seed int) uint32 {
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(*new(T))))
	for i := range b {
		b[i] = byte(i*7 + seed)
	}
	return crc32.ChecksumIEEE(b)
}

// check compares a received slice with the CRC of what was sent.
func check[T coll.Number](what string, st knemesis.Status, got []T, want uint32) error {
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(got))), len(got)*int(unsafe.Sizeof(*new(T))))
	if n := knemesis.Count[T](st); n != len(got) || crc32.ChecksumIEEE(b) != want {
		return fmt.Errorf("%s: %d elements of %d with CRC %08x, want %08x", what, n, len(got), crc32.ChecksumIEEE(b), want)
	}
	return nil
}

// TestTypedMatchedProbe: a message of float64 large enough for the LMT,
// taken by Mprobe (its RTS out of matching) and received by Mrecv, arrives
// whole, while a wildcard receive posted in between gets the next one; a
// message received as int16 that is not a whole number of int64 has
// Count -1 and is truncated with nemesis.ErrTruncated into a short buffer.
func TestTypedMatchedProbe(t *testing.T) {
	launchtest.Run(t, 2, func(p launch.Proc) error {
		ep, err := knemesis.JoinProc(p, nil)
		if err != nil {
			return err
		}
		defer ep.Close()
		grad := make([]float64, 1<<18) // 2 MiB
		sum := fill(grad, 3)
		if p.Rank == 0 {
			// The large send completes once rank 1 receives it, after
			// the two that follow it: it must not block them.
			var r knemesis.Request
			if err := knemesis.Isend(ep, &r, 1, 5, grad); err != nil {
				return err
			}
			if err := knemesis.Send(ep, 1, 5, []int32{42}); err != nil {
				return err
			}
			if err := knemesis.Send(ep, 1, 6, []int16{1, 2, 3}); err != nil {
				return err
			}
			return ep.Wait(&r)
		}
		m, err := ep.Mprobe(0, 5)
		if err != nil {
			return err
		}
		if st := m.Status(); st.Len != 8*len(grad) {
			return fmt.Errorf("Mprobe: %+v, want the 2 MiB message", st)
		}
		one := make([]int32, 1)
		if st, err := knemesis.Recv(ep, knemesis.AnySource, knemesis.AnyTag, one); err != nil || one[0] != 42 || st.Tag != 5 {
			return fmt.Errorf("wildcard Recv after Mprobe: %v, %+v, %v; want 42", one, st, err)
		}
		got := make([]float64, len(grad))
		st, err := knemesis.Mrecv(ep, &m, got)
		if err != nil {
			return err
		}
		if err := check("Mrecv", st, got, sum); err != nil {
			return err
		}
		odd := make([]int64, 0)
		st, err = knemesis.Recv(ep, 0, 6, odd)
		if !errors.Is(err, nemesis.ErrTruncated) || st.Len != 6 || knemesis.Count[int16](nemesis.Status{Count: st.Len}) != 3 || knemesis.Count[int64](nemesis.Status{Count: st.Len}) != -1 {
			return fmt.Errorf("6 bytes into no int64: %+v, %v", st, err)
		}
		return nil
	})
}

// TestTypedNoAllocation: a typed message allocates what the same []byte
// message does, eager and by the LMT: none in steady state for the eager
// one, and the LMT path's own for the large one.
func TestTypedNoAllocation(t *testing.T) {
	eps := jobtest.InProcess(t, 2, func(job string, rank int) (*knemesis.Endpoint, error) {
		return knemesis.Join(job, rank, 2, nil)
	}, func(ep *knemesis.Endpoint) {
		if ep != nil {
			ep.Close()
		}
	})
	for _, n := range []int{64, 2 << 20} {
		f, g := make([]float64, n/8), make([]float64, n/8)
		b, c := make([]byte, n), make([]byte, n)
		var s, r knemesis.Request // outside: the endpoint keeps pointers to them
		typed := testing.AllocsPerRun(50, func() {
			roundTrip(t, eps, &s, &r, func(s, r *knemesis.Request) error {
				return errors.Join(knemesis.Irecv(eps[1], r, 0, 1, g), knemesis.Isend(eps[0], s, 1, 1, f))
			})
		})
		raw := testing.AllocsPerRun(50, func() {
			roundTrip(t, eps, &s, &r, func(s, r *knemesis.Request) error {
				return errors.Join(eps[1].Irecv(r, 0, 1, c), eps[0].Isend(s, 1, 1, b))
			})
		})
		t.Logf("%d bytes: %v allocations per typed message, %v per []byte one", n, typed, raw)
		if typed > raw || n == 64 && typed != 0 {
			t.Errorf("%d bytes: %v allocations per typed message, %v per []byte one", n, typed, raw)
		}
	}
}

// roundTrip starts a receive and a send with start and drives both
// endpoints from this goroutine until both are complete.
func roundTrip(t *testing.T, eps []*knemesis.Endpoint, s, r *knemesis.Request, start func(s, r *knemesis.Request) error) {
	if err := start(s, r); err != nil {
		t.Fatal(err)
	}
	for !s.Done() || !r.Done() {
		if _, err := eps[1].Test(r); err != nil {
			t.Fatal(err)
		}
		if _, err := eps[0].Test(s); err != nil {
			t.Fatal(err)
		}
	}
}
