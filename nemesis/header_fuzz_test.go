package nemesis

import (
	"encoding/binary"
	"testing"
	"unsafe"
)

// headerBytes is a segment header for l as createSegment writes it, in
// little-endian bytes: the seeds of FuzzSegmentHeader.
func headerBytes(l layout) []byte {
	var h segHeader
	procOff, bellOff, fboxOff, cellOff, size := l.offsets()
	h.magic, h.version, h.headerSize = segMagic, layoutVersion, headerSize
	h.nprocs, h.cellSize, h.cellsPerProc = uint32(l.nprocs), uint32(l.cellSize), uint32(l.cellsPerProc)
	h.fastboxSize, h.fastboxes = uint32(l.fastboxSize), uint32(l.fastboxes)
	h.segSize, h.procOff, h.bellOff, h.fastboxOff, h.cellOff = size, procOff, bellOff, fboxOff, cellOff
	return append([]byte(nil), unsafe.Slice((*byte)(unsafe.Pointer(&h)), unsafe.Sizeof(h))...)
}

// FuzzSegmentHeader: whatever a peer (or a stale file) wrote in the
// header, adopt either refuses it or accepts a geometry whose every
// process block, fastbox and cell lies inside the mapping, in that order.
// The seeds (valid headers, each with one field broken) run under plain
// go test.
func FuzzSegmentHeader(f *testing.F) {
	for _, l := range []layout{
		{nprocs: 2, cellSize: 256, cellsPerProc: 2, fastboxSize: 128, fastboxes: 1},
		{nprocs: 3, cellSize: 1024, cellsPerProc: 4, fastboxSize: 0, fastboxes: 0},
		{nprocs: 40, cellSize: 4096, cellsPerProc: 1, fastboxSize: 256, fastboxes: 32},
	} {
		h := headerBytes(l)
		_, _, _, _, size := l.offsets()
		f.Add(h, uint32(size))
		f.Add(h, uint32(size-1)) // mapping one byte short
		for _, field := range []int{0, 8, 16, 20, 24, 28, 32, 40, 48, 56, 64, 72} {
			bad := append([]byte(nil), h...)
			bad[field] ^= 0x41
			f.Add(bad, uint32(size))
		}
	}
	f.Add([]byte("not a segment"), uint32(4096))
	f.Fuzz(func(t *testing.T, hdr []byte, mapped uint32) {
		n := max(int(mapped)%(4<<20), int(unsafe.Sizeof(segHeader{})))
		words := make([]uint64, (n+7)/8) // aligned for the header's atomics
		mem := unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), n)
		copy(mem, hdr)
		s := &segment{mem: mem, base: unsafe.Pointer(&mem[0]), hdr: (*segHeader)(unsafe.Pointer(&mem[0]))}
		if err := s.adopt(); err != nil {
			return
		}
		end := func(what string, off, length uint64) uint64 {
			if off+length > uint64(len(mem)) || off+length < off {
				t.Fatalf("%s [%#x, +%d) outside the %d-byte mapping", what, off, length, len(mem))
			}
			return off + length
		}
		procEnd := end("process blocks", s.procOff, uint64(s.nprocs)*uint64(unsafe.Sizeof(procBlock{})))
		bellEnd := end("bells", s.bellOff, uint64(s.nprocs)*s.bellSize())
		fboxEnd := end("fastboxes", s.fboxOff, uint64(s.nprocs)*uint64(s.fastboxes)*s.fboxSetSize())
		cellEnd := end("cells", s.cellOff, s.cellBytes)
		if s.procOff < uint64(unsafe.Sizeof(segHeader{})) || procEnd > s.bellOff || bellEnd > s.fboxOff || fboxEnd > s.cellOff || cellEnd > uint64(len(mem)) {
			t.Fatalf("areas overlap: header %d, procs [%#x,%#x), bells [%#x,%#x), fastboxes [%#x,%#x), cells [%#x,%#x)",
				unsafe.Sizeof(segHeader{}), s.procOff, procEnd, s.bellOff, bellEnd, s.fboxOff, fboxEnd, s.cellOff, cellEnd)
		}
		last := s.cellOffset(s.nprocs-1, s.cellsPerProc-1)
		if !s.validCell(last) || last+uint64(s.cellSize) != cellEnd || s.validCell(cellEnd) {
			t.Fatalf("last cell at %#x, cells end at %#x", last, cellEnd)
		}
		if s.payloadSize <= 0 || s.cellSize&(s.cellSize-1) != 0 || binary.LittleEndian.Uint64(mem) != segMagic {
			t.Fatalf("accepted a %d-byte cell (payload %d), magic %#x", s.cellSize, s.payloadSize, binary.LittleEndian.Uint64(mem))
		}
	})
}
