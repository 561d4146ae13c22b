// Package launch starts the processes of a knemesis job on one machine.
//
// A job is N copies of the same binary, each told its rank, the job size and
// the job name through the environment. The launcher re-executes its own
// binary (os.Args[0]), so a test binary or lmtbench can be its own worker:
//
//	if p, ok := launch.Self(); ok {
//		os.Exit(worker(p)) // this process is rank p.Rank of p.Size
//	}
//	err := launch.Run(ctx, launch.Options{Procs: 4})
//
// Each job has a key (package jobkey), drawn by Run and handed to every
// rank in jobkey.Env: the job's identity, from which the names of its shared
// objects derive. Each job has a private directory, [JobDir], where its ranks may keep named
// objects (the FIFOs of the pipe backends). Ranks remove what they made, but
// a killed rank cannot: Run removes the directory with whatever is left in it
// once every rank has exited.
//
// Run waits for every rank. When one rank fails (non-zero exit, signal, or
// the timeout), the others are killed at once and Run returns an *Error naming
// the first rank that failed and how, so that a crashed peer never leaves its
// partners hanging. Children also receive SIGKILL if the launcher dies.
//
// Tests start their ranks with launchtest.Run (package
// nemesis/launch/launchtest), which re-runs only the calling test in each
// child.
package launch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/knemesis/knemesis/jobkey"
)

// Environment variables through which a child learns its place in the job.
const (
	EnvRank = "KNEMESIS_RANK"
	EnvSize = "KNEMESIS_SIZE"
	EnvJob  = "KNEMESIS_JOB"
)

// MaxProcs bounds the size of a job: far more than one machine runs
// usefully, small enough that a typo does not fork-bomb the host.
const MaxProcs = 1024

// Proc is a process's place in its job.
type Proc struct {
	Rank int    // 0 ≤ Rank < Size
	Size int    // number of processes in the job
	Job  string // job name, unique per Run unless the caller chose one
}

// Self reports whether this process was started by the launcher and, if so,
// its place in the job: false when EnvRank is unset (the parent, or a
// process started otherwise). It panics when EnvRank is set but the
// environment is malformed (a rank or size that is not a number, a rank
// outside the job, an empty job name), since a child that went on with a misread rank would
// corrupt the job.
func Self() (Proc, bool) {
	rs, ok := os.LookupEnv(EnvRank)
	if !ok {
		return Proc{}, false
	}
	p, err := parseEnv(rs, os.Getenv(EnvSize), os.Getenv(EnvJob))
	if err != nil {
		panic("launch: " + err.Error())
	}
	return p, true
}

func parseEnv(rank, size, job string) (Proc, error) {
	r, err := strconv.Atoi(rank)
	if err != nil {
		return Proc{}, fmt.Errorf("%s=%q is not a number", EnvRank, rank)
	}
	s, err := strconv.Atoi(size)
	if err != nil {
		return Proc{}, fmt.Errorf("%s=%q is not a number", EnvSize, size)
	}
	if s < 1 || s > MaxProcs || r < 0 || r >= s {
		return Proc{}, fmt.Errorf("rank %d of job size %d is out of range", r, s)
	}
	if job == "" {
		return Proc{}, fmt.Errorf("%s is empty", EnvJob)
	}
	return Proc{Rank: r, Size: s, Job: job}, nil
}

// Options describe a job to start.
type Options struct {
	Procs   int           // number of processes, 1..MaxProcs
	Job     string        // job name; a fresh random one when empty
	Args    []string      // arguments for every child (os.Args[1:] when nil)
	Env     []string      // extra environment for every child
	Timeout time.Duration // kill the job after this long; 0 means no limit
	Stdout  io.Writer     // children's stdout (os.Stdout when nil)
	Stderr  io.Writer     // children's stderr (os.Stderr when nil)
	// Setup, when set, may adjust each child's command before it starts:
	// pass descriptors in ExtraFiles, change credentials or namespaces.
	Setup func(rank int, cmd *exec.Cmd) error
}

// Error says which rank brought the job down and why.
type Error struct {
	Rank   int    // -1 when no single rank is to blame (timeout, cancel)
	Reason string // "exit status 2", "signal: killed", "timeout after 10s", ...
	Err    error  // the underlying error, when there is one
}

func (e *Error) Error() string {
	if e.Rank < 0 {
		return "launch: job failed: " + e.Reason
	}
	return fmt.Sprintf("launch: rank %d failed: %s", e.Rank, e.Reason)
}

func (e *Error) Unwrap() error { return e.Err }

// ErrTimeout is wrapped by the Error returned when Options.Timeout expires.
var ErrTimeout = errors.New("job timed out")

// NewJobName returns a name unlikely to collide with any other job's.
func NewJobName() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on Linux ≥ 3.17
	}
	return "kn-" + hex.EncodeToString(b[:])
}

// JobDir is the private directory of job: $TMPDIR/knemesis-<job>. Ranks
// create it when they need it (mode 0700, so that it belongs to their uid);
// Run removes it when the job ends.
func JobDir(job string) string { return filepath.Join(os.TempDir(), "knemesis-"+job) }

// checkJobName refuses names that would put JobDir outside $TMPDIR, where
// Run would remove what is not the job's.
func checkJobName(job string) error {
	if job == "." || job == ".." || strings.ContainsAny(job, "/\x00") {
		return fmt.Errorf("launch: job name %q is not a single file name (no '/', NUL, '.' or '..')", job)
	}
	return nil
}

// Run starts the job and waits for all of its processes.
func Run(ctx context.Context, o Options) error {
	if o.Procs < 1 || o.Procs > MaxProcs {
		return fmt.Errorf("launch: %d processes requested, want 1..%d", o.Procs, MaxProcs)
	}
	if err := checkJobName(o.Job); err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("launch: cannot find own executable: %w", err)
	}
	if o.Job == "" {
		o.Job = NewJobName()
	}
	if o, err = withKey(o); err != nil {
		return err
	}
	args := o.Args
	if args == nil {
		args = os.Args[1:]
	}
	if o.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Timeout)
		defer cancel()
	}

	// Whatever the ranks left in the job's directory (a FIFO made by a
	// rank killed before its peer opened it) goes with the job.
	defer os.RemoveAll(JobDir(o.Job))
	cmds := make([]*exec.Cmd, o.Procs)
	for rank := range cmds {
		cmd, err := command(exe, args, rank, o)
		if err != nil {
			killAll(cmds[:rank])
			waitAll(cmds[:rank])
			return err
		}
		cmds[rank] = cmd
	}
	return wait(ctx, cmds, o.Timeout)
}

// withKey gives the job a key of its own (package jobkey) in every
// child's environment, unless o.Env already sets one: a key the launcher
// inherited belongs to the job that started it, not to this one.
func withKey(o Options) (Options, error) {
	for _, kv := range o.Env {
		if strings.HasPrefix(kv, jobkey.Env+"=") {
			return o, nil
		}
	}
	k, err := jobkey.New()
	if err != nil {
		return o, fmt.Errorf("launch: %w", err)
	}
	o.Env = append(append([]string(nil), o.Env...), jobkey.Env+"="+k.Encode())
	return o, nil
}

// waitAll reaps ranks already killed, so that none still writes into the
// job's directory when Run removes it.
func waitAll(cmds []*exec.Cmd) {
	for _, c := range cmds {
		if c != nil {
			c.Wait()
		}
	}
}

func command(exe string, args []string, rank int, o Options) (*exec.Cmd, error) {
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), o.Env...)
	cmd.Env = append(cmd.Env,
		EnvRank+"="+strconv.Itoa(rank),
		EnvSize+"="+strconv.Itoa(o.Procs),
		EnvJob+"="+o.Job)
	cmd.Stdout, cmd.Stderr = o.Stdout, o.Stderr
	if cmd.Stdout == nil {
		cmd.Stdout = os.Stdout
	}
	if cmd.Stderr == nil {
		cmd.Stderr = os.Stderr
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if o.Setup != nil {
		if err := o.Setup(rank, cmd); err != nil {
			return nil, fmt.Errorf("launch: setting up rank %d: %w", rank, err)
		}
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("launch: starting rank %d: %w", rank, err)
	}
	return cmd, nil
}

type exit struct {
	rank int
	err  error
}

func wait(ctx context.Context, cmds []*exec.Cmd, timeout time.Duration) error {
	exits := make(chan exit, len(cmds))
	var wg sync.WaitGroup
	for rank, cmd := range cmds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			exits <- exit{rank, cmd.Wait()}
		}()
	}
	var first *Error
	for range cmds {
		var e exit
		select {
		case e = <-exits:
		case <-ctx.Done():
			if first == nil {
				first = timeoutError(ctx, timeout)
			}
			killAll(cmds)
			e = <-exits
		}
		if e.err != nil && first == nil {
			first = &Error{Rank: e.rank, Reason: e.err.Error(), Err: e.err}
			killAll(cmds)
		}
	}
	wg.Wait()
	if first != nil {
		return first
	}
	return nil
}

func timeoutError(ctx context.Context, timeout time.Duration) *Error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) && timeout > 0 {
		return &Error{Rank: -1, Reason: "timeout after " + timeout.String(), Err: ErrTimeout}
	}
	return &Error{Rank: -1, Reason: ctx.Err().Error(), Err: ctx.Err()}
}

func killAll(cmds []*exec.Cmd) {
	for _, c := range cmds {
		if c != nil && c.Process != nil {
			_ = c.Process.Kill() // already exited is fine
		}
	}
}
