package machine

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// ShmDir is where nemesis segments and the shm LMT's rings live.
const ShmDir = "/dev/shm"

// ContainerShmDefault is the /dev/shm Docker and Podman give a container
// unless told otherwise: a job of a few ranks with megabyte messages
// outgrows it, and a tmpfs that fills up answers a store with SIGBUS.
const ContainerShmDefault = 64 << 20

// Shm is what statfs(2) says of /dev/shm.
type Shm struct {
	Tmpfs    bool
	ReadOnly bool
	Size     uint64 // bytes
	Free     uint64 // bytes an unprivileged process may still use
}

// StatShm reads /dev/shm.
func StatShm() (Shm, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(ShmDir, &st); err != nil {
		return Shm{}, fmt.Errorf("%s: %w", ShmDir, err)
	}
	return Shm{
		Tmpfs:    st.Type == unix.TMPFS_MAGIC,
		ReadOnly: st.Flags&unix.ST_RDONLY != 0,
		Size:     st.Blocks * uint64(st.Bsize),
		Free:     st.Bavail * uint64(st.Bsize),
	}, nil
}

// SetupProblem is something a site's setup gets wrong, with the reason
// and the fix.
type SetupProblem struct {
	What, Reason, Fix string
}

func (p *SetupProblem) Error() string { return p.What + ": " + p.Reason + " — " + p.Fix }

// Check returns a *SetupProblem when /dev/shm cannot hold knemesis's
// jobs: missing, read-only, not memory, or no larger than a container's
// default. nemesis.Join checks the exact size a job needs; this is the
// site-wide look of lmtbench info.
func (s Shm) Check() error {
	const fix = "give the container a larger /dev/shm (docker/podman run --shm-size=1g; Kubernetes: an emptyDir with medium Memory mounted there) or mount -o remount,size=1g " + ShmDir
	switch {
	case s.ReadOnly:
		return &SetupProblem{ShmDir, "mounted read-only: no segment can be created", fix}
	case !s.Tmpfs:
		return &SetupProblem{ShmDir, "not a tmpfs: segments there would be written back to a disk", "mount a tmpfs on " + ShmDir + " (mount -t tmpfs -o size=1g tmpfs " + ShmDir + ")"}
	case s.Size <= ContainerShmDefault:
		return &SetupProblem{ShmDir, fmt.Sprintf("%s, a container's default: a job whose segment and rings outgrow it fails at nemesis.Join (or, for a program that skips the check, with SIGBUS when the tmpfs fills)", mib(s.Size)), fix}
	}
	return nil
}

// String is the line of lmtbench info.
func (s Shm) String() string {
	kind := "tmpfs"
	if !s.Tmpfs {
		kind = "not tmpfs"
	}
	return fmt.Sprintf("%s, %s, %s free", kind, mib(s.Size), mib(s.Free))
}

func mib(n uint64) string {
	if n >= 1<<30 && n%(1<<30) == 0 {
		return fmt.Sprintf("%d GiB", n>>30)
	}
	return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20))
}
