package rma

// The availability checks of the mechanisms an exposed window may use are
// the LMT's own, called through its exported API, so that a fallback is
// explained exactly as the LMT explains it (ptrace restrictions, another
// user or PID namespace, seccomp, module not loaded). This is the only
// file of the package that knows where those checks live.

import (
	"fmt"

	"golang.org/x/sys/unix"

	_ "github.com/knemesis/knemesis/cma"               // registers the cma check
	_ "github.com/knemesis/knemesis/kmod/knem/knemlmt" // registers the knem check
	"github.com/knemesis/knemesis/lmt"
)

// checkCMA tells whether this process may read and write rank's memory with
// process_vm_readv/writev; the error is the LMT's *lmt.Unavailable.
func checkCMA(rank, pid int) error {
	return lmt.Check(lmt.CMA, lmt.Peer{Rank: rank, PID: pid})
}

// checkKnem tells whether this process can use /dev/knem; the error is the
// LMT's *lmt.Unavailable.
func checkKnem(rank int) error {
	return lmt.Check(lmt.Knem, lmt.Peer{Rank: rank})
}

// allowCMA declares, under Yama ptrace_scope 1, that any process may
// attach to this one: what CMA between sibling ranks needs, and what every
// rank running an LMT engine declares too. Without Yama it fails
// harmlessly.
func allowCMA() {
	_ = unix.Prctl(unix.PR_SET_PTRACER, unix.PR_SET_PTRACER_ANY, 0, 0, 0)
}

// pidNamespaceRefusal is the LMT's refusal of CMA toward a rank whose pid
// lives in another PID namespace: its handle carries the namespace, as an
// exposed window's description does, and Check cannot see it (a rank in
// the parent namespace checking a child's pid 1 finds init, and passes).
// No job reaches it yet: nemesis watches its peers by pid, and a rank in a
// child namespace cannot see its parent's ranks, so such a job never
// forms (rank 1 in a new PID namespace waits for rank 0's segment, whose
// creator it finds dead).
func pidNamespaceRefusal(rank, pid int, theirs, ours uint64) error {
	return &lmt.Unavailable{Backend: lmt.CMA, Peer: rank,
		Reason: fmt.Sprintf("the peer runs in another PID namespace (pid:[%d], here pid:[%d]), where its pid %d names another process", theirs, ours, pid),
		Fix:    "start every rank in the same PID namespace"}
}

// knemRegionMissing refuses knem toward a rank that could not declare a
// region of its part, in the LMT's terms.
func knemRegionMissing(rank int) error {
	return &lmt.Unavailable{Backend: lmt.Knem, Peer: rank,
		Reason: fmt.Sprintf("rank %d declared no knem region of its window (its /dev/knem is missing or refused the region)", rank),
		Fix:    "load the knem module where every rank can open it"}
}
