package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/knemesis/knemesis/internal/syncbuf"
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
	if spec.Mode != Placement {
		b, err := engine.Lookup(spec.Backend)
		if err != nil {
			return err
		}
		if err := b.Check(); err != nil {
			return err
		}
	}
	js, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	procs := spec.procs()
	perRank, files, err := jobFiles(procs, sharedBytes(spec))
	if err != nil {
		return err
	}
	defer closeAll(files...)

	lines := &lineWriter{onLine: func(line []byte) error {
		var s Sample
		if err := json.Unmarshal(line, &s); err != nil {
			return fmt.Errorf("rank 0 wrote %q: %w", line, err)
		}
		onSample(s)
		return nil
	}}
	var stderr syncbuf.Buffer
	err = launch.Run(ctx, launch.Options{
		Procs:   procs,
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

// jobFiles builds each rank's descriptors for a job of n ranks: one pipe
// from rank 0 down to each other rank, one pipe up to rank 0 that every
// other rank writes (24-byte writes are atomic), and a shared memory file
// of the given size. Rank 0 gets fd 3 = down to rank 1, fd 4 = up, fd 5 =
// shared, fd 6+ = down to ranks 2…; rank k gets fd 3 = up, fd 4 = down
// from rank 0, fd 5 = shared. With two ranks this is a pipe each way.
func jobFiles(n, shared int) (perRank [][]*os.File, all []*os.File, err error) {
	upR, upW, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	all = append(all, upR, upW)
	fd, err := unix.MemfdCreate("lmtbench", unix.MFD_CLOEXEC)
	if err != nil {
		closeAll(all...)
		return nil, nil, fmt.Errorf("memfd_create: %w", err)
	}
	mem := os.NewFile(uintptr(fd), "lmtbench-shared")
	all = append(all, mem)
	if err := mem.Truncate(int64(shared)); err != nil {
		closeAll(all...)
		return nil, nil, fmt.Errorf("sizing %d bytes of shared memory: %w", shared, err)
	}
	perRank = make([][]*os.File, n)
	perRank[0] = []*os.File{nil, upR, mem}
	for k := 1; k < n; k++ {
		downR, downW, err := os.Pipe()
		if err != nil {
			closeAll(all...)
			return nil, nil, err
		}
		all = append(all, downR, downW)
		perRank[k] = []*os.File{upW, downR, mem}
		if k == 1 {
			perRank[0][0] = downW
		} else {
			perRank[0] = append(perRank[0], downW)
		}
	}
	return perRank, all, nil
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
