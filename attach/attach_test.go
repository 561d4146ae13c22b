package attach_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/knemesis/knemesis/attach"
	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/lmt/lmttest"
	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/nemesis/launch/launchtest"
	_ "github.com/knemesis/knemesis/pipe"
	"github.com/knemesis/knemesis/threshold"
	_ "github.com/knemesis/knemesis/vmsplice"
	"golang.org/x/sys/unix"
)

var all = []string{"shm", "cma", "cma-write", "cma-split", "multirail", "pipe", "vmsplice"}

func join(p launch.Proc, o attach.Options) (*nemesis.Endpoint, *attach.LMT, error) {
	ep, err := nemesis.JoinProc(p, nil)
	if err != nil {
		return nil, nil, err
	}
	l, err := attach.Attach(ep, o)
	if err != nil {
		return nil, nil, err
	}
	return ep, l, nil
}

// farewell tells peer that this rank is done and waits until peer says the
// same. A rank must not exit while its peer may still send to it: a send
// to a rank whose endpoint is gone fails (nemesis' fault rules), so a
// test's last Send alone would race the peer's exit.
func farewell(ep *nemesis.Endpoint, peer int) error {
	const tag = 99
	if err := ep.Send(peer, tag, nil); err != nil {
		return err
	}
	_, err := ep.Recv(peer, tag, nil)
	return err
}

// TestSendRecv: Endpoint.Send and Recv use the LMT above the eager limit,
// with the backend forced per endpoint, and eager messages stay eager.
func TestSendRecv(t *testing.T) {
	for _, b := range all {
		t.Run(b, func(t *testing.T) {
			launchtest.Run(t, 2, func(p launch.Proc) error {
				ep, l, err := join(p, attach.Options{Prefer: []string{b}})
				if err != nil {
					return err
				}
				defer ep.Close()
				defer l.Close()
				sizes := []int{0, 100, attach.DefaultEagerMax, attach.DefaultEagerMax + 1, 1 << 20, 16<<20 + 3}
				for i, n := range sizes {
					if p.Rank == 0 {
						if err := ep.Send(1, i, lmttest.Message(n, i)); err != nil {
							return fmt.Errorf("send %d bytes: %w", n, err)
						}
						continue
					}
					buf := make([]byte, n)
					var r nemesis.Request
					if err := ep.Irecv(&r, 0, i, buf); err != nil {
						return err
					}
					if err := ep.Wait(&r); err != nil {
						return fmt.Errorf("recv %d bytes: %w", n, err)
					}
					if st := r.Status(); st.Count != n {
						return fmt.Errorf("recv %d bytes: status %+v", n, st)
					}
					if err := lmttest.Check(buf, i); err != nil {
						return fmt.Errorf("recv %d bytes: %w", n, err)
					}
					st, viaLMT := attach.Stats(&r)
					if viaLMT != (n > attach.DefaultEagerMax) || viaLMT && (st.Backend != b || st.Bytes != int64(n)) {
						return fmt.Errorf("recv %d bytes: LMT %v, stats %+v; want LMT only above %d bytes, via %s", n, viaLMT, st, attach.DefaultEagerMax, b)
					}
				}
				return farewell(ep, 1-p.Rank)
			})
		})
	}
}

// TestForcePerMessage: LMT.Isend picks the backend of one message.
func TestForcePerMessage(t *testing.T) {
	launchtest.Run(t, 2, func(p launch.Proc) error {
		ep, l, err := join(p, attach.Options{})
		if err != nil {
			return err
		}
		defer ep.Close()
		defer l.Close()
		const n = 1<<20 + 7
		reqs := make([]nemesis.Request, len(all))
		bufs := make([][]byte, len(all))
		for i, b := range all {
			if p.Rank == 0 {
				bufs[i] = lmttest.Message(n, i)
				if err := l.Isend(&reqs[i], 1, i, bufs[i], b); err != nil {
					return err
				}
			} else {
				bufs[i] = make([]byte, n)
				if err := ep.Irecv(&reqs[i], 0, i, bufs[i]); err != nil {
					return err
				}
			}
		}
		for i, b := range all {
			if err := ep.Wait(&reqs[i]); err != nil {
				return fmt.Errorf("%s: %w", b, err)
			}
			st, ok := attach.Stats(&reqs[i])
			if !ok || st.Backend != b {
				return fmt.Errorf("message %d went via %+v, want %s", i, st, b)
			}
			if p.Rank == 1 {
				if err := lmttest.Check(bufs[i], i); err != nil {
					return fmt.Errorf("%s: %w", b, err)
				}
			}
		}
		return farewell(ep, 1-p.Rank)
	})
}

// adaptive is threshold's learning selector over shm, cma and vmsplice,
// exploring often.
func adaptive(t *testing.T) *threshold.Adaptive {
	table := &threshold.Table{LMTMin: threshold.Threshold{Bytes: 64 << 10},
		Rules: []threshold.Rule{{From: 64 << 10, Backend: threshold.Shm}}}
	a, err := threshold.NewAdaptive(table, []threshold.Backend{threshold.CMA, threshold.Vmsplice})
	if err != nil {
		t.Fatal(err)
	}
	a.ExploreEvery, a.ExploreBytes = 4, 0
	return a
}

// rotation is a Selector that sends the messages of one size by each
// backend in turn and records what it is told.
type rotation struct {
	backends []string
	next     int
	seen     []observation
}

type observation struct {
	backend string
	size    int64
	elapsed time.Duration
}

func (s *rotation) Backend(size int64) string {
	b := s.backends[s.next%len(s.backends)]
	s.next++
	return b
}

func (s *rotation) Observe(backend string, size int64, elapsed time.Duration) {
	s.seen = append(s.seen, observation{backend, size, elapsed})
}

// TestSelector: Options.Select's selector picks the backend of every
// message Isend does not force, through plain Endpoint.Send, and hears of
// each completed send with its backend, size and a positive duration.
func TestSelector(t *testing.T) {
	launchtest.Run(t, 2, func(p launch.Proc) error {
		sel := &rotation{backends: []string{"cma", "shm", "vmsplice"}}
		ep, l, err := join(p, attach.Options{Select: func(peer int) attach.Selector {
			if peer != 1-p.Rank {
				panic(fmt.Sprintf("selector asked for rank %d", peer))
			}
			return sel
		}})
		if err != nil {
			return err
		}
		defer ep.Close()
		defer l.Close()
		const n = 300<<10 + 1
		var forced nemesis.Request
		for i := range 7 {
			var err error
			var st lmt.Stats
			if p.Rank == 0 {
				if i == 6 {
					// A forced backend wins over the selector.
					if err = l.Isend(&forced, 1, i, lmttest.Message(n, i), "pipe"); err == nil {
						err = ep.Wait(&forced)
					}
					st, _ = attach.Stats(&forced)
					if err == nil && st.Backend != "pipe" {
						err = fmt.Errorf("forced message went via %s", st.Backend)
					}
				} else {
					var r nemesis.Request
					if err = ep.Isend(&r, 1, i, lmttest.Message(n, i)); err == nil {
						err = ep.Wait(&r)
					}
					st, _ = attach.Stats(&r)
					if want := sel.backends[i%3]; err == nil && st.Backend != want {
						err = fmt.Errorf("message %d went via %s, want the selector's %s", i, st.Backend, want)
					}
				}
			} else {
				buf := make([]byte, n)
				if _, err = ep.Recv(0, i, buf); err == nil {
					err = lmttest.Check(buf, i)
				}
			}
			if err != nil {
				return err
			}
		}
		if p.Rank == 1 {
			if len(sel.seen) != 0 || sel.next != 0 {
				return fmt.Errorf("receiver's selector used: %d choices, %v", sel.next, sel.seen)
			}
			return ep.Send(0, 99, nil)
		}
		if _, err := ep.Recv(1, 99, nil); err != nil {
			return err
		}
		if sel.next != 6 || len(sel.seen) != 7 {
			return fmt.Errorf("selector chose %d times and heard of %d sends, want 6 and 7", sel.next, len(sel.seen))
		}
		for i, o := range sel.seen {
			want := sel.backends[i%3]
			if i == 6 {
				want = "pipe"
			}
			if o.backend != want || o.size != n || o.elapsed <= 0 {
				return fmt.Errorf("observation %d: %+v, want %s, %d bytes, elapsed > 0", i, o, want, n)
			}
		}
		return nil
	})
}

// TestSmallMessagesFlow: while 64 MiB move through each backend, 200 small
// messages sent after it arrive in order, and the first ones arrive before
// the large transfer has finished.
func TestSmallMessagesFlow(t *testing.T) {
	for _, b := range all {
		t.Run(b, func(t *testing.T) {
			launchtest.Run(t, 2, func(p launch.Proc) error {
				ep, l, err := join(p, attach.Options{Prefer: []string{b}})
				if err != nil {
					return err
				}
				defer ep.Close()
				defer l.Close()
				const big, small = 64 << 20, 200
				var large nemesis.Request
				if p.Rank == 0 {
					if err := ep.Isend(&large, 1, 0, lmttest.Message(big, 5)); err != nil {
						return err
					}
					for i := 0; i < small; i++ {
						if err := ep.Send(1, 1, []byte(fmt.Sprint(i))); err != nil {
							return err
						}
					}
					return ep.Wait(&large)
				}
				buf := make([]byte, big)
				if err := ep.Irecv(&large, 0, 0, buf); err != nil {
					return err
				}
				beforeLarge := 0
				for i := 0; i < small; i++ {
					m := make([]byte, 16)
					st, err := ep.Recv(0, 1, m)
					if err != nil {
						return err
					}
					if got := string(m[:st.Count]); got != fmt.Sprint(i) {
						return fmt.Errorf("small message %d reads %q", i, got)
					}
					if !large.Done() {
						beforeLarge++
					}
				}
				if beforeLarge == 0 {
					return errors.New("no small message arrived while the large transfer was in flight")
				}
				if err := ep.Wait(&large); err != nil {
					return err
				}
				fmt.Printf("%s: %d of %d small messages arrived during the 64 MiB transfer\n", b, beforeLarge, small)
				return lmttest.Check(buf, 5)
			})
		})
	}
}

// TestTruncated: a short receive buffer ends with nemesis.ErrTruncated, the
// buffer filled, and the sender finishes normally.
func TestTruncated(t *testing.T) {
	for _, b := range all {
		t.Run(b, func(t *testing.T) {
			launchtest.Run(t, 2, func(p launch.Proc) error {
				ep, l, err := join(p, attach.Options{Prefer: []string{b}})
				if err != nil {
					return err
				}
				defer ep.Close()
				defer l.Close()
				const n, short = 3 << 20, 3<<20 - 4097
				if p.Rank == 0 {
					if err := ep.Send(1, 0, lmttest.Message(n, 9)); err != nil {
						return fmt.Errorf("send: %w", err)
					}
					_, err := ep.Recv(1, 1, nil)
					return err
				}
				mem := make([]byte, short+64)
				for i := range mem {
					mem[i] = 0xA5
				}
				st, err := ep.Recv(0, 0, mem[:short])
				if !errors.Is(err, nemesis.ErrTruncated) || st.Count != short {
					return fmt.Errorf("recv: %v, %+v; want ErrTruncated with %d bytes", err, st, short)
				}
				if err := lmttest.Check(mem[:short], 9); err != nil {
					return err
				}
				for i := short; i < len(mem); i++ {
					if mem[i] != 0xA5 {
						return fmt.Errorf("byte %d past the buffer written", i-short)
					}
				}
				return ep.Send(0, 1, nil)
			})
		})
	}
}

// TestPeerDies: the receiver exits in the middle of a 256 MiB transfer; the
// sender's Send returns an error naming it, through whichever of the
// endpoint's liveness check and the LMT's own notices first.
func TestPeerDies(t *testing.T) {
	for _, b := range []string{"shm", "cma", "vmsplice"} {
		t.Run(b, func(t *testing.T) {
			launchtest.RunOpts(t, 2, launchtest.Options{ExitEarly: []int{1}}, func(p launch.Proc) error {
				ep, _, err := join(p, attach.Options{Prefer: []string{b}})
				if err != nil {
					return err
				}
				const n = 256 << 20
				if p.Rank == 0 {
					err := ep.Send(1, 0, make([]byte, n))
					if err == nil {
						return errors.New("Send completed although the receiver died")
					}
					if !strings.Contains(err.Error(), "rank 1") {
						return fmt.Errorf("Send error %q does not name rank 1", err)
					}
					fmt.Printf("%s: sender saw: %v\n", b, err)
					return nil
				}
				var r nemesis.Request
				if err := ep.Irecv(&r, 0, 0, make([]byte, n)); err != nil {
					return err
				}
				for !r.Done() {
					if tr := attach.Transfer(&r); tr != nil && tr.Moved() >= 1<<20 {
						os.Exit(0) // mid-transfer
					}
					if err := ep.Poll(); err != nil {
						return err
					}
				}
				return errors.New("the 256 MiB receive completed before the receiver could die")
			})
		})
	}
}

// TestWait: Endpoint.Wait completes sends and receives over every backend, the
// pipe-based ones sleeping in poll(2) on their pipe when idle.
func TestWait(t *testing.T) {
	launchtest.Run(t, 2, func(p launch.Proc) error {
		ep, l, err := join(p, attach.Options{})
		if err != nil {
			return err
		}
		defer ep.Close()
		defer l.Close()
		const n = 8<<20 + 1
		for i, b := range all {
			var r nemesis.Request
			buf := make([]byte, n)
			if p.Rank == 0 {
				lmttest.Fill(buf, i)
				err = l.Isend(&r, 1, i, buf, b)
			} else {
				err = ep.Irecv(&r, 0, i, buf)
			}
			if err != nil {
				return err
			}
			if err := ep.Wait(&r); err != nil {
				return fmt.Errorf("%s: %w", b, err)
			}
			if st, _ := attach.Stats(&r); st.Backend != b || st.Bytes != n {
				return fmt.Errorf("%s: stats %+v", b, st)
			}
			if p.Rank == 1 {
				if err := lmttest.Check(buf, i); err != nil {
					return fmt.Errorf("%s: %w", b, err)
				}
			}
		}
		return farewell(ep, 1-p.Rank)
	})
}

// TestNoAllocPerMessage: in steady state a large message allocates nothing
// on either side, whichever backend carries it: the engine reuses the
// Transfer and its packet buffer that the request's previous message
// released, and a list given to Isendv or Irecvv reaches it without a copy
// of its own. Each rank counts its own process's allocations over a
// ping-pong of single buffers, then of lists with zero-length entries, the
// payload checked at every turn.
func TestNoAllocPerMessage(t *testing.T) {
	for _, b := range append(all, "adaptive") {
		t.Run(b, func(t *testing.T) {
			launchtest.Run(t, 2, func(p launch.Proc) error {
				o := attach.Options{Prefer: []string{b}}
				if b == "adaptive" {
					// The learning selector, exploring its
					// candidates as it goes.
					o = attach.Options{Select: func(int) attach.Selector { return adaptive(t) }}
				}
				ep, l, err := join(p, o)
				if err != nil {
					return err
				}
				defer ep.Close()
				defer l.Close()
				const n = 1<<20 + 5
				pp := lmttest.NewPingPong(ep, ep.Wait, 1-p.Rank, n)
				for _, lists := range []bool{false, true} {
					pp.Lists = lists
					allocs := testing.AllocsPerRun(50, pp.Turn)
					if pp.Err != nil {
						return fmt.Errorf("via %s (lists: %v): %w", b, lists, pp.Err)
					}
					if st, ok := attach.Stats(&pp.Received); !ok || (st.Backend != b && b != "adaptive") || st.Bytes != n {
						return fmt.Errorf("last receive went via %+v, want %s", st, b)
					}
					if allocs != 0 {
						return fmt.Errorf("rank %d: %v allocations per round trip of %d-byte messages via %s (lists: %v), want 0", p.Rank, allocs, n, b, lists)
					}
				}
				return farewell(ep, 1-p.Rank)
			})
		})
	}
}

// TestCloseDeliversBufferedSends: a send on shm or pipe completes once its
// bytes are in the channel and the receiver's CTS is in, so a rank may
// close and leave right after it; its Close must wait until the receiver
// has taken them. Rank 1 matches the message (its CTS goes out) and then
// stops polling (a Poll would read the channel) until rank 0 reports that
// its Send returned with the message in the channel; rank 0 then closes.
// Rank 1 must find rank 0 still there and not past its Close, since it has
// read nothing yet, and the payload intact. No step depends on timing.
func TestCloseDeliversBufferedSends(t *testing.T) {
	for _, b := range []string{"shm", "pipe"} {
		t.Run(b, func(t *testing.T) {
			launchtest.Run(t, 2, func(p launch.Proc) error {
				ep, l, err := join(p, attach.Options{Prefer: []string{b}})
				if err != nil {
					return err
				}
				const n = 200<<10 + 3 // within the ring and the pipe
				sent, closed := reportPath(ep, "sent"), reportPath(ep, "closed")
				if p.Rank == 0 {
					if err := ep.Send(1, 0, lmttest.Message(n, 5)); err != nil {
						return err
					}
					if k := l.Engine().InChannel(); k != 1 {
						return fmt.Errorf("Send returned with %d sends in the %s channel, want 1", k, b)
					}
					if err := report(sent, 1); err != nil {
						return err
					}
					if err := l.Close(); err != nil {
						return err
					}
					if err := report(closed, 1); err != nil {
						return err
					}
					return ep.Close()
				}
				defer ep.Close()
				defer l.Close()
				pid, err := ep.PeerPID(0)
				if err != nil {
					return err
				}
				fd, err := unix.PidfdOpen(pid, 0)
				if err != nil {
					return fmt.Errorf("pidfd of rank 0: %w", err)
				}
				defer unix.Close(fd)
				buf := make([]byte, n)
				var r nemesis.Request
				if err := matchUnread(ep, &r, buf); err != nil {
					return err
				}
				awaitReport(sent)
				if _, err := os.Stat(closed); err == nil {
					return fmt.Errorf("rank 0's Close returned before its %s send was read", b)
				}
				pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
				if k, err := unix.Poll(pfd, 0); err != nil || k != 0 {
					return fmt.Errorf("rank 0 left (poll %d, %v) while its send was still in the %s channel", k, err, b)
				}
				if err := ep.Wait(&r); err != nil {
					return err
				}
				if st, _ := attach.Stats(&r); st.Backend != b {
					return fmt.Errorf("message went via %s, want %s", st.Backend, b)
				}
				return lmttest.Check(buf, 5)
			})
		})
	}
}

// matchUnread receives rank 0's message of tag 0 into buf with r, and
// returns once its CTS has left and before this rank reads a byte of it:
// it waits for the RTS by Probe, then matches it with Irecv, which sends
// the CTS and polls nothing. (Matching inside a Poll would let the same
// Poll read what the sender pushed on seeing the CTS.)
func matchUnread(ep *nemesis.Endpoint, r *nemesis.Request, buf []byte) error {
	if _, err := ep.Probe(0, 0); err != nil {
		return err
	}
	if err := ep.Irecv(r, 0, 0, buf); err != nil {
		return err
	}
	if r.LMTData == nil {
		return errors.New("Irecv of a probed rendezvous message did not hand it to the LMT")
	}
	if st, ok := attach.Stats(r); !ok || st.Bytes != 0 {
		return fmt.Errorf("receive stats after Irecv: %+v (via LMT %v), want nothing read yet", st, ok)
	}
	return nil
}

// reportPath names a report file of ep's job (see report), in a folder of
// the job's directory, which launch removes when the job ends (the folder
// keeps the directory from looking empty to the FIFO backends, which
// remove it when their last FIFO goes).
func reportPath(ep *nemesis.Endpoint, what string) string {
	dir := filepath.Join(launch.JobDir(ep.Job()), "reports")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		panic(err)
	}
	return filepath.Join(dir, what)
}

// report writes b to path atomically: a rank tells another where it
// stands without a message, which the other's Poll would have to take (and
// with it read the LMT channel).
func report(path string, b byte) error {
	if err := os.WriteFile(path+".tmp", []byte{b}, 0o600); err != nil {
		return err
	}
	return os.Rename(path+".tmp", path)
}

// awaitReport waits, without polling any endpoint, until path has been
// written, and returns its byte. A rank that never reports leaves it to
// launchtest's timeout.
func awaitReport(path string) byte {
	for {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
			return b[0]
		}
		time.Sleep(time.Millisecond)
	}
}

// TestSendCompletesInChannel: a send on shm or pipe completes before its
// receiver reads a byte, once its bytes are in the channel and the CTS is
// in; a vmsplice send, whose pipe references the sender's pages, does not.
// Rank 1 matches the message (the CTS goes out), says so in a file, and
// stops polling until rank 0 has reported, in a file, whether its send
// completed within a bounded number of polls once that CTS was in its
// queue: any Poll of rank 1 would also read the channel.
func TestSendCompletesInChannel(t *testing.T) {
	for _, tc := range []struct {
		backend string
		early   bool
	}{{"shm", true}, {"pipe", true}, {"vmsplice", false}} {
		t.Run(tc.backend, func(t *testing.T) {
			launchtest.Run(t, 2, func(p launch.Proc) error {
				ep, l, err := join(p, attach.Options{Prefer: []string{tc.backend}})
				if err != nil {
					return err
				}
				defer ep.Close()
				defer l.Close()
				const n = 100<<10 + 9
				doneFile, ctsFile := reportPath(ep, "report"), reportPath(ep, "cts")
				var r nemesis.Request
				if p.Rank == 1 {
					buf := make([]byte, n)
					if err := matchUnread(ep, &r, buf); err != nil {
						return err
					}
					if err := report(ctsFile, 1); err != nil {
						return err
					}
					if done := awaitReport(doneFile) == 1; done != tc.early {
						return fmt.Errorf("%s send done before its receiver read: %v, want %v", tc.backend, done, tc.early)
					}
					if err := ep.Wait(&r); err != nil {
						return err
					}
					return lmttest.Check(buf, 3)
				}
				if err := ep.Isend(&r, 1, 0, lmttest.Message(n, 3)); err != nil {
					return err
				}
				for tr := attach.Transfer(&r); tr.Moved() < n; {
					if err := ep.Poll(); err != nil {
						return err
					}
				}
				// All bytes are in the pipe or ring, and rank 1's CTS is
				// in rank 0's queue: a few polls take it, and an early
				// send is done then, a vmsplice one not before rank 1
				// reads.
				awaitReport(ctsFile)
				for polls := 0; !r.Done() && polls < 10000; polls++ {
					if err := ep.Poll(); err != nil {
						return err
					}
				}
				var done byte
				if r.Done() {
					done = 1
				}
				if err := report(doneFile, done); err != nil {
					return err
				}
				return ep.Wait(&r)
			})
		})
	}
}
