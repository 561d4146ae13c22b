package memcopy

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"testing"
)

func TestCopyCountsShorterSide(t *testing.T) {
	src := []byte("0123456789")
	dst := make([]byte, 4)
	if n := Copy(dst, src); n != 4 || !bytes.Equal(dst, src[:4]) {
		t.Fatalf("Copy = %d, %q; want 4, %q", n, dst, src[:4])
	}
	dst = make([]byte, 20)
	if n := Copy(dst, src); n != 10 || !bytes.Equal(dst[:10], src) {
		t.Fatalf("Copy = %d, %q; want 10, %q", n, dst[:10], src)
	}
}

func pattern(n int, seed byte) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(i*131) ^ seed ^ byte(i>>8)
	}
	return p
}

// Sizes on both sides of BulkMin, odd offsets on both sides, and guard bytes
// around the destination that must come out untouched.
func TestCopyIntegrity(t *testing.T) {
	const guard = 64
	for _, size := range []int{0, 1, BulkMin - 1, BulkMin, BulkMin + 1, 4095, 4096, 65537, 1<<20 + 3} {
		for _, off := range [][2]int{{0, 0}, {1, 0}, {0, 7}, {63, 1}, {4095, 33}} {
			t.Run(fmt.Sprintf("%d/src+%d/dst+%d", size, off[0], off[1]), func(t *testing.T) {
				src := pattern(size+off[0], 0x5a)[off[0]:]
				mem := bytes.Repeat([]byte{0xee}, guard+off[1]+size+guard)
				dst := mem[guard+off[1] : guard+off[1]+size]
				if n := Copy(dst, src); n != size {
					t.Fatalf("Copy returned %d, want %d", n, size)
				}
				if got, want := crc32.ChecksumIEEE(dst), crc32.ChecksumIEEE(src); got != want {
					t.Fatalf("crc32 of destination %#x, of source %#x", got, want)
				}
				for i, b := range mem[:guard+off[1]] {
					if b != 0xee {
						t.Fatalf("byte %d before the destination changed to %#x", i-guard-off[1], b)
					}
				}
				for i, b := range mem[guard+off[1]+size:] {
					if b != 0xee {
						t.Fatalf("byte %d past the destination changed to %#x", i, b)
					}
				}
			})
		}
	}
}

// Overlapping slices of one buffer, in both directions, come out as the
// built-in copy leaves them.
func TestCopyOverlapping(t *testing.T) {
	const size = 3 * BulkMin
	for _, shift := range []int{-BulkMin - 1, -1, 1, 64, BulkMin + 1} {
		t.Run(fmt.Sprint(shift), func(t *testing.T) {
			got := pattern(size+2*BulkMin+2, 0x11)
			want := bytes.Clone(got)
			base := BulkMin + 1
			Copy(got[base+shift:base+shift+size], got[base:base+size])
			copy(want[base+shift:base+shift+size], want[base:base+size])
			if !bytes.Equal(got, want) {
				t.Fatalf("shift %d: buffer differs from the built-in copy's (crc32 %#x, want %#x)",
					shift, crc32.ChecksumIEEE(got), crc32.ChecksumIEEE(want))
			}
		})
	}
}

// The bulk routine itself, where this build has it: Copy's tests above pass
// through the built-in copy too when the CPU lacks ERMS, so this one calls
// bulkCopy directly.
func TestBulkCopy(t *testing.T) {
	if !bulkCopyWorks {
		t.Skip("lacks erms: no REP MOVSB bulk copy in this build or on this CPU (needs amd64 with ERMS, no race detector)")
	}
	src := pattern(100003, 0x77)
	mem := bytes.Repeat([]byte{0xee}, len(src)+2)
	bulkCopy(&mem[1], &src[0], uintptr(len(src)))
	if !bytes.Equal(mem[1:1+len(src)], src) || mem[0] != 0xee || mem[len(mem)-1] != 0xee {
		t.Fatalf("bulkCopy: crc32 %#x, want %#x; guards %#x %#x",
			crc32.ChecksumIEEE(mem[1:1+len(src)]), crc32.ChecksumIEEE(src), mem[0], mem[len(mem)-1])
	}
}

func BenchmarkCopy(b *testing.B) {
	for _, size := range []int{256, 4096, 32 << 10, 1 << 20} {
		src, dst := pattern(size, 1), make([]byte, size)
		b.Run(fmt.Sprint(size), func(b *testing.B) {
			b.SetBytes(int64(size))
			for b.Loop() {
				Copy(dst, src)
			}
		})
	}
}
