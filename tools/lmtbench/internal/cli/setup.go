package cli

import (
	"fmt"
	"io"

	"github.com/knemesis/knemesis/tools/lmtbench/internal/machine"
)

// writeShm prints the /dev/shm line of lmtbench info: its size and free
// space, and what is wrong with it for knemesis's jobs, with the fix.
// The other setup faults (/dev/knem's mode or group, a module of another
// ABI, CMA refused by Yama or seccomp) are the backends' own checks,
// printed with their reason and fix in the backends' list.
func writeShm(w io.Writer) {
	s, err := machine.StatShm()
	if err != nil {
		fmt.Fprintf(w, "/dev/shm:  missing (%v) — the shm backend and nemesis segments need a tmpfs there (mount -t tmpfs -o size=1g tmpfs /dev/shm)\n", err)
		return
	}
	fmt.Fprintf(w, "/dev/shm:  %s", s)
	if err := s.Check(); err != nil {
		p := err.(*machine.SetupProblem)
		fmt.Fprintf(w, " — %s — %s", p.Reason, p.Fix)
	}
	fmt.Fprintln(w)
}
