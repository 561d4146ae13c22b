package knem

// Copy throughput of the driver against Linux CMA (process_vm_readv), both
// within one process so that both pay the same page-table walk and copy.
// In the QEMU guests both run on the same emulated CPU: only their ratio
// means something.

import (
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

var benchSizes = []int{64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20}

func sizeName(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprintf("%dKiB", n>>10)
}

// BenchmarkInlineCopy reads a long-lived region: the pin is paid once.
func BenchmarkInlineCopy(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(sizeName(n), func(b *testing.B) {
			d := open(b)
			src, dst := payload(1, n), make([]byte, n)
			c := region(b, d, [][]byte{src}, ProtRead, 0)
			local := [][]byte{dst}
			b.SetBytes(int64(n))
			for b.Loop() {
				if _, err := d.InlineCopy(Read, local, c, 0, All, 0, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkInlineCopySingleUse is the LMT pattern: one single-use region
// per message, so every message pays the pin as well.
func BenchmarkInlineCopySingleUse(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(sizeName(n), func(b *testing.B) {
			d := open(b)
			src, dst := payload(1, n), make([]byte, n)
			send, local := [][]byte{src}, [][]byte{dst}
			b.SetBytes(int64(n))
			for b.Loop() {
				c, err := d.CreateRegion(send, ProtRead, FlagSingleUse)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := d.InlineCopy(Read, local, c, 0, All, 0, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkProcessVMReadv(b *testing.B) {
	open(b) // same conditions as the driver benchmarks: skip without it
	for _, n := range benchSizes {
		b.Run(sizeName(n), func(b *testing.B) {
			src, dst := payload(1, n), make([]byte, n)
			local := []unix.Iovec{{Base: &dst[0]}}
			local[0].SetLen(n)
			remote := []unix.RemoteIovec{{Base: uintptrOf(src), Len: n}}
			pid := os.Getpid()
			b.SetBytes(int64(n))
			for b.Loop() {
				got, err := unix.ProcessVMReadv(pid, local, remote, 0)
				if err != nil || got != n {
					b.Fatalf("process_vm_readv: %d, %v", got, err)
				}
			}
		})
	}
}

func TestInlineCopyDoesNotAllocate(t *testing.T) {
	d := open(t)
	src, dst := payload(1, 8192), make([]byte, 8192)
	c := region(t, d, [][]byte{src}, ProtRead, 0)
	local := [][]byte{dst[:4096], dst[4096:]}
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := d.InlineCopy(Read, local, c, 0, All, 0, 0); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per INLINE_COPY", allocs)
	}
}

// BenchmarkInlineVsCMA alternates one INLINE_COPY and one process_vm_readv
// of the same bytes per iteration, so that both see the same load on a
// shared (or emulated) machine, and reports the median throughput of each
// and their ratio (knem/cma > 1: the driver is faster).
func BenchmarkInlineVsCMA(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(sizeName(n), func(b *testing.B) {
			d := open(b)
			src := payload(1, n)
			dk, dc := make([]byte, n), make([]byte, n)
			copy(dk, src) // fault the pages in before timing
			copy(dc, src)
			c := region(b, d, [][]byte{src}, ProtRead, 0)
			local := [][]byte{dk}
			cmaLocal := []unix.Iovec{{Base: &dc[0]}}
			cmaLocal[0].SetLen(n)
			remote := []unix.RemoteIovec{{Base: uintptrOf(src), Len: n}}
			pid := os.Getpid()
			var tk, tc []time.Duration
			for b.Loop() {
				t0 := time.Now()
				if _, err := d.InlineCopy(Read, local, c, 0, All, 0, 0); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if got, err := unix.ProcessVMReadv(pid, cmaLocal, remote, 0); err != nil || got != n {
					b.Fatalf("process_vm_readv: %d, %v", got, err)
				}
				tk, tc = append(tk, t1.Sub(t0)), append(tc, time.Since(t1))
			}
			mk, mc := median(tk), median(tc)
			b.ReportMetric(float64(n)/mk.Seconds()/1e6, "knem-MB/s")
			b.ReportMetric(float64(n)/mc.Seconds()/1e6, "cma-MB/s")
			b.ReportMetric(mc.Seconds()/mk.Seconds(), "knem/cma")
		})
	}
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}
