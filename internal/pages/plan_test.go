package pages

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// rawSelected reads a sysfs choice file itself, apart from ReadSystem, to
// know what this host must give.
func rawSelected(t *testing.T, name string) string {
	b, err := os.ReadFile(name)
	if err != nil {
		return ""
	}
	s := string(b)
	i, j := strings.IndexByte(s, '['), strings.IndexByte(s, ']')
	if i < 0 || j < i {
		t.Fatalf("%s: no selected value in %q", name, s)
	}
	return s[i+1 : j]
}

// smapsKB returns field (such as "ShmemPmdMapped") of the mapping at mem
// in /proc/self/smaps, in kB.
func smapsKB(t *testing.T, mem []byte, field string) int {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	start := fmt.Sprintf("%x-", uintptr(unsafe.Pointer(&mem[0])))
	in := false
	for sc := bufio.NewScanner(f); sc.Scan(); {
		line := sc.Text()
		if k, _, _ := strings.Cut(line, " "); !strings.HasSuffix(k, ":") {
			in = strings.HasPrefix(line, start)
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); in && ok && k == field {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	t.Fatalf("no %s for the mapping at %s in /proc/self/smaps", field, start)
	return 0
}

// TestHostTHP: a 4 MiB memfd on this host gets THP exactly when
// shmem_enabled (or the 2 MiB size's own setting) allows it, and then the
// whole mapping is PMD-mapped; otherwise 4 KiB pages and the exact note.
func TestHostTHP(t *testing.T) {
	global := rawSelected(t, "/sys/kernel/mm/transparent_hugepage/shmem_enabled")
	if s := rawSelected(t, "/sys/kernel/mm/transparent_hugepage/hugepages-2048kB/shmem_enabled"); s != "" && s != "inherit" {
		global = s
	}
	allowed := global == "advise" || global == "always" || global == "within_size" || global == "force"
	const size = 4 * mib
	d := Decide(ReadSystem(os.DirFS("/")), Config{}, Memfd, size, 0)
	fd, err := unix.MemfdCreate("knemesis-pages-test", unix.MFD_CLOEXEC|d.MemfdFlags())
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Ftruncate(fd, size); err != nil {
		t.Fatal(err)
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	d = Advise(mem, d)
	for i := 0; i < size; i += 4096 {
		mem[i] = 1
	}
	pmd := smapsKB(t, mem, "ShmemPmdMapped")
	if allowed {
		if d.Mode != THP || len(d.Notes) != 0 || pmd != size>>10 {
			t.Fatalf("shmem_enabled %s: got %v with %d kB PMD-mapped, want thp with %d kB", global, d, pmd, size>>10)
		}
		return
	}
	want := "4KiB (thp: shmem_enabled is " + global + " (echo advise > /sys/kernel/mm/transparent_hugepage/shmem_enabled))"
	if global == "deny" || global == "" {
		want = d.String() // the other notes are TestDecide's
	}
	if d.Mode != Small || d.String() != want || pmd != 0 {
		t.Fatalf("shmem_enabled %s: got %q with %d kB PMD-mapped, want %q with 0", global, d, pmd, want)
	}
}

// TestHostHugeTLB: asked for hugetlb pages, this host gives them when its
// pool has two free, and says exactly how to reserve them when not.
func TestHostHugeTLB(t *testing.T) {
	sys := ReadSystem(os.DirFS("/"))
	const size = 4 * mib
	d := Decide(sys, Config{HugeTLB: true, Cap: size}, Memfd, size, 0)
	if sys.HugePageSize != 2*mib || sys.HugePagesFree < 2 {
		want := fmt.Sprintf("hugetlb: %d free huge pages of 2 MiB, this object needs 2 (reserve them: echo 2 > /proc/sys/vm/nr_hugepages)", sys.HugePagesFree)
		if sys.HugePageSize != 2*mib || d.Mode == HugeTLB || len(d.Notes) == 0 || d.Notes[0] != want {
			t.Fatalf("pool of %d free %d-byte pages: got %v, want first note %q", sys.HugePagesFree, sys.HugePageSize, d, want)
		}
		return
	}
	fd, err := unix.MemfdCreate("knemesis-pages-test", unix.MFD_CLOEXEC|d.MemfdFlags())
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Ftruncate(fd, d.Size); err != nil {
		t.Fatal(err)
	}
	mem, err := unix.Mmap(fd, 0, int(d.Size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	mem[0] = 1
	if d.Mode != HugeTLB || smapsKB(t, mem, "KernelPageSize") != 2048 {
		t.Fatalf("got %v, KernelPageSize %d kB; want hugetlb, 2048 kB", d, smapsKB(t, mem, "KernelPageSize"))
	}
}
