package knemlmt

import (
	"fmt"
	"testing"
	"time"

	"github.com/knemesis/knemesis/kmod/knem"
)

// sent is a transfer that is over: its region may be sent again.
type sent struct{}

func (sent) ID() uint64 { return 1 }
func (sent) Done() bool { return true }
func (sent) Err() error { return nil }

// BenchmarkCachedMessage compares, per message of 4 KiB, 64 KiB and 1 MiB, the
// knem LMT's data path with the registration cache (the sender's slot
// check, the receiver's attachment lookup and memcpy) and without it (a
// single-use region and one INLINE_COPY), both in the same loop on the
// same CPU, without the control messages. It reports both times per
// message and their ratio ("speedup", above 1 when the cache pays); in the
// QEMU guests only the ratio means anything:
//
//	make kmod-bench-knemlmt
func BenchmarkCachedMessage(b *testing.B) {
	for n := 4 << 10; n <= 1<<20; n <<= 4 {
		b.Run(fmt.Sprintf("%dKiB", n>>10), func(b *testing.B) { benchMessage(b, n) })
	}
}

func benchMessage(b *testing.B, n int) {
	snd, rcv := benchDevice(b), benchDevice(b)
	status, err := snd.MapStatus(1)
	if err != nil {
		b.Fatal(err)
	}
	defer status.Unmap()
	regions := &regionCache{dev: snd, status: status}
	attach := &attachCache{dev: rcv}
	defer regions.close()
	defer attach.close()
	src, dst := make([]byte, n), make([]byte, n)
	for i := range src {
		src[i] = byte(i)
	}
	send, local := [][]byte{src}, [][]byte{dst}
	// The first message declares and copies, the second attaches: the
	// loop times the messages after, as a job's repeated sends.
	for range 2 {
		c, _ := regions.get(sent{}, src)
		attach.get(c)
	}
	var cached, single time.Duration
	msgs := 0
	b.SetBytes(int64(n))
	for b.Loop() {
		msgs++
		t0 := time.Now()
		c, ok := regions.get(sent{}, src)
		a, _ := attach.get(c)
		if !ok || a == nil {
			if _, err := rcv.InlineCopy(knem.Read, local, c, 0, knem.All, 0, 0); err != nil {
				b.Fatal(err)
			}
		} else {
			copy(dst, a.Bytes())
		}
		t1 := time.Now()
		c, err := snd.CreateRegion(send, knem.ProtRead, knem.FlagSingleUse)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := rcv.InlineCopy(knem.Read, local, c, 0, knem.All, 0, 0); err != nil {
			b.Fatal(err)
		}
		cached += t1.Sub(t0)
		single += time.Since(t1)
	}
	if dst[n-1] != byte(n-1) {
		b.Fatalf("byte %d is %d, want %d", n-1, dst[n-1], byte(n-1))
	}
	b.ReportMetric(float64(cached.Nanoseconds())/float64(msgs), "cached-ns/msg")
	b.ReportMetric(float64(single.Nanoseconds())/float64(msgs), "single-use-ns/msg")
	b.ReportMetric(float64(single)/float64(cached), "speedup")
}

func benchDevice(b *testing.B) *knem.Device {
	d, err := knem.Open()
	if err != nil {
		b.Skipf("needs the knem module: %v (make kmod-bench-knemlmt runs this in a QEMU guest)", err)
	}
	b.Cleanup(func() { d.Close() })
	return d
}
