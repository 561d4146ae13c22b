package pages

import "strings"

// Mode is the page size an object got.
type Mode uint8

const (
	// Small is the base page size (4 KiB on x86-64).
	Small Mode = iota
	// THP is transparent huge pages on a shmem mapping (2 MiB on x86-64).
	THP
	// HugeTLB is pages of the reserved hugetlb pool, through MFD_HUGETLB.
	HugeTLB
)

func (m Mode) String() string {
	switch m {
	case THP:
		return "thp"
	case HugeTLB:
		return "hugetlb"
	default:
		return "4KiB"
	}
}

// Backing is where an object's memory lives, which decides the settings
// that govern its huge pages.
type Backing uint8

const (
	// Memfd is a memfd_create(2) file (the kernel's internal shm mount).
	Memfd Backing = iota
	// DevShm is a file in /dev/shm (a tmpfs mount of its own).
	DevShm
	// Anon is private anonymous memory (a process's own buffers, such as
	// lmtbench's): its THP follows transparent_hugepage/enabled, not the
	// shmem settings, and MAP_HUGETLB gives it hugetlb pages.
	Anon
)

// Decision is the mode chosen for one object and, for each mode skipped,
// one line saying why and what to change.
type Decision struct {
	Mode Mode
	// Size is the object's size as it must be created: a hugetlb object's
	// is rounded up to whole huge pages.
	Size  int64
	Notes []string
}

// String is the mode, followed by the notes when there are any.
func (d Decision) String() string {
	if len(d.Notes) == 0 {
		return d.Mode.String()
	}
	return d.Mode.String() + " (" + strings.Join(d.Notes, "; ") + ")"
}
