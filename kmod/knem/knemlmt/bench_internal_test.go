package knemlmt

import (
	"fmt"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/knemesis/knemesis/kmod/knem"
)

// sent is a transfer that is over: its region may be sent again.
type sent struct{}

func (sent) ID() uint64 { return 1 }
func (sent) Done() bool { return true }
func (sent) Err() error { return nil }

// BenchmarkCachedMessage compares, per message of 4 KiB, 64 KiB and 1 MiB
// in one buffer, and of 64 KiB in an iovec list of four 16 KiB buffers
// 16 KiB apart, the knem LMT's data path with the registration cache (the
// sender's lookup and slot check, the receiver's attachment lookup and
// memcpy) and without it (a single-use region and one INLINE_COPY), both
// in the same loop on the same CPU, without the control messages. It
// reports both times per message and their ratio ("speedup", above 1 when
// the cache pays); in the QEMU guests only the ratio means anything:
//
//	make kmod-bench-knemlmt
func BenchmarkCachedMessage(b *testing.B) {
	for n := 4 << 10; n <= 1<<20; n <<= 4 {
		b.Run(fmt.Sprintf("%dKiB", n>>10), func(b *testing.B) {
			src := make([]byte, n)
			benchMessage(b, [][]byte{src}, n)
		})
	}
	b.Run("iovec-4x16KiB", func(b *testing.B) {
		// Page-aligned pieces, so that the receiver can map the region.
		mem, err := unix.Mmap(-1, 0, 128<<10, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
		if err != nil {
			b.Fatal(err)
		}
		defer unix.Munmap(mem)
		var send [][]byte
		for off := 0; off < len(mem); off += 32 << 10 {
			send = append(send, mem[off:off+16<<10])
		}
		benchMessage(b, send, 64<<10)
	})
}

func benchMessage(b *testing.B, send [][]byte, n int) {
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
	dst := make([]byte, n)
	i := 0
	for _, s := range send {
		for j := range s {
			s[j] = byte(i)
			i++
		}
	}
	local := [][]byte{dst}
	// The first message declares and copies, the second attaches: the
	// loop times the messages after, as a job's repeated sends.
	for range 2 {
		c, _ := regions.get(sent{}, send)
		attach.get(c)
	}
	if regions.creates != 1 || attach.attachs != 1 {
		b.Fatalf("%d regions declared and %d attached for one list, want 1 and 1", regions.creates, attach.attachs)
	}
	var cached, single time.Duration
	msgs := 0
	b.SetBytes(int64(n))
	for b.Loop() {
		msgs++
		t0 := time.Now()
		c, ok := regions.get(sent{}, send)
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
		b.Skipf("lacks knem-device: needs the knem module: %v (make kmod-bench-knemlmt runs this in a QEMU guest)", err)
	}
	b.Cleanup(func() { d.Close() })
	return d
}
