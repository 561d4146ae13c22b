package peers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Invocation is the command lines of one sample, exactly as run.
type Invocation struct {
	Env []string // NAME=value given to both processes
	// Server is started first, and the client only once it listens on
	// Port; nil when the client starts both processes (mpirun).
	Server  []string
	Client  []string
	Port    int
	OutFile string // the tool's report, when it writes one; else the client's stdout
}

// String is the invocation as one shell line a user can paste.
func (inv Invocation) String() string {
	prefix := ""
	for _, e := range inv.Env {
		prefix += shellQuote(e) + " "
	}
	client := prefix + shellJoin(inv.Client)
	if inv.Server == nil {
		return client
	}
	return prefix + shellJoin(inv.Server) + " & " + client
}

func shellJoin(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = shellQuote(a)
	}
	return strings.Join(q, " ")
}

func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=,@%+", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Invocation returns the command lines p would run for j.
func (p *Peer) Invocation(j Job) Invocation { return p.invocation(j) }

// Parse reads the tool's report of j, in the tool's own units, into a
// Measurement.
func (p *Peer) Parse(out []byte, j Job) (Measurement, error) { return p.parse(out, j) }

// shmDir is where the per-sample directory of Job.ShmDir is made: the
// tmpfs the stacks use by default, so that their figures are the same.
const shmDir = "/dev/shm"

// termGrace is how long a killed sample's processes have between
// SIGTERM and SIGKILL.
const termGrace = 2 * time.Second

// listenWait bounds how long a server may take to listen: ucx_perftest
// and fi_pingpong do within tens of milliseconds.
const listenWait = 10 * time.Second

// Run measures one sample of j with p and returns it with the command
// lines run. j.Port and j.OutFile are filled in here. ctx bounds the
// sample: on expiry both processes' groups are killed.
func (p *Peer) Run(ctx context.Context, j Job) (Measurement, Invocation, error) {
	if err := p.Missing(); err != nil {
		return Measurement{}, Invocation{}, err
	}
	dir, err := os.MkdirTemp("", "lmtbench-peer-")
	if err != nil {
		return Measurement{}, Invocation{}, err
	}
	defer os.RemoveAll(dir)
	j.OutFile = filepath.Join(dir, "report")
	if j.ShmDir, err = os.MkdirTemp(shmDir, "lmtbench-peer-"); err != nil {
		return Measurement{}, Invocation{}, err
	}
	defer os.RemoveAll(j.ShmDir)
	if j.Port, err = freePort(); err != nil {
		return Measurement{}, Invocation{}, err
	}
	inv := p.invocation(j)
	out, err := inv.run(ctx)
	if err != nil {
		return Measurement{}, inv, fmt.Errorf("%s: %s: %w", p.Name, inv, err)
	}
	m, err := p.parse(out, j)
	if err != nil {
		return Measurement{}, inv, fmt.Errorf("%s: %s: %w", p.Name, inv, err)
	}
	return m, inv, nil
}

// run starts the server (if any), waits until it listens, runs the client
// and returns the report.
func (inv Invocation) run(ctx context.Context) ([]byte, error) {
	var server *proc
	if inv.Server != nil {
		server = start(ctx, inv.Server, inv.Env)
		if server.err != nil {
			return nil, server.err
		}
		defer server.stop()
		if err := waitListen(ctx, inv.Port, server); err != nil {
			return nil, err
		}
	}
	client := start(ctx, inv.Client, inv.Env)
	if client.err != nil {
		return nil, client.err
	}
	if err := client.wait(); err != nil {
		return nil, err
	}
	if server != nil {
		if err := server.wait(); err != nil {
			return nil, fmt.Errorf("server: %w", err)
		}
	}
	if inv.OutFile != "" {
		b, err := os.ReadFile(inv.OutFile)
		if err != nil {
			return nil, fmt.Errorf("the tool wrote no report: %w (stderr %q)", err, lastLine(client.stderr.Bytes()))
		}
		return b, nil
	}
	return client.stdout.Bytes(), nil
}

// proc is one started process, in a process group of its own so that
// the launcher's children die with it.
type proc struct {
	cmd            *exec.Cmd
	ctx            context.Context
	stdout, stderr bytes.Buffer
	done           chan struct{}
	waitErr        error
	err            error // from starting
}

func start(ctx context.Context, argv, env []string) *proc {
	p := &proc{done: make(chan struct{}), ctx: ctx}
	p.cmd = exec.CommandContext(ctx, argv[0], argv[1:]...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// At the deadline the group gets SIGTERM first, so that a launcher
	// tears its job down and its processes unlink what they made; SIGKILL
	// follows for whatever still runs.
	p.cmd.Cancel = func() error {
		pid := p.cmd.Process.Pid
		time.AfterFunc(termGrace, func() { syscall.Kill(-pid, syscall.SIGKILL) })
		return syscall.Kill(-pid, syscall.SIGTERM)
	}
	p.cmd.WaitDelay = termGrace + time.Second
	if p.err = p.cmd.Start(); p.err != nil {
		close(p.done)
		return p
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.done)
	}()
	return p
}

// wait waits for the process and turns a failure into the tool's last
// complaint.
func (p *proc) wait() error {
	<-p.done
	if p.waitErr == nil {
		return nil
	}
	// A launcher that handles the SIGTERM exits with a status of its own.
	if errors.Is(p.ctx.Err(), context.DeadlineExceeded) || p.cmd.ProcessState != nil && !p.cmd.ProcessState.Exited() {
		return fmt.Errorf("%s: %w (killed: the sample ran past its deadline)", p.cmd.Args[0], p.waitErr)
	}
	msg := lastLine(p.stderr.Bytes())
	if msg == "" {
		msg = lastLine(p.stdout.Bytes())
	}
	return fmt.Errorf("%s: %w: %s", p.cmd.Args[0], p.waitErr, msg)
}

// stop kills the process group if it is still running and reaps it.
func (p *proc) stop() {
	select {
	case <-p.done:
	default:
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// waitListen waits until a socket listens on port (read from
// /proc/net/tcp and tcp6: connecting to find out would be taken by the
// server for its client).
func waitListen(ctx context.Context, port int, server *proc) error {
	deadline := time.Now().Add(listenWait)
	for {
		if listening(port) {
			return nil
		}
		select {
		case <-server.done:
			return fmt.Errorf("server exited before listening on port %d: %w", port, server.wait())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("server %s did not listen on port %d within %v", server.cmd.Args[0], port, listenWait)
		}
	}
}

// listening reports whether a TCP socket of this network namespace is in
// LISTEN state on port.
func listening(port int) bool {
	want := fmt.Sprintf(":%04X", port)
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fields := strings.Fields(line)
			// sl local_address rem_address st …; state 0A is LISTEN.
			if len(fields) > 3 && strings.HasSuffix(fields[1], want) && fields[3] == "0A" {
				return true
			}
		}
	}
	return false
}

// freePort asks the kernel for a TCP port nobody uses now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free TCP port: %w", err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return strconv.Atoi(port)
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
