package pages

import (
	"fmt"
	"strconv"
)

// Decide chooses the mode of an object of size bytes on backing b, given
// the system's facts, the job's config and the hugetlb bytes this process
// has already taken (used). Every mode it passes over gets one note.
func Decide(sys System, cfg Config, b Backing, size, used int64) Decision {
	d := Decision{Mode: Small, Size: size}
	if note, ok := hugetlbFits(sys, cfg, b, size, used); ok {
		d.Mode, d.Size = HugeTLB, roundUp(size, sys.HugePageSize)
		return d
	} else if note != "" {
		d.Notes = append(d.Notes, note)
	}
	if note := thpAllowed(sys, b, size); note != "" {
		d.Notes = append(d.Notes, note)
		return d
	}
	d.Mode = THP
	return d
}

// hugetlbFits says whether an MFD_HUGETLB memfd of size fits the pool and
// the cap; when it does not, why ("" when hugetlb pages are simply off).
func hugetlbFits(sys System, cfg Config, b Backing, size, used int64) (string, bool) {
	switch {
	case !cfg.HugeTLB:
		return "", false
	case b == DevShm:
		return "hugetlb: only a memfd can have hugetlb pages, this object is a /dev/shm file", false
	case sys.HugePageSize <= 0:
		return "hugetlb: /proc/meminfo names no huge page size (a kernel without CONFIG_HUGETLBFS)", false
	}
	need := roundUp(size, sys.HugePageSize)
	if free := sys.HugePagesFree * sys.HugePageSize; need > free {
		pages := need / sys.HugePageSize
		return fmt.Sprintf("hugetlb: %d free huge pages of %s, this object needs %d (reserve them: echo %d > /proc/sys/vm/nr_hugepages)",
			sys.HugePagesFree, human(sys.HugePageSize), pages, pages), false
	}
	if used+need > cfg.Cap {
		return fmt.Sprintf("hugetlb: this process has taken %d of its %d-byte cap, this object needs %d more (raise the cap in %s=hugetlb:<bytes>)",
			used, cfg.Cap, need, EnvVar), false
	}
	return "", true
}

// thpAllowed returns "" when madvise(MADV_HUGEPAGE) will give the object
// transparent huge pages, else why not and what to change.
func thpAllowed(sys System, b Backing, size int64) string {
	const hpage = 2 << 20
	if size < hpage {
		return "thp: " + strconv.FormatInt(size, 10) + " bytes is less than one 2 MiB page"
	}
	if b == Anon {
		return anonTHP(sys)
	}
	global := sys.ShmemTHP
	if sys.ShmemTHP2M != "" && sys.ShmemTHP2M != "inherit" {
		global = sys.ShmemTHP2M
	}
	switch global {
	case "":
		return "thp: no /sys/kernel/mm/transparent_hugepage/shmem_enabled (a kernel without CONFIG_TRANSPARENT_HUGEPAGE)"
	case "deny":
		return "thp: shmem_enabled is deny (echo advise > /sys/kernel/mm/transparent_hugepage/shmem_enabled)"
	case "force":
		return ""
	}
	if b == DevShm {
		switch sys.DevShmHuge {
		case "always", "within_size", "advise":
			return ""
		case "":
			return "thp: /dev/shm is not a tmpfs mount"
		}
		return "thp: /dev/shm is mounted with huge=" + sys.DevShmHuge + " (mount -o remount,huge=advise /dev/shm)"
	}
	if global == "never" {
		if sys.ShmemTHP2M == "never" {
			return "thp: hugepages-2048kB/shmem_enabled is never (echo inherit > /sys/kernel/mm/transparent_hugepage/hugepages-2048kB/shmem_enabled)"
		}
		return "thp: shmem_enabled is never (echo advise > /sys/kernel/mm/transparent_hugepage/shmem_enabled)"
	}
	return ""
}

// anonTHP is thpAllowed for private anonymous memory, which
// transparent_hugepage/enabled governs (madvise(MADV_HUGEPAGE) is what
// "madvise" waits for).
func anonTHP(sys System) string {
	global := sys.AnonTHP
	if sys.AnonTHP2M != "" && sys.AnonTHP2M != "inherit" {
		global = sys.AnonTHP2M
	}
	switch {
	case global == "always" || global == "madvise":
		return ""
	case global == "":
		return "thp: no /sys/kernel/mm/transparent_hugepage/enabled (a kernel without CONFIG_TRANSPARENT_HUGEPAGE)"
	case sys.AnonTHP2M == "never":
		return "thp: hugepages-2048kB/enabled is never (echo inherit > /sys/kernel/mm/transparent_hugepage/hugepages-2048kB/enabled)"
	}
	return "thp: transparent_hugepage/enabled is " + global + " (echo madvise > /sys/kernel/mm/transparent_hugepage/enabled)"
}

func roundUp(n, to int64) int64 { return (n + to - 1) / to * to }

// human prints a power-of-two size as MiB or KiB.
func human(n int64) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return strconv.FormatInt(n>>20, 10) + " MiB"
	}
	return strconv.FormatInt(n>>10, 10) + " KiB"
}
