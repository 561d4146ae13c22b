package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/engine"
)

// WorkerArg is the first argument of a rank's command line, so that a
// process listing shows what each lmtbench process is.
const WorkerArg = "rank-worker"

// Run starts a two-rank job of this executable for spec and calls onSample
// for each sample rank 0 reports, in order. timeout bounds the whole job.
func Run(ctx context.Context, spec Spec, timeout time.Duration, onSample func(Sample)) error {
	if err := spec.Validate(); err != nil {
		return err
	}
	b, err := engine.Lookup(spec.Backend)
	if err != nil {
		return err
	}
	if err := b.Check(); err != nil {
		return err
	}
	js, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	files, err := jobFiles(b.SharedBytes(slices.Max(spec.Sizes)))
	if err != nil {
		return err
	}
	defer closeAll(files...)
	// fds 3,4,5 of rank 0: to rank 1, from rank 1, shared; rank 1 mirrored.
	perRank := [2][]*os.File{{files[1], files[2], files[4]}, {files[3], files[0], files[4]}}

	lines := &lineWriter{onLine: func(line []byte) error {
		var s Sample
		if err := json.Unmarshal(line, &s); err != nil {
			return fmt.Errorf("rank 0 wrote %q: %w", line, err)
		}
		onSample(s)
		return nil
	}}
	var stderr lockedBuffer
	err = launch.Run(ctx, launch.Options{
		Procs:   2,
		Args:    []string{WorkerArg, spec.Mode, spec.Backend},
		Env:     []string{EnvSpec + "=" + string(js)},
		Timeout: timeout,
		Stdout:  lines,
		Stderr:  &stderr,
		Setup: func(rank int, cmd *exec.Cmd) error {
			cmd.ExtraFiles = perRank[rank]
			return nil
		},
	})
	if lines.err != nil {
		return lines.err
	}
	if err != nil {
		return jobError(spec, err, stderr.String())
	}
	return nil
}

// jobError turns a failed job into one line: the rank's own complaint when
// it made one, else what the launcher saw.
func jobError(spec Spec, err error, stderr string) error {
	for _, line := range strings.Split(stderr, "\n") {
		if js, ok := strings.CutPrefix(line, unavailablePrefix); ok {
			var u engine.Unavailable
			if json.Unmarshal([]byte(js), &u) == nil && u.Backend != "" {
				return &u
			}
		}
	}
	var le *launch.Error
	if errors.As(err, &le) && errors.Is(le.Err, launch.ErrTimeout) {
		return fmt.Errorf("%s %s: job timed out (a rank hung); raise --timeout if the machine is just slow", spec.Backend, spec.Mode)
	}
	for _, line := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(line, "rank ") {
			return fmt.Errorf("%s %s: %s", spec.Backend, spec.Mode, line)
		}
	}
	first, _, _ := strings.Cut(strings.TrimSpace(stderr), "\n")
	if first != "" {
		return fmt.Errorf("%s %s: %v (%s)", spec.Backend, spec.Mode, err, first)
	}
	return fmt.Errorf("%s %s: %v", spec.Backend, spec.Mode, err)
}

// jobFiles returns two pipes (r01, w01, r10, w10) and a shared memory file
// of the given size.
func jobFiles(shared int) ([]*os.File, error) {
	r01, w01, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	r10, w10, err := os.Pipe()
	if err != nil {
		closeAll(r01, w01)
		return nil, err
	}
	fd, err := unix.MemfdCreate("lmtbench", unix.MFD_CLOEXEC)
	if err != nil {
		closeAll(r01, w01, r10, w10)
		return nil, fmt.Errorf("memfd_create: %w", err)
	}
	mem := os.NewFile(uintptr(fd), "lmtbench-shared")
	if err := mem.Truncate(int64(shared)); err != nil {
		closeAll(r01, w01, r10, w10, mem)
		return nil, fmt.Errorf("sizing %d bytes of shared memory: %w", shared, err)
	}
	return []*os.File{r01, w01, r10, w10, mem}, nil
}

func closeAll(files ...*os.File) {
	for _, f := range files {
		f.Close()
	}
}

// lineWriter calls onLine for each complete line written to it.
type lineWriter struct {
	mu     sync.Mutex
	buf    []byte
	onLine func([]byte) error
	err    error
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := w.buf[:i]
		if w.err == nil && len(bytes.TrimSpace(line)) > 0 {
			w.err = w.onLine(line)
		}
		w.buf = w.buf[i+1:]
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
