package knemlmt_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/knemesis/knemesis/internal/knemtest"
	"github.com/knemesis/knemesis/kmod/knem/knemlmt"
	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/nemesis/launch"
)

// BenchmarkMultiRail moves messages of 1, 4 and 16 MiB, one after the
// other, from one Engine to another, each driven by a goroutine of its
// own, over each single rail (cma: the receiver's process_vm_readv; cma-
// write: the sender's process_vm_writev; knem: the module's copy) and
// over the split backends (multirail: the two CMA rails; multirail-knem:
// the three), after eight messages that let the split backends measure
// their rails. Each split row reports its speed over the best single
// rail's at that size, x-best-single (above 1: the other rails pay). In
// the QEMU guests the CPUs are emulated and run one at a time: compare
// only the ratios of one run.
//
//	make kmod-bench-multirail
func BenchmarkMultiRail(b *testing.B) {
	knemtest.Open(b).Close()
	singles := []string{lmt.CMA, lmt.CMAWrite, knemlmt.Name}
	for _, size := range []int{1 << 20, 4 << 20, 16 << 20} {
		speed := map[string]float64{}
		for _, backend := range append(singles, lmt.MultiRail, lmt.MultiRailKnem) {
			b.Run(fmt.Sprintf("%s/%dMiB", backend, size>>20), func(b *testing.B) {
				speed[backend] = benchPair(b, backend, size)
				best := 0.0
				for _, s := range singles {
					best = max(best, speed[s])
				}
				if backend == lmt.MultiRail || backend == lmt.MultiRailKnem {
					b.ReportMetric(speed[backend]/best, "x-best-single")
				}
			})
		}
	}
}

// chanControl carries an Engine's packets to its peer's goroutine.
type chanControl struct{ to chan []byte }

func (c chanControl) Send(_ int, pkt []byte) (bool, error) {
	c.to <- append([]byte(nil), pkt...)
	return true, nil
}

// benchPair times b.N messages of size bytes from rank 0 to rank 1 on
// backend and returns bytes per second.
func benchPair(b *testing.B, backend string, size int) float64 {
	job := launch.NewJobName()
	var inbox [2]chan []byte
	var engs [2]*lmt.Engine
	for r := range engs {
		inbox[r] = make(chan []byte, 64)
	}
	for r := range engs {
		e, err := lmt.New(lmt.Config{Rank: r, Size: 2, Job: job, Prefer: []string{backend},
			Control: chanControl{inbox[1-r]}, PeerPID: func(int) int { return os.Getpid() }})
		if err != nil {
			b.Fatal(err)
		}
		defer e.Close()
		engs[r] = e
	}
	msg, got := make([]byte, size), make([]byte, size)
	rts := make(chan []byte, 1)
	recvErr := make(chan error, 1)
	const warm = 8
	go func() { recvErr <- benchReceive(engs[1], inbox[1], rts, got, warm+b.N) }()
	send := func() error {
		buf := make([]byte, 4096)
		t, n, err := engs[0].StartSend(1, [][]byte{msg}, backend, buf)
		if err != nil {
			return err
		}
		rts <- buf[:n]
		if err := drive(engs[0], inbox[0], 1, t); err != nil {
			return err
		}
		return engs[0].Release(t)
	}
	for range warm {
		if err := send(); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(size))
	b.ResetTimer()
	for range b.N {
		if err := send(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if err := <-recvErr; err != nil {
		b.Fatal(err)
	}
	return float64(size) * float64(b.N) / b.Elapsed().Seconds()
}

// benchReceive receives n messages into got.
func benchReceive(e *lmt.Engine, inbox chan []byte, rts chan []byte, got []byte, n int) error {
	for range n {
		t, err := e.StartRecv(0, <-rts, [][]byte{got})
		if err != nil {
			return err
		}
		if err := drive(e, inbox, 0, t); err != nil {
			return err
		}
		if err := e.Release(t); err != nil {
			return err
		}
	}
	return nil
}

// drive runs e, with the packets of its peer, until t is done.
func drive(e *lmt.Engine, inbox chan []byte, peer int, t *lmt.Transfer) error {
	for !t.Done() {
		select {
		case p := <-inbox:
			if err := e.HandleControl(peer, p); err != nil {
				return err
			}
		default:
		}
		if err := e.Progress(); err != nil {
			return err
		}
	}
	return t.Err()
}
