package rma

import (
	"strconv"
	"strings"

	"github.com/knemesis/knemesis/lmt"
)

// Mechanism is how operations reach a target's part of a window.
type Mechanism uint8

const (
	// Self: the target is this rank; operations are plain copies and
	// CPU atomics.
	Self Mechanism = iota
	// Allocated: a window made by Allocate, mapped by every rank: put
	// and get are one user-space copy, atomics CPU atomics on the
	// mapping.
	Allocated
	// Knem: an exposed window reached through the target's persistent
	// knem region (cookie and offset): one copy by the kernel, one
	// INLINE_COPY system call per operation.
	Knem
	// KnemAttach: an exposed window whose target's knem region is mapped
	// into this process once, at Expose (the module's region attach,
	// GET_INFO feature bit 1): put and get are one user-space copy with
	// no system call, atomics CPU atomics on the target's own pages.
	KnemAttach
	// CMA: an exposed window reached with process_vm_writev and
	// process_vm_readv (process id and addresses), 4 MiB a call: one
	// copy by the kernel.
	CMA
	// AM: active messages through the Nemesis queues, which the target
	// executes from its progress loop: needs nothing else, costs two
	// copies more, and progresses only while the target polls.
	AM
)

// Shared is Allocated's former name, which did not say what it prints.
//
// Deprecated: use Allocated.
const Shared = Allocated

// mechNames is the one table of the mechanisms' names. Knem and CMA are
// named after the LMT backends whose availability checks they share.
var mechNames = [...]string{Self: "self", Allocated: "allocated", Knem: lmt.Knem, KnemAttach: "knem-attach", CMA: lmt.CMA, AM: "am"}

// Mechanisms lists the mechanisms a window's Prefer may name (every one
// but Self), in the order of their names' table.
func Mechanisms() []Mechanism {
	ms := make([]Mechanism, 0, len(mechNames)-1)
	for m := Allocated; int(m) < len(mechNames); m++ {
		ms = append(ms, m)
	}
	return ms
}

func (m Mechanism) String() string {
	if int(m) < len(mechNames) {
		return mechNames[m]
	}
	return "mechanism(" + strconv.Itoa(int(m)) + ")"
}

// ParseMechanism returns the mechanism named s (allocated, knem,
// knem-attach, cma, am).
func ParseMechanism(s string) (Mechanism, error) {
	for m, n := range mechNames {
		if n == s {
			return Mechanism(m), nil
		}
	}
	return 0, errorf(ErrInvalidArg, "no mechanism %q (want one of %s)", s, strings.Join(mechNames[:], ", "))
}

// Route is the mechanism operations toward one target use, with the
// reasons the mechanisms preferred to it were refused, in order: the LMT's
// own *lmt.Unavailable errors (CMA refused under Yama ptrace_scope, another
// user or PID namespace, seccomp; knem module not loaded), the very values
// an LMT engine reports for the same pair. KnemAttach, which the LMT's
// checks do not cover, is refused in the same type: module without region
// attach, or the attach itself failing (its errno in Err).
type Route struct {
	Mechanism Mechanism
	Refused   []error
}

func (r Route) String() string {
	s := r.Mechanism.String()
	for _, err := range r.Refused {
		s += "; refused: " + err.Error()
	}
	return s
}

// direct: this rank reaches the target's part with its own loads and
// stores (a mapping of the target's pages, or its own memory), so put and
// get are one user-space copy and atomics are CPU atomics.
func (m Mechanism) direct() bool { return m == Self || m == Allocated || m == KnemAttach }
