package nemesis

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Ranks that share a segment share its file, whatever their mount and IPC
// namespaces: the segment works between them. What does not work across
// namespaces is what names a peer by its process: the liveness checks
// (kill(pid, 0), pidfd_open) need the peer's pid to mean the same process
// here, which it does only in one pid namespace. Each rank publishes the
// inode numbers of its namespaces in its procBlock before its pid; at
// join every rank compares every local peer's with its own, and a
// difference in the pid namespace fails Join with a *NamespaceError that
// names it (Apptainer, enroot and Docker give each container its own
// unless told to share the host's). Across user namespaces liveness
// works, and CMA, whose ptrace rules differ there, falls back by itself
// (its availability check names the user namespace): Join goes on.

// The namespaces a rank publishes, in procBlock.ns.
const (
	nsPID = iota
	nsUser
	nsIPC
	nsMnt
	nsKinds
)

var nsNames = [nsKinds]string{"pid", "user", "ipc", "mnt"}

// nsMustMatch: the namespaces that ranks of one segment must share.
var nsMustMatch = [nsKinds]bool{nsPID: true}

// ErrNamespace is the kind of a *NamespaceError, for errors.Is.
var ErrNamespace = errors.New("nemesis: ranks in different namespaces")

// NamespaceError says that a rank sharing this rank's segment runs in
// another namespace of a kind the job needs shared.
type NamespaceError struct {
	Rank         int    // the peer
	PID          int    // its pid, as it published it (in its own pid namespace)
	Namespace    string // "pid"
	Mine, Theirs uint64 // the namespaces' inode numbers (/proc/PID/ns/<Namespace>)
}

func (e *NamespaceError) Error() string {
	return fmt.Sprintf("nemesis: rank %d (pid %d in its namespace) runs in %s:[%d], this rank in %s:[%d]: process ids differ across %s namespaces, so neither rank can tell by pid whether the other lives, nor reach it with CMA; fix: %s",
		e.Rank, e.PID, e.Namespace, e.Theirs, e.Namespace, e.Mine, e.Namespace, e.Fix())
}

// Is matches ErrNamespace.
func (e *NamespaceError) Is(target error) bool { return target == ErrNamespace }

// Fix says what to do about it.
func (e *NamespaceError) Fix() string {
	return "start the ranks of one node in one container (one apptainer/enroot instance, or docker --pid=host --ipc=host with the same user), or each in the host's " + e.Namespace + " namespace"
}

// namespaces reads this process's namespaces; 0 for one that /proc does
// not show (no /proc mounted): unknown, compared with nothing.
func namespaces() [nsKinds]uint64 {
	var ns [nsKinds]uint64
	for i, name := range nsNames {
		var st unix.Stat_t
		if unix.Stat("/proc/self/ns/"+name, &st) == nil {
			ns[i] = st.Ino
		}
	}
	return ns
}

// creatorVisible says whether the segment's creator runs in this
// process's pid namespace, so that its pid names it here. When it does
// not, its liveness cannot be told by pid: the joiner joins, and the
// check after every rank has joined fails both with a *NamespaceError
// instead of one rank judging the other dead.
func (s *segment) creatorVisible() bool {
	theirs, mine := s.hdr.creatorNS[nsPID], namespaces()[nsPID]
	return theirs == 0 || mine == 0 || theirs == mine
}

// publishNamespaces writes this rank's namespaces into its procBlock; the
// caller publishes its pid after, which makes them visible.
func (s *segment) publishNamespaces(rank int) {
	s.proc(rank).ns = namespaces()
}

// checkNamespaces compares the namespaces of the local peers, all joined,
// with this rank's.
func (ep *Endpoint) checkNamespaces() error {
	mine := ep.seg.proc(ep.rank).ns
	for r := range ep.peers {
		if r == ep.rank || ep.peers[r].net {
			continue
		}
		theirs := ep.seg.proc(r).ns
		for k := range nsKinds {
			if nsMustMatch[k] && mine[k] != 0 && theirs[k] != 0 && mine[k] != theirs[k] {
				return &NamespaceError{Rank: r, PID: ep.peers[r].pid, Namespace: nsNames[k], Mine: mine[k], Theirs: theirs[k]}
			}
		}
	}
	return nil
}
