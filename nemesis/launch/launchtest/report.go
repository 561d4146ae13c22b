package launchtest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// envReport is the descriptor number on which a child writes its reports:
// one end of a SOCK_SEQPACKET socket pair, whose other end the parent reads
// until every rank has closed it.
const envReport = "KNEMESIS_LAUNCHTEST_FD"

// drainTimeout bounds the wait for the report socket's end of file once every
// rank has exited: only a grandchild that inherited the descriptor could
// keep it open.
const drainTimeout = 10 * time.Second

// The events a rank reports.
const (
	eventBegin = "begin" // fn is about to run
	eventEnd   = "end"   // the test ended, neither failed nor skipped
	eventSkip  = "skip"  // the test ended skipped
	// eventProgress: the rank advanced (Progress); it only re-arms the
	// job's deadline.
	eventProgress = "progress"
)

// record is one line a rank writes on the report socket, as one packet:
//
//	launchtest <event> <rank> <call> <test name>
type record struct {
	event string
	rank  int
	call  int
	test  string
}

const recordPrefix = "launchtest"

func (r record) String() string {
	return fmt.Sprintf("%s %s %d %d %s\n", recordPrefix, r.event, r.rank, r.call, r.test)
}

func parseRecord(line string) (record, error) {
	f := strings.SplitN(line, " ", 5)
	if len(f) != 5 || f[0] != recordPrefix {
		return record{}, fmt.Errorf("malformed report %q", line)
	}
	rank, err1 := strconv.Atoi(f[2])
	call, err2 := strconv.Atoi(f[3])
	if err := errors.Join(err1, err2); err != nil {
		return record{}, fmt.Errorf("malformed report %q: %w", line, err)
	}
	switch f[1] {
	case eventBegin, eventEnd, eventSkip, eventProgress:
	default:
		return record{}, fmt.Errorf("report %q: unknown event %q", line, f[1])
	}
	return record{event: f[1], rank: rank, call: call, test: f[4]}, nil
}

// reports is the parent's end of the report socket.
type reports struct {
	r, w    *os.File
	done    chan struct{}
	buf     bytes.Buffer
	err     error
	packets atomic.Uint64 // reports received so far, progress included
}

func newReports() (*reports, error) {
	// A socket, not a pipe: tools/copyprobe counts the bytes written into
	// pipes as copies, and a rank's reports must not add to its count.
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("report socket: %w", err)
	}
	if err := unix.SetNonblock(fds[0], true); err != nil { // for the read deadline
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, fmt.Errorf("report socket: %w", err)
	}
	r := os.NewFile(uintptr(fds[0]), "launchtest-reports")
	w := os.NewFile(uintptr(fds[1]), "launchtest-report")
	rep := &reports{r: r, w: w, done: make(chan struct{})}
	// Read while the job runs: a large job's reports exceed a socket's
	// buffer.
	go func() {
		defer close(rep.done)
		pkt := make([]byte, 64<<10) // a whole packet, however long the test name
		for {
			n, err := r.Read(pkt)
			if n > 0 {
				rep.packets.Add(1)
			}
			if n > 0 && !strings.HasPrefix(string(pkt[:n]), recordPrefix+" "+eventProgress+" ") {
				rep.buf.Write(pkt[:n])
			}
			if err != nil {
				if err != io.EOF {
					rep.err = err
				}
				return
			}
		}
	}()
	return rep, nil
}

// setup hands each rank the socket's write end, after the caller's own Setup
// has added its descriptors.
func (rep *reports) setup(user func(int, *exec.Cmd) error) func(int, *exec.Cmd) error {
	return func(rank int, cmd *exec.Cmd) error {
		if user != nil {
			if err := user(rank, cmd); err != nil {
				return err
			}
		}
		cmd.ExtraFiles = append(cmd.ExtraFiles, rep.w)
		cmd.Env = append(cmd.Env, fmt.Sprintf("%s=%d", envReport, 2+len(cmd.ExtraFiles)))
		return nil
	}
}

// collect returns the records once every rank has exited.
func (rep *reports) collect() ([]record, error) {
	rep.w.Close()
	rep.r.SetReadDeadline(time.Now().Add(drainTimeout))
	<-rep.done
	if rep.err != nil {
		return nil, rep.err
	}
	var recs []record
	for _, line := range strings.Split(strings.TrimSuffix(rep.buf.String(), "\n"), "\n") {
		if line == "" {
			continue
		}
		rec, err := parseRecord(line)
		if err != nil {
			return nil, err
		}
		recs = append(recs, rec)
	}
	return recs, nil
}

func (rep *reports) close() {
	rep.w.Close()
	rep.r.Close()
}

// rankReporter is a child's end of the report socket.
type rankReporter struct{ f *os.File }

var child struct {
	once sync.Once
	rep  rankReporter
	err  error
}

// reporter opens the descriptor the parent passed, once per process, and
// keeps it from the rank's own children.
func reporter() (rankReporter, error) {
	child.once.Do(func() {
		s := os.Getenv(envReport)
		fd, err := strconv.Atoi(s)
		if err != nil || fd < 3 {
			child.err = fmt.Errorf("%s=%q: not started by launchtest.Run's parent", envReport, s)
			return
		}
		unix.CloseOnExec(fd)
		child.rep = rankReporter{os.NewFile(uintptr(fd), "launchtest-report")}
	})
	return child.rep, child.err
}

func (r rankReporter) send(rec record) error {
	if _, err := r.f.WriteString(rec.String()); err != nil {
		return fmt.Errorf("launchtest: rank %d cannot report %q to the parent: %w", rec.rank, rec.event, err)
	}
	return nil
}

// judge checks that every rank began fn and ended its test neither failed
// nor skipped, except the ranks of o.ExitEarly and o.Killed, which must
// begin and must not end; in a job with killed ranks, where the launcher
// kills the others, those need not end either. It names every rank that
// did not, with what the output suggests.
func judge(recs []record, procs, call int, test string, o Options, output string) error {
	type progress struct{ begin, end, skip int }
	ranks := make([]progress, procs)
	var errs []error
	for _, r := range recs {
		if r.rank < 0 || r.rank >= procs || r.call != call || r.test != test {
			errs = append(errs, fmt.Errorf("launchtest: unexpected report %q for call %d of %s", strings.TrimSpace(r.String()), call, test))
			continue
		}
		switch r.event {
		case eventBegin:
			ranks[r.rank].begin++
		case eventEnd:
			ranks[r.rank].end++
		case eventSkip:
			ranks[r.rank].skip++
		}
	}
	for name, list := range map[string][]int{"ExitEarly": o.ExitEarly, "Killed": o.Killed} {
		for _, e := range list {
			if e < 0 || e >= procs {
				errs = append(errs, fmt.Errorf("launchtest: Options.%s names rank %d of a job of %d", name, e, procs))
			}
		}
	}
	for rank, p := range ranks {
		opt := ""
		switch {
		case slices.Contains(o.ExitEarly, rank):
			opt = "ExitEarly"
		case slices.Contains(o.Killed, rank):
			opt = "Killed"
		}
		early := opt != ""
		switch {
		case p.begin > 1:
			errs = append(errs, fmt.Errorf("rank %d began %s %d times", rank, test, p.begin))
		case p.skip > 0:
			errs = append(errs, fmt.Errorf("rank %d skipped %s: a rank may not skip; the parent skips, before launching, and says why", rank, test))
		case p.begin == 0:
			errs = append(errs, fmt.Errorf("rank %d never began the job's function in %s: it skipped before launchtest.Run, its -test.run matched no test, or it exited first", rank, test))
		case early && p.end > 0:
			errs = append(errs, fmt.Errorf("rank %d finished %s, but Options.%s says it exits before fn returns", rank, test, opt))
		case !early && p.end == 0 && len(o.Killed) == 0:
			errs = append(errs, fmt.Errorf("rank %d began %s but never finished it: it exited, with status 0, before its test ended", rank, test))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	if hint := outputHint(output); hint != "" {
		errs = append(errs, errors.New("the ranks' output shows: "+hint))
	}
	return errors.Join(errs...)
}

// outputHint picks from the ranks' output the lines that tell why a rank
// did not report: skips and empty -test.run matches.
func outputHint(output string) string {
	var seen []string
	for _, line := range strings.Split(output, "\n") {
		l := strings.TrimSpace(line)
		if strings.HasPrefix(l, "--- SKIP:") || strings.HasPrefix(l, "testing: warning: no tests to run") {
			seen = append(seen, l)
		}
	}
	return strings.Join(seen, "; ")
}
