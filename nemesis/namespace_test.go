package nemesis

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"

	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/nemesis/launch/launchtest"
)

// TestJoinRefusesAnotherPIDNamespace: rank 1 runs in a pid namespace of
// its own, as in a container of its own, sharing /dev/shm with rank 0.
// Neither judges the other dead by a pid that means nothing to it: both
// join, then both fail Join with the *NamespaceError naming the other
// rank and the pid namespace.
func TestJoinRefusesAnotherPIDNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("lacks root: a new pid namespace needs CAP_SYS_ADMIN")
	}
	setup := func(rank int, cmd *exec.Cmd) error {
		if rank == 1 {
			cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWPID
		}
		return nil
	}
	launchtest.RunOpts(t, 2, launchtest.Options{Setup: setup}, func(p launch.Proc) error {
		_, err := Join(p.Job, p.Rank, p.Size, nil)
		var ne *NamespaceError
		if !errors.As(err, &ne) || !errors.Is(err, ErrNamespace) || ne.Rank != 1-p.Rank || ne.Namespace != "pid" ||
			ne.Mine == ne.Theirs || ne.Mine != namespaces()[nsPID] || ne.Fix() == "" {
			return fmt.Errorf("Join with rank %d in another pid namespace: %v, want the *NamespaceError naming it and the pid namespace", 1-p.Rank, err)
		}
		return nil
	})
}
