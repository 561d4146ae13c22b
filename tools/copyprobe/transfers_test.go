package copyprobe_test

// Reference transfers written with the raw mechanisms, so that the probes
// are checked against transfers whose copy counts are known from the
// kernel's source, independently of the LMT backends. Each runs in a rank
// of a two-process launchtest job; the descriptors arrive as fd 3, 4, ...
// (exec.Cmd.ExtraFiles).

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/knemesis/knemesis/internal/memcopy"
)

// transferSize is the payload of every reference transfer.
const transferSize = 16 << 20

// payload returns n deterministic bytes, the same in every rank, built
// without memcopy.Copy so that only the transfer itself counts as user
// copies.
func payload(n int, seed uint64) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	for i := 0; i+8 <= n; i += 8 {
		binary.LittleEndian.PutUint64(b[i:], r.Uint64())
	}
	return b
}

func checkPayload(got []byte, seed uint64) error {
	want := payload(len(got), seed)
	if !bytes.Equal(got, want) {
		return fmt.Errorf("received payload differs: sha256 %x, want %x", sha256.Sum256(got), sha256.Sum256(want))
	}
	return nil
}

// extraFile returns the i-th descriptor passed by the parent.
func extraFile(i int) *os.File { return os.NewFile(uintptr(3+i), fmt.Sprintf("extra-%d", i)) }

// pipeWrite writes the payload into the pipe with write(2): one kernel copy.
func pipeWrite(w *os.File, seed uint64) error {
	if _, err := w.Write(payload(transferSize, seed)); err != nil {
		return fmt.Errorf("writing into the pipe: %w", err)
	}
	return w.Close()
}

// pipeRead reads the payload with read(2): one kernel copy.
func pipeRead(r *os.File, seed uint64) error {
	buf := make([]byte, transferSize)
	if _, err := io.ReadFull(r, buf); err != nil {
		return fmt.Errorf("reading from the pipe: %w", err)
	}
	return checkPayload(buf, seed)
}

// vmspliceSend maps the payload's pages into the pipe: no copy. The pages
// stay referenced by the pipe after this process exits, so the receiver
// reads them intact.
func vmspliceSend(w *os.File, seed uint64) error {
	defer w.Close() // also keeps w, and so its fd, from the finalizer
	buf := payload(transferSize, seed)
	fd := int(w.Fd())
	for off := 0; off < len(buf); {
		end := min(off+1<<20, len(buf))
		iov := []unix.Iovec{{Base: &buf[off]}}
		iov[0].SetLen(end - off)
		n, err := unix.Vmsplice(fd, iov, 0)
		if err == unix.EINTR || err == unix.EAGAIN {
			continue
		}
		if err != nil {
			return fmt.Errorf("vmsplice at offset %d: %w", off, err)
		}
		off += n
	}
	runtime.KeepAlive(buf)
	return nil
}

// readvReceive reads the vmspliced pages with readv(2): the one copy.
func readvReceive(r *os.File, seed uint64) error {
	defer r.Close() // also keeps r, and so its fd, from the finalizer
	buf := make([]byte, transferSize)
	fd := int(r.Fd())
	for off := 0; off < len(buf); {
		end := min(off+1<<20, len(buf))
		n, err := unix.Readv(fd, [][]byte{buf[off:end]})
		if err == unix.EINTR || err == unix.EAGAIN {
			continue
		}
		if err != nil {
			return fmt.Errorf("readv at offset %d: %w", off, err)
		}
		if n == 0 {
			return fmt.Errorf("pipe closed after %d of %d bytes", off, len(buf))
		}
		off += n
	}
	return checkPayload(buf, seed)
}

// cmaExpose publishes the payload's address and pid on ctl (16 bytes) and
// keeps the buffer alive until the reader acknowledges on ack (1 byte).
// These 17 control bytes cross pipes: 34 bytes of kernel copies.
func cmaExpose(ctl, ack *os.File, seed uint64) error {
	buf := payload(transferSize, seed)
	var msg [16]byte
	binary.LittleEndian.PutUint64(msg[0:], uint64(os.Getpid()))
	binary.LittleEndian.PutUint64(msg[8:], uint64(uintptr(unsafe.Pointer(&buf[0]))))
	if _, err := ctl.Write(msg[:]); err != nil {
		return fmt.Errorf("publishing the buffer: %w", err)
	}
	var done [1]byte
	if _, err := io.ReadFull(ack, done[:]); err != nil {
		return fmt.Errorf("waiting for the reader: %w", err)
	}
	runtime.KeepAlive(buf)
	return nil
}

// cmaControlBytes is what cmaExpose and cmaRead move through pipes, each
// byte copied once by write and once by read.
const cmaControlBytes = 2 * (16 + 1)

// cmaRead copies the peer's buffer with process_vm_readv: one kernel copy.
func cmaRead(ctl, ack *os.File, seed uint64) error {
	var msg [16]byte
	if _, err := io.ReadFull(ctl, msg[:]); err != nil {
		return fmt.Errorf("reading the peer's address: %w", err)
	}
	pid := int(binary.LittleEndian.Uint64(msg[0:]))
	addr := uintptr(binary.LittleEndian.Uint64(msg[8:]))
	buf := make([]byte, transferSize)
	for off := 0; off < len(buf); {
		local := []unix.Iovec{{Base: &buf[off]}}
		local[0].SetLen(len(buf) - off)
		remote := []unix.RemoteIovec{{Base: addr + uintptr(off), Len: len(buf) - off}}
		n, err := unix.ProcessVMReadv(pid, local, remote, 0)
		if err != nil {
			return fmt.Errorf("process_vm_readv at offset %d: %w", off, err)
		}
		if n == 0 {
			return fmt.Errorf("process_vm_readv copied nothing at offset %d", off)
		}
		off += n
	}
	if _, err := ack.Write([]byte{1}); err != nil {
		return fmt.Errorf("acknowledging: %w", err)
	}
	return checkPayload(buf, seed)
}

// The shared double buffer: two slots, each with a state word, in one
// memfd mapped by both ranks. The sender copies a chunk in with
// memcopy.Copy, the receiver copies it out: two user copies per byte.
const (
	shmSlot      = 1 << 20
	shmHeader    = 4096
	shmSize      = shmHeader + 2*shmSlot
	shmWaitLimit = 30 * time.Second
)

func newShm() (*os.File, error) {
	fd, err := unix.MemfdCreate("copyprobe-test", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), "copyprobe-shm")
	if err := f.Truncate(shmSize); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

type shmRing struct {
	mem   []byte
	state [2]*atomic.Uint32 // 0 empty, 1 full
}

func mapShm(f *os.File) (*shmRing, error) {
	mem, err := unix.Mmap(int(f.Fd()), 0, shmSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap of the shared buffer: %w", err)
	}
	r := &shmRing{mem: mem}
	for i := range r.state {
		r.state[i] = (*atomic.Uint32)(unsafe.Pointer(&mem[i*64]))
	}
	return r, nil
}

func (r *shmRing) slot(i int) []byte { return r.mem[shmHeader+i*shmSlot : shmHeader+(i+1)*shmSlot] }

// await spins until the slot reaches state, yielding the CPU (two vCPUs,
// shared with other jobs), and gives up after shmWaitLimit: a dead peer
// must fail the test, not hang it.
func (r *shmRing) await(i int, state uint32) error {
	deadline := time.Now().Add(shmWaitLimit)
	for spins := 0; r.state[i].Load() != state; spins++ {
		runtime.Gosched()
		if spins%1024 == 0 && time.Now().After(deadline) {
			return fmt.Errorf("slot %d did not reach state %d in %v", i, state, shmWaitLimit)
		}
	}
	return nil
}

func shmSend(f *os.File, seed uint64) error {
	r, err := mapShm(f)
	if err != nil {
		return err
	}
	defer unix.Munmap(r.mem)
	src := payload(transferSize, seed)
	for k, off := 0, 0; off < len(src); k, off = k+1, off+shmSlot {
		i := k % 2
		if err := r.await(i, 0); err != nil {
			return err
		}
		memcopy.Copy(r.slot(i), src[off:])
		r.state[i].Store(1)
	}
	return nil
}

func shmReceive(f *os.File, seed uint64) error {
	r, err := mapShm(f)
	if err != nil {
		return err
	}
	defer unix.Munmap(r.mem)
	dst := make([]byte, transferSize)
	for k, off := 0, 0; off < len(dst); k, off = k+1, off+shmSlot {
		i := k % 2
		if err := r.await(i, 1); err != nil {
			return err
		}
		memcopy.Copy(dst[off:], r.slot(i))
		r.state[i].Store(0)
	}
	return checkPayload(dst, seed)
}

// newPipe returns a pipe whose buffer holds size bytes, so that big
// transfers need few wake-ups.
func newPipe(size int) (r, w *os.File, err error) {
	r, w, err = os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	if _, err := unix.FcntlInt(w.Fd(), unix.F_SETPIPE_SZ, size); err != nil {
		r.Close()
		w.Close()
		return nil, nil, fmt.Errorf("F_SETPIPE_SZ %d: %w", size, err)
	}
	return r, w, nil
}

var errUnknownRank = errors.New("unknown rank")
