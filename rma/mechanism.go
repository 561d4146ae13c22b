package rma

import (
	"strconv"
	"strings"
)

// Mechanism is how operations reach a target's part of a window.
type Mechanism uint8

const (
	// Self: the target is this rank; operations are plain copies and
	// CPU atomics.
	Self Mechanism = iota
	// Shared: an allocated window, mapped by every rank: put and get are
	// one user-space copy, atomics CPU atomics on the mapping.
	Shared
	// Knem: an exposed window reached through the target's persistent
	// knem region (cookie and offset): one copy by the kernel.
	Knem
	// CMA: an exposed window reached with process_vm_writev and
	// process_vm_readv (process id and addresses), 4 MiB a call: one
	// copy by the kernel.
	CMA
	// AM: active messages through the Nemesis queues, which the target
	// executes from its progress loop: needs nothing else, costs two
	// copies more, and progresses only while the target polls.
	AM
)

var mechNames = [...]string{Self: "self", Shared: "allocated", Knem: "knem", CMA: "cma", AM: "am"}

func (m Mechanism) String() string {
	if int(m) < len(mechNames) {
		return mechNames[m]
	}
	return "mechanism(" + strconv.Itoa(int(m)) + ")"
}

// ParseMechanism returns the mechanism named s (allocated, knem, cma, am).
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
// an LMT engine reports for the same pair.
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
