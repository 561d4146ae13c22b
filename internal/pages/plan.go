package pages

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// host is this machine's System and the job's Config, read once: neither
// changes while a job runs, and a process creates its objects at start.
var host = sync.OnceValues(func() (System, Config) {
	cfg, err := ConfigFromEnv()
	if err != nil {
		fmt.Fprintf(os.Stderr, "knemesis: %v; hugetlb pages stay off\n", err)
	}
	return ReadSystem(os.DirFS("/")), cfg
})

// Host returns this machine's facts and the job's config.
func Host() (System, Config) { return host() }

// taken counts the hugetlb bytes this process holds, against Config.Cap.
var taken atomic.Int64

// Plan decides the mode of a new object on this host and, for HugeTLB,
// takes its bytes from the process's budget; Release gives them back when
// the object goes (or its creation fails).
func Plan(b Backing, size int64) Decision {
	sys, cfg := host()
	for {
		used := taken.Load()
		d := Decide(sys, cfg, b, size, used)
		if d.Mode != HugeTLB || taken.CompareAndSwap(used, used+d.Size) {
			return d
		}
	}
}

// Release returns a HugeTLB object's bytes to the budget.
func Release(d Decision) {
	if d.Mode == HugeTLB {
		taken.Add(-d.Size)
	}
}

// MemfdFlags are the memfd_create(2) flags the decision adds.
func (d Decision) MemfdFlags() int {
	if d.Mode == HugeTLB {
		return unix.MFD_HUGETLB
	}
	return 0
}

// Advise asks for transparent huge pages on mem when d chose THP, before
// the pages are touched. A refusal (EINVAL on a kernel without THP) turns
// the decision into Small with a note; nothing fails.
func Advise(mem []byte, d Decision) Decision {
	if d.Mode != THP || len(mem) == 0 {
		return d
	}
	if err := unix.Madvise(mem, unix.MADV_HUGEPAGE); err != nil {
		d.Mode = Small
		d.Notes = append(d.Notes, "thp: madvise(MADV_HUGEPAGE) refused: "+err.Error())
	}
	return d
}
