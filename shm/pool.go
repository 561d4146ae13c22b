package shm

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/knemesis/knemesis/internal/fdpass"
	"github.com/knemesis/knemesis/internal/slotpool"
	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/nemesis/launch"
	"golang.org/x/sys/unix"
)

// pool is a rank's slots as one mapping of a memfd: its own, which it
// claims from and releases into, or a sender's, mapped read-only by a
// receiver.
type pool struct {
	fd    int // -1 for a peer's pool (closed once mapped)
	mem   []byte
	slots *slotpool.Pool
}

func poolBytes(n, slotSize int) int { return (slotpool.Size(n, slotSize) + 4095) &^ 4095 }

// poolName is the memfd's name, which /proc/<pid>/maps shows: job and
// rank.
func poolName(job string, rank int) string {
	return "knemesis-" + job + "-lmtpool-" + strconv.Itoa(rank)
}

// poolDir is the directory where rank serves its pool to its receivers
// (fdpass): in the job's private directory (lmt.Config.Dir, by default
// launch.JobDir, which launch.Run removes when the job ends however its
// ranks died), named from the job's key when it has one, so that nobody
// outside the job can guess it. Nothing of it is in /dev/shm.
func poolDir(env *lmt.Env, rank int) string {
	name := "lmtpool-" + strconv.Itoa(rank)
	if !env.Key.IsZero() {
		name += "-" + env.Key.Name("lmt/shm-pool")
	}
	return filepath.Join(jobDir(env), name)
}

func jobDir(env *lmt.Env) string {
	if env.Dir != "" {
		return env.Dir
	}
	return launch.JobDir(env.Job)
}

// poolObject names rank's pool in errors.
func poolObject(rank int) string { return "shm pool of rank " + strconv.Itoa(rank) }

// newPool creates this rank's pool and allocates all of it now, so that a
// machine short of memory fails the Engine's creation (the job's Join)
// rather than a copy with SIGBUS. It is a sealed memfd, not a /dev/shm
// file: it has no name to leave behind however the rank dies, does not
// count against a container's small /dev/shm, and no process can resize it
// under a receiver. Its receivers get it from serve.
func newPool(job string, rank, n, slotSize int) (*pool, error) {
	size := poolBytes(n, slotSize)
	fd, err := fdpass.NewSealed(poolName(job, rank), int64(size))
	if err != nil {
		return nil, fmt.Errorf("lmt: shm pool (not enough memory for this rank's large-message slots? lower lmt.Config.ShmPoolSlots): %w", err)
	}
	p := &pool{fd: fd}
	if p.mem, err = unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("lmt: mapping the shm pool: %w", err)
	}
	if p.slots, err = slotpool.New(p.mem, n, slotSize); err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

// serve hands p to this rank's receivers from poolDir until the backend
// closes. A directory left by a crashed run of the same job and rank is
// replaced.
func (p *pool) serve(env *lmt.Env) (*fdpass.Server, error) {
	dir, object := poolDir(env, env.Rank), poolObject(env.Rank)
	srv, err := listenIn(dir, object)
	if errors.Is(err, os.ErrExist) {
		if _, live := fdpass.Probe(dir); live {
			return nil, fmt.Errorf("lmt: %s: %s is served by a live process of the same job and rank", object, dir)
		}
		if err := fdpass.RemoveDir(dir, object); err != nil {
			return nil, err
		}
		srv, err = listenIn(dir, object)
	}
	if err != nil {
		return nil, fmt.Errorf("lmt: %w", err)
	}
	if err := srv.Serve("pool", p.fd); err != nil {
		srv.Close()
		return nil, err
	}
	return srv, nil
}

// listenIn serves at dir, making the job's directory above it first (0700,
// checked as private): another rank that closes may remove that directory
// once empty, between the two, so try again then.
func listenIn(dir, object string) (*fdpass.Server, error) {
	parent := filepath.Dir(dir)
	for try := 0; ; try++ {
		if err := os.Mkdir(parent, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("the job's directory: %w", err)
		}
		if err := fdpass.CheckDir(parent, "the job's directory"); err != nil {
			return nil, err
		}
		srv, err := fdpass.Listen(dir, object)
		if err == nil || !errors.Is(err, unix.ENOENT) || try == 10 {
			return srv, err
		}
	}
}

// mapPeerPool maps the pool of rank src, which it serves (serve), checked
// by the handover (a sealed memfd of this user, of the size this geometry
// needs) before it is mapped. Unlike a look through /proc/<pid>/fd, this
// needs no ptrace access: it works for non-dumpable senders too.
func mapPeerPool(env *lmt.Env, src, n, slotSize int) (*pool, error) {
	size := poolBytes(n, slotSize)
	f, _, err := fdpass.Fetch(poolDir(env, src), "pool", poolObject(src), fdpass.Want{Size: int64(size)})
	if err != nil {
		return nil, fmt.Errorf("lmt: %w (lmt.Config differs between ranks?)", err)
	}
	defer unix.Close(f)
	mem, err := unix.Mmap(f, 0, size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("lmt: mapping rank %d's shm pool: %w", src, err)
	}
	p := &pool{fd: -1, mem: mem}
	if p.slots, err = slotpool.New(mem, n, slotSize); err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

func (p *pool) close() {
	if p.mem != nil {
		unix.Munmap(p.mem)
		p.mem = nil
	}
	if p.fd >= 0 {
		unix.Close(p.fd)
		p.fd = -1
	}
}
