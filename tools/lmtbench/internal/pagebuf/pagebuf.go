// Package pagebuf allocates lmtbench's message buffers in a chosen page
// size, so that lmtbench --hugepages can time each backend with huge pages
// and with 4 KiB pages in the same run, and reads back from
// /proc/self/smaps how much of a buffer the kernel really backed with huge
// pages: a row says what it got, not what it asked for.
//
// The choice of huge-page kind is internal/pages' (Decide over the Anon
// backing): hugetlb pages through MAP_HUGETLB where $KNEMESIS_HUGEPAGES
// allows them and the pool has them, else transparent huge pages through
// madvise(MADV_HUGEPAGE), else 4 KiB pages with its notes saying why.
package pagebuf

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/knemesis/knemesis/internal/pages"
)

// Kind is the page size a run asks for.
type Kind string

const (
	// Heap is a plain Go slice: what lmtbench uses without --hugepages.
	Heap Kind = ""
	// Small is an anonymous mapping with MADV_NOHUGEPAGE: 4 KiB pages
	// even where transparent_hugepage/enabled is "always".
	Small Kind = "small"
	// Huge is the first huge-page kind internal/pages allows for Anon.
	Huge Kind = "huge"
)

// HugeAlign is the alignment of a huge buffer: a PMD maps 2 MiB on x86-64
// and arm64 with 4 KiB base pages, and a THP needs an aligned 2 MiB range.
const HugeAlign = 2 << 20

// Buffer is one allocated buffer and the decision it was made with.
type Buffer struct {
	Mem      []byte
	Decision pages.Decision
	mapping  []byte // what to munmap; nil for Heap
	trimmed  bool   // mapping was cut out of a larger one (MunmapPtr)
}

// Alloc returns an n-byte buffer of kind k. For Huge, d is the decision
// (pages.Plan(pages.Anon, n) on this host); a hugetlb mapping the kernel
// refuses falls back to THP, or 4 KiB pages, with a note, and nothing fails
// but the mmap of plain memory.
func Alloc(k Kind, n int, d pages.Decision) (*Buffer, error) {
	switch k {
	case Heap:
		return &Buffer{Mem: make([]byte, n), Decision: pages.Decision{Mode: pages.Small, Size: int64(n)}}, nil
	case Small:
		mem, err := unix.Mmap(-1, 0, max(n, 1), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			return nil, fmt.Errorf("mapping a %d-byte buffer: %w", n, err)
		}
		// Where THP is "always", an unadvised mapping would get huge
		// pages too; small must stay small on every host.
		_ = unix.Madvise(mem, unix.MADV_NOHUGEPAGE)
		return &Buffer{Mem: mem[:n:n], Decision: pages.Decision{Mode: pages.Small, Size: int64(n)}, mapping: mem}, nil
	case Huge:
	default:
		return nil, fmt.Errorf("page kind %q: want small or huge", k)
	}
	if d.Mode == pages.HugeTLB {
		mem, err := unix.Mmap(-1, 0, int(d.Size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_HUGETLB)
		if err == nil {
			return &Buffer{Mem: mem[:n:n], Decision: d, mapping: mem}, nil
		}
		pages.Release(d)
		d.Notes = append(d.Notes, fmt.Sprintf("hugetlb: mmap(MAP_HUGETLB) of %d bytes refused: %v (another process took the pool's pages)", d.Size, err))
		d.Mode, d.Size = pages.THP, int64(n)
	}
	// Over-map by one huge page and trim both ends, so that the buffer
	// starts on a 2 MiB boundary and its every 2 MiB can be a PMD. The
	// Ptr calls: unix.Munmap only unmaps whole mappings it made.
	size := (n + HugeAlign - 1) / HugeAlign * HugeAlign
	p, err := unix.MmapPtr(-1, 0, nil, uintptr(size+HugeAlign), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("mapping a %d-byte buffer: %w", n, err)
	}
	base := uintptr(p)
	head := (HugeAlign - base%HugeAlign) % HugeAlign
	if head > 0 {
		if err := unix.MunmapPtr(p, head); err != nil {
			return nil, err
		}
	}
	if tail := HugeAlign - head; tail > 0 {
		if err := unix.MunmapPtr(unsafe.Add(p, head+uintptr(size)), tail); err != nil {
			return nil, err
		}
	}
	mem := unsafe.Slice((*byte)(unsafe.Add(p, head)), size)
	if d.Mode == pages.THP {
		d = pages.Advise(mem, d)
	} else {
		_ = unix.Madvise(mem, unix.MADV_NOHUGEPAGE)
	}
	return &Buffer{Mem: mem[:n:n], Decision: d, mapping: mem, trimmed: true}, nil
}

// Free unmaps the buffer and returns hugetlb bytes to the budget.
func (b *Buffer) Free() error {
	if b.mapping == nil {
		return nil
	}
	var err error
	if b.trimmed {
		err = unix.MunmapPtr(unsafe.Pointer(&b.mapping[0]), uintptr(len(b.mapping)))
	} else {
		err = unix.Munmap(b.mapping)
	}
	b.mapping, b.Mem = nil, nil
	pages.Release(b.Decision)
	return err
}

// HugeBytes is how many bytes of mem the kernel maps with huge pages now:
// the AnonHugePages, ShmemPmdMapped and Private_/Shared_Hugetlb of the
// /proc/self/smaps entry holding mem, at most len(mem) (a heap slice
// shares its mapping with others). Touch the buffer first: untouched
// pages are not mapped at all.
func HugeBytes(mem []byte) (int64, error) {
	f, err := Smaps(mem)
	if err != nil {
		return 0, err
	}
	kb := f["AnonHugePages"] + f["ShmemPmdMapped"] + f["Private_Hugetlb"] + f["Shared_Hugetlb"]
	return min(kb<<10, int64(len(mem))), nil
}

// SmapsFields are one /proc/self/smaps entry's "Name: N kB" fields, plus
// "THPeligible" (0 or 1) and, in VmFlags, 1 for each two-letter flag
// present ("hg" for MADV_HUGEPAGE, "nh" for MADV_NOHUGEPAGE, "ht" for a
// hugetlb mapping).
type SmapsFields map[string]int64

// Smaps returns the fields of the /proc/self/smaps entry whose range
// holds mem's first byte.
func Smaps(mem []byte) (SmapsFields, error) {
	if len(mem) == 0 {
		return nil, fmt.Errorf("smaps: empty buffer")
	}
	addr := uint64(uintptr(unsafe.Pointer(&mem[0])))
	file, err := os.Open("/proc/self/smaps")
	if err != nil {
		return nil, err
	}
	defer file.Close()
	var fields SmapsFields
	sc := bufio.NewScanner(file)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		key, rest, _ := strings.Cut(line, " ")
		if !strings.HasSuffix(key, ":") {
			if fields != nil {
				return fields, nil // the next entry began
			}
			lo, hi, ok := strings.Cut(key, "-")
			a, err1 := strconv.ParseUint(lo, 16, 64)
			b, err2 := strconv.ParseUint(hi, 16, 64)
			if ok && err1 == nil && err2 == nil && a <= addr && addr < b {
				fields = SmapsFields{}
			}
			continue
		}
		if fields == nil {
			continue
		}
		key = strings.TrimSuffix(key, ":")
		rest = strings.TrimSpace(rest)
		if key == "VmFlags" {
			for _, fl := range strings.Fields(rest) {
				fields[fl] = 1
			}
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSuffix(rest, " kB"), 10, 64)
		if err == nil {
			fields[key] = n
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if fields == nil {
		return nil, fmt.Errorf("smaps: no mapping holds %#x", addr)
	}
	return fields, nil
}
