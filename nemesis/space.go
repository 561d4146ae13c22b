package nemesis

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// SpaceError says that the directory of the segment (a tmpfs, /dev/shm by
// default) cannot hold it. Join returns it instead of letting a rank die of
// SIGBUS when it first touches a page the tmpfs cannot supply.
type SpaceError struct {
	Dir  string
	Need uint64 // bytes the job's segment takes (SegmentSize)
	Free uint64 // bytes free in Dir when Join looked
	// Arena is the part of Need that the shared arena takes
	// (Options.ArenaSize × ranks).
	Arena uint64
}

func (e *SpaceError) Error() string {
	arena := ""
	if e.Arena > 0 {
		arena = fmt.Sprintf(" (%s of it the shared arena)", sizeString(e.Arena))
	}
	return fmt.Sprintf("%v: the segment of this job needs %s%s in %s, which has %s free; "+
		"give it more (docker run --shm-size=%s, or mount -o remount,size=... %s) or shrink the job (fewer ranks, Options.Cells, Options.Fastboxes, Options.ArenaSize)",
		ErrNoSpace, sizeString(e.Need), arena, e.Dir, sizeString(e.Free), shmSizeFlag(e.Need), e.Dir)
}

func (e *SpaceError) Unwrap() error { return ErrNoSpace }

// SegmentSize returns how many bytes of shared memory the segment of a job
// of size ranks with options o takes: all of it is reserved when rank 0
// creates the segment, and it does not grow afterwards. (An LMT maps its
// own memory on top: see its package.)
func SegmentSize(size int, o *Options) (uint64, error) {
	if size < 1 || size > MaxProcs {
		return 0, errorf(ErrInvalidArg, "job size %d, want 1..%d", size, MaxProcs)
	}
	if o == nil {
		o = &Options{}
	}
	l := o.layout(size)
	if err := l.check(); err != nil {
		return 0, err
	}
	_, _, _, _, n := l.offsets()
	return n, nil
}

// checkSpace refuses, before anything is created, a segment larger than
// what dir has free.
func checkSpace(dir string, size, arena uint64) error {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return fmt.Errorf("nemesis: statfs %s: %w", dir, err)
	}
	if free := st.Bavail * uint64(st.Bsize); size > free {
		return &SpaceError{Dir: dir, Need: size, Free: free, Arena: arena}
	}
	return nil
}

// freeIn is the free space of dir, for a SpaceError when the segment's
// memory could not be allocated (fdpass.NewSealed allocates it whole, so
// that a machine short of memory fails this Join rather than a later
// access with SIGBUS).
func freeIn(dir string) uint64 {
	var st unix.Statfs_t
	_ = unix.Statfs(dir, &st)
	return st.Bavail * uint64(st.Bsize)
}

func sizeString(n uint64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// shmSizeFlag suggests a --shm-size comfortably above need, in whole MiB.
func shmSizeFlag(need uint64) string {
	return fmt.Sprintf("%dm", 2*((need+(1<<20)-1)>>20)+64)
}
