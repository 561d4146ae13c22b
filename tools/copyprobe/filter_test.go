package copyprobe_test

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/knemesis/knemesis/internal/memcopy"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/tools/copyprobe"
)

// A noise process makes copies of both kinds outside the job: per round, a
// pipe transfer of noiseSize through itself and two memcopy.Copy calls of
// noiseSize.
const (
	envNoise  = "COPYPROBE_TEST_NOISE"
	noiseSize = 8 << 20
)

func noiseMain() int {
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if err := noiseRound(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if _, err := os.Stdout.WriteString("done\n"); err != nil {
			return 1
		}
	}
	return 0
}

func noiseRound() error {
	r, w, err := newPipe(1 << 20)
	if err != nil {
		return err
	}
	defer r.Close()
	src := payload(noiseSize, 5)
	wrote := make(chan error, 1)
	go func() {
		_, err := w.Write(src)
		w.Close()
		wrote <- err
	}()
	dst := make([]byte, noiseSize)
	if _, err := io.ReadFull(r, dst); err != nil {
		return err
	}
	// The reader can finish before the writer's write(2) has returned;
	// waiting for it means its sys_exit has counted before "done" is sent.
	if err := <-wrote; err != nil {
		return err
	}
	memcopy.Copy(dst, src)
	memcopy.Copy(src, dst)
	return nil
}

type noiseProc struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

func startNoise(t *testing.T) *noiseProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envNoise+"=1")
	cmd.Stderr = os.Stderr
	// Rounds are started and acknowledged over a socket, outside the
	// syscall model and fentry's hooks: a pipe's "done" would be counted at
	// the writer's sys_exit, which can come after the parent has read it.
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "noise-ctl"), os.NewFile(uintptr(fds[1]), "noise-ctl-child")
	cmd.Stdin, cmd.Stdout = theirs, theirs
	err = cmd.Start()
	theirs.Close()
	if err != nil {
		ours.Close()
		t.Fatal(err)
	}
	in := ours
	n := &noiseProc{cmd: cmd, in: in, out: bufio.NewReader(ours)}
	t.Cleanup(func() {
		in.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		if err := <-done; err != nil {
			t.Errorf("noise process: %v", err)
		}
	})
	return n
}

// round makes the noise process do one round and waits for it.
func (n *noiseProc) round(t *testing.T) {
	t.Helper()
	if _, err := io.WriteString(n.in, "go\n"); err != nil {
		t.Fatalf("starting a noise round: %v", err)
	}
	line, err := n.out.ReadString('\n')
	if err != nil || line != "done\n" {
		t.Fatalf("noise round: %q, %v", line, err)
	}
}

// ownCopies makes copies in the test process itself, which the probes
// follow the children of but do not count.
func ownCopies(t *testing.T) {
	t.Helper()
	if err := noiseRound(); err != nil {
		t.Fatal(err)
	}
}

func TestPidFilterExcludesOtherProcesses(t *testing.T) {
	var noise *noiseProc
	if _, child := launch.Self(); !child {
		noise = startNoise(t)
		// The probes follow the test process's children; this one is
		// taken out of the job.
		for _, p := range sharedProbes(t) {
			if err := p.Untrack(noise.cmd.Process.Pid); err != nil {
				t.Fatal(err)
			}
		}
	}
	m, ok := run(t, job{
		files: pipePair(1 << 20),
		during: func(t *testing.T) {
			noise.round(t)
			ownCopies(t)
		},
		rank: func(p launch.Proc) error {
			if p.Rank == 0 {
				return pipeWrite(extraFile(0), 6)
			}
			return pipeRead(extraFile(0), 6)
		},
	})
	if !ok {
		return
	}
	check(t, m.Tracepoint, copyprobe.ModeTracepoint, expect{kernel: 2})
	if m.Tracepoint.Bytes.Kernel != 2*transferSize || m.Tracepoint.Bytes.User != 0 {
		t.Errorf("counted kernel %d, user %d bytes; want the job's 2 × %d and 0: other processes leaked in",
			m.Tracepoint.Bytes.Kernel, m.Tracepoint.Bytes.User, transferSize)
	}

	// The same noise, tracked, is counted: the filter, not blindness,
	// kept it out above.
	p := m.probes[0]
	if err := p.Reset(); err != nil {
		t.Fatal(err)
	}
	if err := p.Track(noise.cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	defer p.Untrack(noise.cmd.Process.Pid)
	noise.round(t)
	r, err := p.Read()
	if err != nil {
		t.Fatal(err)
	}
	if r.Bytes.Kernel != 2*noiseSize || r.Bytes.User != 2*noiseSize {
		t.Errorf("tracked noise counted kernel %d, user %d bytes; want %d and %d",
			r.Bytes.Kernel, r.Bytes.User, 2*noiseSize, 2*noiseSize)
	}
}
