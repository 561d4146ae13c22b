package pagebuf

import (
	"os"
	"strings"
	"testing"
	"unsafe"

	"github.com/knemesis/knemesis/internal/pages"
)

const mib = 1 << 20

func touch(b []byte) {
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
}

// TestHugeIsAlignedAndAdvised: a huge buffer asked for as THP starts on a
// 2 MiB boundary, its mapping carries MADV_HUGEPAGE ("hg") and is
// THP-eligible where transparent_hugepage/enabled allows it, and what
// HugeBytes reports is whole huge pages within the buffer; where the host
// refuses, the decision says 4 KiB with the note and the mapping is "nh".
func TestHugeIsAlignedAndAdvised(t *testing.T) {
	sys := pages.ReadSystem(os.DirFS("/"))
	const n = 6*mib + 12345 // not a multiple: the tail must still be mapped
	d := pages.Decide(sys, pages.Config{}, pages.Anon, n, 0)
	b, err := Alloc(Huge, n, d)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Free()
	if len(b.Mem) != n {
		t.Fatalf("len %d, want %d", len(b.Mem), n)
	}
	if addr := uintptr(unsafe.Pointer(&b.Mem[0])); addr%HugeAlign != 0 {
		t.Fatalf("buffer at %#x is not 2 MiB aligned", addr)
	}
	touch(b.Mem)
	f, err := Smaps(b.Mem)
	if err != nil {
		t.Fatal(err)
	}
	if f["Size"] != 8*mib>>10 {
		t.Fatalf("mapping is %d kB, want %d (n rounded up to 2 MiB, head and tail trimmed)", f["Size"], 8*mib>>10)
	}
	hb, err := HugeBytes(b.Mem)
	if err != nil {
		t.Fatal(err)
	}
	if hb < 0 || hb > n || hb%HugeAlign != 0 && hb != n {
		t.Fatalf("HugeBytes %d: want whole 2 MiB pages within %d bytes", hb, n)
	}
	switch b.Decision.Mode {
	case pages.THP:
		if f["hg"] != 1 || f["THPeligible"] != 1 {
			t.Fatalf("THP decision but smaps has hg=%d THPeligible=%d", f["hg"], f["THPeligible"])
		}
	case pages.Small:
		if f["nh"] != 1 || hb != 0 || len(b.Decision.Notes) == 0 || !strings.HasPrefix(b.Decision.Notes[len(b.Decision.Notes)-1], "thp: ") {
			t.Fatalf("4 KiB decision %v: want nh, no huge bytes, a thp note; smaps nh=%d, %d huge bytes", b.Decision, f["nh"], hb)
		}
	default:
		t.Fatalf("no hugetlb config, got %v", b.Decision)
	}
}

// TestSmallHasNoHugePages: a small buffer is marked MADV_NOHUGEPAGE and
// has not one huge page, whatever transparent_hugepage/enabled says.
func TestSmallHasNoHugePages(t *testing.T) {
	b, err := Alloc(Small, 8*mib, pages.Decision{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Free()
	touch(b.Mem)
	f, err := Smaps(b.Mem)
	if err != nil {
		t.Fatal(err)
	}
	hb, err := HugeBytes(b.Mem)
	if err != nil {
		t.Fatal(err)
	}
	if f["nh"] != 1 || f["hg"] != 0 || f["THPeligible"] != 0 || hb != 0 {
		t.Fatalf("small buffer: nh=%d hg=%d THPeligible=%d, %d huge bytes; want 1, 0, 0, 0", f["nh"], f["hg"], f["THPeligible"], hb)
	}
}

// TestHugeTLB: a hugetlb decision gets a hugetlb mapping ("ht", every
// byte huge) when the pool has the pages; when the pool is empty the
// kernel refuses the mmap and the buffer falls back to THP with the
// note, instead of failing.
func TestHugeTLB(t *testing.T) {
	sys := pages.ReadSystem(os.DirFS("/"))
	const n = 4 * mib
	d := pages.Decision{Mode: pages.HugeTLB, Size: n}
	b, err := Alloc(Huge, n, d)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Free()
	touch(b.Mem)
	f, err := Smaps(b.Mem)
	if err != nil {
		t.Fatal(err)
	}
	hb, _ := HugeBytes(b.Mem)
	if sys.HugePagesFree*sys.HugePageSize >= n {
		if b.Decision.Mode != pages.HugeTLB || f["ht"] != 1 || hb != n {
			t.Fatalf("pool of %d free pages: got %v, ht=%d, %d huge bytes; want hugetlb, 1, %d", sys.HugePagesFree, b.Decision, f["ht"], hb, n)
		}
		return
	}
	want := "hugetlb: mmap(MAP_HUGETLB) of 4194304 bytes refused: cannot allocate memory (another process took the pool's pages)"
	if b.Decision.Mode != pages.THP || len(b.Decision.Notes) != 1 || b.Decision.Notes[0] != want || f["ht"] != 0 || f["hg"] != 1 {
		t.Fatalf("empty pool: got %v (notes %q), ht=%d hg=%d; want thp with note %q, hg=1", b.Decision.Mode, b.Decision.Notes, f["ht"], f["hg"], want)
	}
}

// TestKindRefused: an unknown kind is an error naming the two kinds.
func TestKindRefused(t *testing.T) {
	_, err := Alloc("medium", 1, pages.Decision{})
	if err == nil || err.Error() != `page kind "medium": want small or huge` {
		t.Fatalf("got %v", err)
	}
}
