package auto_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/knemesis/knemesis/attach"
	"github.com/knemesis/knemesis/auto"
	"github.com/knemesis/knemesis/cma"
	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/lmt/lmttest"
	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/nemesis/launch/launchtest"
	"github.com/knemesis/knemesis/threshold"
	"github.com/knemesis/knemesis/topology"
	"golang.org/x/sys/unix"
)

// fixture is package threshold's sysfs of this kind of VM: CPUs 0 and 1
// sharing a 32 MiB L3, so that every test sees the same tables whatever
// machine runs it.
const fixture = "../topology/testdata/epyc-kvm"

// here is the machine the fixture describes, as tuning files record it.
var here = threshold.Machine{CPUModel: "AMD EPYC", CPUs: 2, Caches: "L1d 32 KiB ×2, L1i 32 KiB ×2, L2 512 KiB ×2, L3 32 MiB ×1",
	Kernel: "6.18.44", HostHash: "0123456789abcdef"}

// options selects on the fixture with the tuning file at path (written by
// tuning, or absent) and the ranks on cpus, believing the fixture's caches:
// without a probe, whatever the placement of the machine running the test.
func options(path string, cpus ...int) auto.Options {
	return auto.Options{
		CPUs:    cpus,
		NoProbe: true,
		Threshold: threshold.Config{
			Detect:     topology.DetectOptions{Sysfs: os.DirFS(fixture), Override: topology.CacheOverride{}},
			TuningPath: path,
			Machine:    &here,
		},
	}
}

// measuring turns measurement on or off (Options.TableOnly).
func measuring(o auto.Options, on bool) auto.Options {
	o.TableOnly = !on
	return o
}

// tuning writes a tuning file measured on m with the given table for pairs
// sharing a cache, in a directory of the calling process.
func tuning(t *testing.T, m threshold.Machine, tt threshold.TunedTable) string {
	path := filepath.Join(t.TempDir(), "tuning.json")
	f := &threshold.TuningFile{Machine: m}
	tt.SharedCache = true
	f.Put(tt)
	if err := f.Save(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// join joins the job and attaches auto with o; done releases both.
func join(p launch.Proc, o auto.Options) (ep *nemesis.Endpoint, sel *auto.Selection, done func(), err error) {
	if ep, err = nemesis.JoinProc(p, nil); err != nil {
		return nil, nil, nil, err
	}
	if sel, err = auto.Attach(ep, o); err != nil {
		ep.Close()
		return nil, nil, nil, err
	}
	if err = attached(ep); err != nil {
		sel.Close()
		ep.Close()
		return nil, nil, nil, err
	}
	return ep, sel, func() { sel.Close(); ep.Close() }, nil
}

// attachedTag marks the messages of attached.
const attachedTag = nemesis.MaxTag

// attached returns once every rank's Attach has returned: Attach reads the
// other ranks' processes (their CPU affinity), and a rank that finished
// its test first must not be gone by then, as it can be on a loaded
// machine.
func attached(ep *nemesis.Endpoint) error {
	for r := range ep.Size() {
		if r != ep.Rank() {
			if err := ep.Send(r, attachedTag, nil); err != nil {
				return err
			}
		}
	}
	for r := range ep.Size() {
		if r != ep.Rank() {
			if _, err := ep.Recv(r, attachedTag, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// via is a message size and the backend expected to carry it.
type via struct {
	n    int
	want string
}

// expect sends each message of cases from src to dst in turn (tags from
// tag on) and checks which way it went on this rank.
func expect(ep *nemesis.Endpoint, sel *auto.Selection, src, dst, tag int, cases []via) error {
	for i, c := range cases {
		got, err := exchange(ep, sel, src, dst, tag+i, c.n, tag+i)
		if err != nil {
			return err
		}
		if (ep.Rank() == src || ep.Rank() == dst) && got != c.want {
			return fmt.Errorf("%d bytes from rank %d went via %s on rank %d, want %s", c.n, src, got, ep.Rank(), c.want)
		}
	}
	return nil
}

// exchange sends a message of n bytes from src to dst (content from seed,
// checked on arrival) and returns the backend that carried it on this
// rank's side: "eager" when it did not go through the LMT.
func exchange(ep *nemesis.Endpoint, sel *auto.Selection, src, dst, tag, n, seed int) (string, error) {
	var r nemesis.Request
	var buf []byte
	var err error
	switch ep.Rank() {
	case src:
		buf = lmttest.Message(n, seed)
		err = ep.Isend(&r, dst, tag, buf)
	case dst:
		buf = make([]byte, n)
		err = ep.Irecv(&r, src, tag, buf)
	default:
		return "", nil
	}
	if err == nil {
		err = ep.Wait(&r)
	}
	if err != nil {
		return "", err
	}
	if ep.Rank() == dst {
		if st := r.Status(); st.Len != n {
			return "", fmt.Errorf("received %d bytes from rank %d, want %d", st.Len, src, n)
		}
		if err := lmttest.Check(buf, seed); err != nil {
			return "", fmt.Errorf("%d bytes from rank %d: %w", n, src, err)
		}
	}
	st, ok := attach.Stats(&r)
	if !ok {
		return "eager", nil
	}
	if st.Bytes != int64(n) {
		return "", fmt.Errorf("%d-byte message via %s moved %d bytes", n, st.Backend, st.Bytes)
	}
	return st.Backend, nil
}

// TestSwitchAndTable: on a fresh selection the eager limit is the table's
// switch minus one on every rank, and messages just below it stay eager
// while larger ones take the backend of the table's rule for their size,
// both ways, with and without measurement. The tuning file from this
// machine is what makes the rules.
func TestSwitchAndTable(t *testing.T) {
	tt := threshold.TunedTable{LMTMin: 40 << 10, Rules: []threshold.TunedRule{
		{From: 40 << 10, Backend: threshold.Pipe}, {From: 256 << 10, Backend: threshold.Vmsplice}, {From: 2 << 20, Backend: threshold.Shm}}}
	sizes := []via{{40<<10 - 1, "eager"}, {40 << 10, "pipe"}, {256<<10 - 1, "pipe"}, {256 << 10, "vmsplice"}, {2<<20 - 1, "vmsplice"}, {2<<20 + 3, "shm"}}
	for _, tableOnly := range []bool{false, true} {
		t.Run(fmt.Sprintf("TableOnly=%v", tableOnly), func(t *testing.T) {
			launchtest.Run(t, 2, func(p launch.Proc) error {
				ep, sel, done, err := join(p, measuring(options(tuning(t, here, tt), 0, 1), !tableOnly))
				if err != nil {
					return err
				}
				defer done()
				peer := 1 - p.Rank
				info := sel.Pair(peer).Info
				if info.TuningStatus != "loaded" || len(sel.Warnings()) != 0 {
					return fmt.Errorf("tuning file %s, warnings %q; want it loaded, no warning", info.TuningStatus, sel.Warnings())
				}
				// Learning, the eager path competes up to the
				// end of the switch's size class; with the table
				// alone, the switch is the limit.
				wantMax, limit := 64<<10-1, "eager limit: 65535 bytes (larger messages go through the LMT)\neager or LMT decided per peer for 4096 to 65535 bytes\n"
				if tableOnly {
					wantMax, limit = 40<<10-1, "eager limit: 40959 bytes (larger messages go through the LMT)\n"
				}
				if got := sel.EagerMax(); got != wantMax {
					return fmt.Errorf("eager limit %d, want %d (table LMTMin %d)", got, wantMax, info.Table.LMTMin.Bytes)
				}
				if (sel.Pair(peer).Learner == nil) != tableOnly {
					return fmt.Errorf("TableOnly %v but Learner %v", tableOnly, sel.Pair(peer).Learner)
				}
				// The candidates usable here, then the table's
				// backends missing from them.
				how := "measuring eager shm cma cma-split multirail vmsplice"
				if sel.Engine().Check("knem", peer) == nil {
					how += " knem"
				}
				how += " pipe"
				if tableOnly {
					how = "table only"
				}
				var out strings.Builder
				if err := sel.Describe(&out); err != nil {
					return err
				}
				for _, want := range []string{
					limit,
					"ranks: 0:cpu0 (Options.CPUs), 1:cpu1 (Options.CPUs)\n",
					fmt.Sprintf("to rank %d: cpu%d→cpu%d, ", peer, p.Rank, peer),
					how + "\n",
					"eager→LMT 40 KiB (tuning file: measured crossover eager→LMT)",
					"≥ 256 KiB vmsplice tuning file: measured fastest from here",
				} {
					if !strings.Contains(strings.Join(strings.Fields(out.String()), " "), strings.Join(strings.Fields(want), " ")) ||
						strings.HasSuffix(want, "\n") && !strings.Contains(out.String(), want) {
						return fmt.Errorf("Describe lacks %q:\n%s", want, out.String())
					}
				}
				if !tableOnly {
					// A class starts from the table's choice at
					// its smallest size, 32 KiB: eager, measured
					// first.
					sizes[1].want = "eager"
				}
				if err := expect(ep, sel, 0, 1, 0, sizes); err != nil {
					return err
				}
				return expect(ep, sel, 1, 0, 10, sizes)
			})
		})
	}
}

// TestEagerOverride: Options.Attach.EagerMax moves the switch, and the
// messages between it and the table's switch take the table's first
// backend.
func TestEagerOverride(t *testing.T) {
	launchtest.Run(t, 2, func(p launch.Proc) error {
		o := options(filepath.Join(t.TempDir(), "none.json"), 0, 1)
		o.Attach.EagerMax = 1000
		ep, sel, done, err := join(p, o)
		if err != nil {
			return err
		}
		defer done()
		if sel.EagerMax() != 1000 {
			return fmt.Errorf("eager limit %d, want the 1000 given", sel.EagerMax())
		}
		return expect(ep, sel, 0, 1, 0, []via{{1000, "eager"}, {1001, "shm"}, {64 << 10, "shm"}})
	})
}

// TestForeignTuningFile: a tuning file measured on another host is ignored
// with a warning naming why, and the paper's formula makes the table: the
// pair shares the L3, so shm from MPICH's 64 KiB.
func TestForeignTuningFile(t *testing.T) {
	launchtest.Run(t, 2, func(p launch.Proc) error {
		foreign := here
		foreign.HostHash = "ffffffffffffffff"
		path := tuning(t, foreign, threshold.TunedTable{LMTMin: 4096, Rules: []threshold.TunedRule{{From: 4096, Backend: threshold.Pipe}}})
		_, refusal := threshold.LoadTuning(path, here)
		if !errors.Is(refusal, threshold.ErrForeignTuning) {
			return fmt.Errorf("LoadTuning of the foreign file: %v, want ErrForeignTuning", refusal)
		}
		ep, sel, done, err := join(p, options(path, 0, 1))
		if err != nil {
			return err
		}
		defer done()
		info := sel.Pair(1 - p.Rank).Info
		if w := sel.Warnings(); info.TuningStatus != "ignored" || !slices.Equal(w, []string{"tuning file ignored: " + refusal.Error()}) {
			return fmt.Errorf("status %q, warnings %q; want the file ignored with its refusal", info.TuningStatus, w)
		}
		if info.Table.LMTMin.Source != threshold.SourceDefault || info.Table.Rules[0].Source != threshold.SourceFormula || sel.EagerMax() != 64<<10-1 {
			return fmt.Errorf("switch %v, first rule %+v, eager limit %d; want the formula's 64 KiB", info.Table.LMTMin, info.Table.Rules[0], sel.EagerMax())
		}
		return expect(ep, sel, 0, 1, 0, []via{{64<<10 - 1, "eager"}, {64 << 10, "shm"}, {4 << 20, "shm"}})
	})
}

// TestOptionErrors: bad options are refused before anything is attached,
// naming what is wrong.
func TestOptionErrors(t *testing.T) {
	launchtest.Run(t, 2, func(p launch.Proc) error {
		ep, err := nemesis.JoinProc(p, nil)
		if err != nil {
			return err
		}
		defer ep.Close()
		withSelect := options("")
		withSelect.Attach.Select = func(int) attach.Selector { return nil }
		withPlacement := options("")
		withPlacement.Threshold.Env.Placement.Receiver = 1
		negative := options("")
		negative.Concurrent = -1
		negativeProbe := options("")
		negativeProbe.ProbeTimeout = -time.Second
		measured := options("")
		measured.Threshold.Env.Placement.LineLatency = time.Microsecond
		for _, c := range []struct {
			o    auto.Options
			want string
		}{
			{withSelect, "auto: Options.Attach.Select is set: Attach installs its own selectors (call attach.Attach to choose yourself)"},
			{withPlacement, "auto: Options.Threshold.Env.Placement is set: Attach places each pair itself; give Options.CPUs and Options.Concurrent"},
			{negative, "auto: Options.Concurrent is -1, want 0 or more transfers"},
			{negativeProbe, "auto: Options.ProbeTimeout is -1s, want 0 (the default) or more"},
			{measured, "auto: Options.Threshold.Env.Placement is set: Attach places each pair itself; give Options.CPUs and Options.Concurrent"},
			{options("", 0, 1, 1), "auto: Options.CPUs has 3 entries for a job of 2 ranks: give one CPU per rank"},
			{options("", 0, -1), "auto: Options.CPUs[1] is -1, not a CPU number"},
		} {
			sel, err := auto.Attach(ep, c.o)
			if err == nil {
				sel.Close()
				return fmt.Errorf("Attach accepted options for %q", c.want)
			}
			if err.Error() != c.want {
				return fmt.Errorf("error %q, want %q", err, c.want)
			}
		}
		// A CPU the machine lacks is found when the table is built.
		sel, err := auto.Attach(ep, options(filepath.Join(t.TempDir(), "none.json"), 0, 7))
		if err == nil {
			sel.Close()
			return errors.New("Attach accepted cpu7 on a machine of 2 CPUs")
		}
		if !errors.Is(err, threshold.ErrUnknownCPU) || !strings.HasPrefix(err.Error(), fmt.Sprintf("auto: the table for rank %d (cpu", 1-p.Rank)) {
			return fmt.Errorf("cpu7: %v; want ErrUnknownCPU naming the peer", err)
		}
		_, err = auto.Attach(nil, auto.Options{})
		if err == nil || err.Error() != "auto: Attach needs an endpoint, got nil" {
			return fmt.Errorf("nil endpoint: %v", err)
		}
		return nil
	})
}

// TestPeersOwnSelectors: in a 3-rank job where rank 2 runs in a user
// namespace of its own, CMA from rank 2 into the others is refused (the
// kernel's ptrace rules) while ranks 0 and 1 may still read rank 2. Every
// pair gets its own table and selector: rank 2's never hold cma,
// cma-split or multirail, each refused with CMA's reason (Pair.Refusals,
// and Describe), the others' do, and what one selector learns is its own.
// vmsplice is ruled out for everyone through Options.
func TestPeersOwnSelectors(t *testing.T) {
	if b, err := os.ReadFile("/proc/sys/user/max_user_namespaces"); err != nil || strings.TrimSpace(string(b)) == "0" {
		t.Skip("lacks user-namespaces: user namespaces are disabled here (user.max_user_namespaces)")
	}
	setup := func(rank int, cmd *exec.Cmd) error {
		if rank == 2 {
			cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWUSER
			cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}}
			cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}}
		}
		return nil
	}
	launchtest.RunOpts(t, 3, launchtest.Options{Setup: setup}, func(p launch.Proc) error {
		o := options(filepath.Join(t.TempDir(), "none.json"), 0, 1, 0)
		o.Threshold.Env.Unavailable = []threshold.Backend{threshold.Vmsplice}
		ep, sel, done, err := join(p, o)
		if err != nil {
			return err
		}
		defer done()
		if sel.Pair(p.Rank) != nil || sel.Pair(3) != nil {
			return fmt.Errorf("Pair of the own rank or rank 3: %v %v, want nil", sel.Pair(p.Rank), sel.Pair(3))
		}
		var selectors []*threshold.Learner
		for peer := range 3 {
			if peer == p.Rank {
				continue
			}
			pair := sel.Pair(peer)
			want := []threshold.Backend{threshold.Vmsplice}
			cands := []threshold.Backend{threshold.Eager, threshold.Shm, threshold.CMA, threshold.CMASplit, threshold.MultiRail}
			// Rank 2's refusal is the kernel's; between the
			// others, CMA works as root and where ptrace is not
			// restricted (Yama's ptrace_scope 1 refuses it to
			// ordinary users: then it is refused everywhere).
			// cma-split and multirail, whose rails are CMA's, go
			// with it, for CMA's reason.
			cmaRefused := p.Rank == 2 || sel.Engine().Check("cma", peer) != nil && os.Geteuid() != 0
			if cmaRefused {
				want = append(want, threshold.CMA, threshold.CMASplit, threshold.MultiRail)
				cands = cands[:2]
			}
			if err := sameRefusal(pair.Refusals, cmaRefused); err != nil {
				return fmt.Errorf("to rank %d: %w", peer, err)
			}
			if cmaRefused && !strings.Contains(describe(sel), pair.Refusals[2].Error()) {
				return fmt.Errorf("to rank %d: Describe does not give multirail's refusal %q:\n%s", peer, pair.Refusals[2], describe(sel))
			}
			if sel.Engine().Check("knem", peer) != nil {
				want = append(want, threshold.Knem)
			}
			if !slices.Contains(want, threshold.Knem) {
				cands = append(cands, threshold.Knem)
			}
			if pair.Peer != peer || !slices.Equal(pair.Unavailable, want) || !slices.Equal(pair.Learner.Candidates(), cands) {
				return fmt.Errorf("to rank %d: pair of rank %d without %v measuring %v; want without %v measuring %v",
					peer, pair.Peer, pair.Unavailable, pair.Learner.Candidates(), want, cands)
			}
			if slices.Contains(selectors, pair.Learner) {
				return fmt.Errorf("to rank %d: the selector of another peer", peer)
			}
			selectors = append(selectors, pair.Learner)
		}

		// Every rank sends to every other at once, 24 rounds: the
		// first exploration round (1 + LearnerSamples messages per
		// candidate) ends within them, with a message or two of
		// measurement still on its way at each step.
		const rounds, n = 24, 256 << 10
		used := make([]map[string]int, 3)
		reqs := make([]nemesis.Request, 4)
		bufs := make([][]byte, 4)
		seed := func(src, dst, round int) int { return 100*round + 10*src + dst }
		for round := range rounds {
			k := 0
			for peer := range 3 {
				if peer == p.Rank {
					continue
				}
				bufs[k] = make([]byte, n+round)
				if err := ep.Irecv(&reqs[k], peer, round, bufs[k]); err != nil {
					return err
				}
				bufs[k+1] = lmttest.Message(n+round, seed(p.Rank, peer, round))
				if err := ep.Isend(&reqs[k+1], peer, round, bufs[k+1]); err != nil {
					return err
				}
				k += 2
			}
			k = 0
			for peer := range 3 {
				if peer == p.Rank {
					continue
				}
				for i := k; i < k+2; i++ {
					if err := ep.Wait(&reqs[i]); err != nil {
						return fmt.Errorf("round %d with rank %d: %w", round, peer, err)
					}
				}
				if err := lmttest.Check(bufs[k], seed(peer, p.Rank, round)); err != nil {
					return fmt.Errorf("round %d from rank %d: %w", round, peer, err)
				}
				st, ok := attach.Stats(&reqs[k+1])
				if !ok {
					return fmt.Errorf("round %d: %d bytes to rank %d did not go through the LMT", round, n+round, peer)
				}
				if used[peer] == nil {
					used[peer] = map[string]int{}
				}
				used[peer][st.Backend]++
				k += 2
			}
		}
		fmt.Printf("rank %d sent via %v\n", p.Rank, used)
		for peer, u := range used {
			if u == nil {
				continue
			}
			if u["vmsplice"] != 0 || p.Rank == 2 && u["cma"]+u["cma-split"]+u["multirail"] != 0 {
				return fmt.Errorf("to rank %d: sent via %v, a backend that was unavailable", peer, u)
			}
			for _, b := range []threshold.Backend{threshold.CMASplit, threshold.MultiRail} {
				if slices.Contains(sel.Pair(peer).Learner.Candidates(), b) && peer != 2 && u[string(b)] == 0 {
					return fmt.Errorf("to rank %d: sent via %v, the selector never tried %s", peer, u, b)
				}
			}
		}

		// Only rank 0 sends 4 MiB messages, only to rank 1: its
		// selector for rank 1 measures them, the one for rank 2 knows
		// nothing of that size.
		for i := range 2 * (1 + threshold.LearnerSamples) {
			if _, err := exchange(ep, sel, 0, 1, 100+i, 4<<20, i); err != nil {
				return err
			}
		}
		if p.Rank == 0 {
			c1, c2 := sel.Pair(1).Learner.State(4<<20).Costs, sel.Pair(2).Learner.State(4<<20).Costs
			if !slices.ContainsFunc(c1, func(c float64) bool { return c > 0 }) || slices.ContainsFunc(c2, func(c float64) bool { return c != 0 }) {
				return fmt.Errorf("4 MiB costs toward rank 1 %v, toward rank 2 %v; want measured, then none", c1, c2)
			}
		}
		return nil
	})
}

// sameRefusal checks the engine's reasons of a pair: where CMA is refused,
// one for each of cma, cma-split and multirail, in that order, each an
// *lmt.Unavailable naming its backend and CMA's reason; else none.
func sameRefusal(why []error, cmaRefused bool) error {
	if !cmaRefused {
		if len(why) != 0 {
			return fmt.Errorf("refusals %v, want none", why)
		}
		return nil
	}
	names := []string{lmt.CMA, lmt.CMASplit, lmt.MultiRail}
	if len(why) != len(names) {
		return fmt.Errorf("refusals %v, want one for each of %v", why, names)
	}
	var reason string
	for i, err := range why {
		var u *lmt.Unavailable
		if !errors.As(err, &u) || u.Backend != names[i] || u.Reason == "" || i > 0 && u.Reason != reason {
			return fmt.Errorf("refusal %d is %v, want %s unavailable for CMA's reason %q", i, err, names[i], reason)
		}
		reason = u.Reason
	}
	return nil
}

// mask is the CPUs this process may run on.
func mask(t *testing.T) []int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Fatal(err)
	}
	var cpus []int
	for c := 0; len(cpus) < set.Count(); c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus
}

// envPinned carries the CPUs the launcher pinned the ranks to into them.
const envPinned = "AUTO_TEST_PINNED"

// TestPlacement: without Options.CPUs, ranks a launcher pinned to one CPU
// each (here taskset, in reverse order) are placed there, and the job's
// CPUs count the users of the cache; unpinned ranks get a guess, and
// DMA_min the cores sharing the cache instead.
func TestPlacement(t *testing.T) {
	taskset, err := exec.LookPath("taskset")
	if err != nil {
		t.Skip("lacks taskset: taskset (util-linux) is not installed: it stands for the launcher pinning the ranks")
	}
	if _, ok := launch.Self(); !ok && len(mask(t)) < 2 {
		t.Skip("lacks two-cpus: this process may run on one CPU only: two ranks cannot be pinned apart")
	}
	// This machine's own caches, no tuning file.
	here := func(t *testing.T) auto.Options {
		return auto.Options{Threshold: threshold.Config{TuningPath: filepath.Join(t.TempDir(), "none.json")}}
	}
	t.Run("pinned", func(t *testing.T) {
		var opts launchtest.Options
		if _, ok := launch.Self(); !ok {
			m := mask(t)
			pinned := []int{m[1], m[0]}
			opts.Env = []string{fmt.Sprintf("%s=%d,%d", envPinned, pinned[0], pinned[1])}
			opts.Setup = func(rank int, cmd *exec.Cmd) error {
				cmd.Args = append([]string{"taskset", "-c", strconv.Itoa(pinned[rank]), cmd.Path}, cmd.Args[1:]...)
				cmd.Path = taskset
				return nil
			}
		}
		launchtest.RunOpts(t, 2, opts, func(p launch.Proc) error {
			var pinned [2]int
			if _, err := fmt.Sscanf(os.Getenv(envPinned), "%d,%d", &pinned[0], &pinned[1]); err != nil {
				return fmt.Errorf("%s=%q: %v", envPinned, os.Getenv(envPinned), err)
			}
			_, sel, done, err := join(p, here(t))
			if err != nil {
				return err
			}
			defer done()
			for r := range 2 {
				if cpu, src := sel.CPU(r); cpu != pinned[r] || src != auto.CPUAffinity {
					return fmt.Errorf("rank %d placed on cpu%d (%s), want cpu%d (affinity)", r, cpu, src, pinned[r])
				}
			}
			pair := sel.Pair(1 - p.Rank)
			want := threshold.Placement{Sender: pinned[p.Rank], Receiver: pinned[1-p.Rank], JobCPUs: pinned[:]}
			if got := pair.Placement; got.Sender != want.Sender || got.Receiver != want.Receiver || !slices.Equal(got.JobCPUs, want.JobCPUs) || got.Concurrent != 0 {
				return fmt.Errorf("placement %+v, want %+v", got, want)
			}
			if why := pair.Info.Table.DMAMin.Why; !strings.Contains(why, "job processes using it") {
				return fmt.Errorf("DMA_min %q does not count the job's processes", why)
			}
			return nil
		})
	})
	t.Run("unpinned", func(t *testing.T) {
		launchtest.Run(t, 2, func(p launch.Proc) error {
			m := mask(t) // inherited from the test process
			_, sel, done, err := join(p, here(t))
			if err != nil {
				return err
			}
			defer done()
			for r := range 2 {
				if cpu, src := sel.CPU(r); cpu != m[r%len(m)] || src != auto.CPUGuessed {
					return fmt.Errorf("rank %d placed on cpu%d (%s), want cpu%d (guessed)", r, cpu, src, m[r%len(m)])
				}
			}
			pair := sel.Pair(1 - p.Rank)
			if pair.Placement.JobCPUs != nil {
				return fmt.Errorf("guessed placement gave DMA_min the job's CPUs %v", pair.Placement.JobCPUs)
			}
			if why := pair.Info.Table.DMAMin.Why; !strings.Contains(why, "cores sharing it") {
				return fmt.Errorf("DMA_min %q does not count the cores", why)
			}
			return nil
		})
	})
}

// TestNoAllocPerMessage: choosing the backend adds no allocation to a
// large message, with the table alone or with the selector measuring and
// exploring its candidates as it goes (every 4 messages here). Each rank
// counts its own process's allocations over a ping-pong, the payload
// checked at every turn.
func TestNoAllocPerMessage(t *testing.T) {
	for _, tableOnly := range []bool{false, true} {
		t.Run(fmt.Sprintf("TableOnly=%v", tableOnly), func(t *testing.T) {
			launchtest.Run(t, 2, func(p launch.Proc) error {
				ep, _, done, err := join(p, measuring(options(filepath.Join(t.TempDir(), "none.json"), 0, 1), !tableOnly))
				if err != nil {
					return err
				}
				defer done()
				peer := 1 - p.Rank
				// 16 KiB: the endpoint asks the selector, eager
				// and LMT take turns while the class explores.
				for _, n := range []int{1<<20 + 5, 16<<10 + 5} {
					pp := lmttest.NewPingPong(ep, ep.Wait, peer, n)
					allocs := testing.AllocsPerRun(50, pp.Turn)
					if pp.Err != nil {
						return pp.Err
					}
					if st, ok := attach.Stats(&pp.Sent); n > 64<<10 && (!ok || st.Bytes != int64(n)) {
						return fmt.Errorf("last send went via %+v, want the LMT", st)
					}
					if allocs != 0 {
						return fmt.Errorf("rank %d: %v allocations per round trip of %d-byte messages, want 0", p.Rank, allocs, n)
					}
				}
				return nil
			})
		})
	}
}

// TestExample runs ExampleAttach's ranks as a job of two: each must
// succeed, and rank 0 report the 8 MiB message moved by a registered
// backend under an eager limit below it; rank 1 reports nothing.
func TestExample(t *testing.T) {
	launchtest.RunOpts(t, 2, launchtest.Options{Env: []string{threshold.EnvTuning + "=" + filepath.Join(t.TempDir(), "none.json")}},
		func(p launch.Proc) error {
			var out bytes.Buffer
			if err := rank(p, &out); err != nil {
				return err
			}
			if p.Rank != 0 {
				if out.Len() != 0 {
					return fmt.Errorf("rank %d wrote %q, want nothing", p.Rank, out.String())
				}
				return nil
			}
			var n, eager int
			var backend string
			if _, err := fmt.Sscanf(out.String(), "%d bytes via %s (eager up to %d bytes)\n", &n, &backend, &eager); err != nil {
				return fmt.Errorf("rank 0 wrote %q: %v", out.String(), err)
			}
			if n != 8<<20 || !slices.Contains(lmt.Backends(), backend) || eager <= 0 || eager >= n {
				return fmt.Errorf("rank 0 wrote %q: want %d bytes via one of %v with an eager limit below it", out.String(), 8<<20, lmt.Backends())
			}
			return nil
		})
}

// TestSingleRank: a job of one rank has no pair to decide for; Attach
// still succeeds, with attach's default eager limit.
func TestSingleRank(t *testing.T) {
	launchtest.Run(t, 1, func(p launch.Proc) error {
		_, sel, done, err := join(p, options(filepath.Join(t.TempDir(), "none.json")))
		if err != nil {
			return err
		}
		defer done()
		if sel.Pair(0) != nil || sel.Warnings() != nil || sel.EagerMax() != attach.DefaultEagerMax {
			return fmt.Errorf("pair %v, warnings %q, eager limit %d; want none, none, %d", sel.Pair(0), sel.Warnings(), sel.EagerMax(), attach.DefaultEagerMax)
		}
		if cpu, src := sel.CPU(0); src == "" || cpu < 0 {
			return fmt.Errorf("rank 0 placed on cpu%d (%q)", cpu, src)
		}
		return nil
	})
}

// TestPeersDifferentSwitches: on a machine with two L3 caches, rank 2
// shares none with ranks 0 and 1, and the tuning file gives such pairs a
// later eager→LMT switch (128 KiB) than pairs sharing one (32 KiB). Each
// pair keeps its own switch: the endpoint's limit is the larger, and ranks
// 0 and 1 decide per peer above the smaller (with the table alone) or
// above 4 KiB (learning, each class starting from its pair's table).
func TestPeersDifferentSwitches(t *testing.T) {
	for _, tableOnly := range []bool{false, true} {
		t.Run(fmt.Sprintf("TableOnly=%v", tableOnly), func(t *testing.T) { peersDifferentSwitches(t, tableOnly) })
	}
}

func peersDifferentSwitches(t *testing.T, tableOnly bool) {
	launchtest.Run(t, 3, func(p launch.Proc) error {
		path := filepath.Join(t.TempDir(), "tuning.json")
		f := &threshold.TuningFile{Machine: here}
		f.Put(threshold.TunedTable{SharedCache: true, LMTMin: 32 << 10, Rules: []threshold.TunedRule{{From: 32 << 10, Backend: threshold.Pipe}}})
		f.Put(threshold.TunedTable{SharedCache: false, LMTMin: 128 << 10, Rules: []threshold.TunedRule{{From: 128 << 10, Backend: threshold.Vmsplice}}})
		if err := f.Save(path); err != nil {
			return err
		}
		o := measuring(options(path, 0, 1, 4), !tableOnly)
		o.Threshold.Detect.Sysfs = os.DirFS("../topology/testdata/amd-ccx")
		ep, sel, done, err := join(p, o)
		if err != nil {
			return err
		}
		defer done()
		above := []int{32<<10 - 1, 32<<10 - 1, 128<<10 - 1}[p.Rank]
		if !tableOnly {
			above = 4<<10 - 1
		}
		if sel.EagerMax() != 128<<10-1 || sel.ChooseAbove() != above {
			return fmt.Errorf("eager limit %d, per-peer choice above %d; want %d and %d", sel.EagerMax(), sel.ChooseAbove(), 128<<10-1, above)
		}
		if err := expect(ep, sel, 0, 1, 0, []via{{32<<10 - 1, "eager"}, {32 << 10, "pipe"}, {128 << 10, "pipe"}}); err != nil {
			return err
		}
		// Rank 0 sends 64 KiB to rank 2 eagerly, as that pair's table
		// says, while 64 KiB to rank 1 went through the LMT.
		if err := expect(ep, sel, 0, 2, 10, []via{{32<<10 - 1, "eager"}, {64 << 10, "eager"}, {128 << 10, "vmsplice"}}); err != nil {
			return err
		}
		return expect(ep, sel, 2, 1, 20, []via{{64 << 10, "eager"}, {128<<10 - 1, "eager"}, {128 << 10, "vmsplice"}})
	})
}

// TestReprobeFollowsPlacement: a pair built as sharing its cache (the
// fixture's topology, one reading at Attach) is moved to the table of a
// pair sharing nothing when Reprobe finds the line in a slow regime, here
// because both ranks' threads are pinned to one CPU, where the line takes
// two context switches (on a machine so loaded that its unpinned readings
// were as slow, the one-CPU reading files near, and nothing moves).
// Messages then take the new table's backend, intact. Unpinned
// again, Reprobe files the pair by what this machine's line says now.
func TestReprobeFollowsPlacement(t *testing.T) {
	launchtest.Run(t, 2, func(p launch.Proc) error {
		o := measuring(options(filepath.Join(t.TempDir(), "none.json"), 0, 1), false)
		o.ProbeTimeout, o.NoProbe = 5*time.Second, false // a first reading to compare with
		ep, sel, done, err := join(p, o)
		if err != nil {
			return err
		}
		defer done()
		peer := 1 - p.Rank
		const size = 1 << 20
		check := func(when string, tag int) error {
			pair := sel.Pair(peer)
			want := string(pair.Info.Table.Choose(size).Backend)
			for src := range 2 {
				got, err := exchange(ep, sel, src, 1-src, tag+src, size, tag+src)
				if err != nil {
					return fmt.Errorf("%s: %w", when, err)
				}
				if got != want {
					return fmt.Errorf("%s: %d bytes from rank %d went via %s, the table says %s", when, size, src, got, want)
				}
			}
			return nil
		}
		if b := sel.Pair(peer).Info.Table.Choose(size).Backend; b != threshold.Shm {
			return fmt.Errorf("the fixture's pair takes %s at 1 MiB, want shm (the test needs a sharing pair to start)", b)
		}
		if err := check("after Attach", 10); err != nil {
			return err
		}

		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		var all, one unix.CPUSet
		if err := unix.SchedGetaffinity(0, &all); err != nil {
			return err
		}
		// Two readings of each placement: one reading is no regime.
		var changed []int
		reprobe := func() error {
			c, err := sel.Reprobe()
			if !slices.Equal(changed, []int{peer}) {
				changed = c
			}
			return err
		}
		if err := reprobe(); err != nil {
			return err
		}
		one.Set(mask(t)[0])
		if err := unix.SchedSetaffinity(0, &one); err != nil {
			return err
		}
		if err := reprobe(); err != nil {
			return err
		}
		if err := reprobe(); err != nil {
			return err
		}
		pair := sel.Pair(peer)
		if !sel.Regimes().Two || !sel.Regimes().Far(pair.Placement.LineLatency) {
			// Attach's reading was already as slow as one CPU's
			// (a loaded machine ran both ranks on one): one
			// regime, or the one-CPU reading among the near
			// ones. Nothing is filed apart, nothing changes.
			fmt.Printf("rank %d: line %v read near: %s\n", p.Rank, pair.Placement.LineLatency, sel.Regimes())
			if pair.Placement.Apart || changed != nil {
				return fmt.Errorf("line %v read near (%s), yet apart %v, changed %v", pair.Placement.LineLatency, sel.Regimes(), pair.Placement.Apart, changed)
			}
			return check("one CPU read near", 20)
		}
		if lat := pair.Placement.LineLatency; !pair.Placement.Apart || !slices.Equal(changed, []int{peer}) {
			return fmt.Errorf("on one CPU: line %v (%s), changed %v; want it far, and [%d]", lat, sel.Regimes(), changed, peer)
		}
		if b := pair.Info.Table.Choose(size).Backend; b == threshold.Shm {
			return fmt.Errorf("on one CPU the pair still takes shm at 1 MiB:\n%s", describe(sel))
		}
		if !strings.Contains(describe(sel), "treated as sharing no cache") {
			return fmt.Errorf("Describe does not say the pair is treated as sharing no cache:\n%s", describe(sel))
		}
		if want := int(pair.Info.Table.LMTMin.Bytes) - 1; sel.EagerMax() != want {
			return fmt.Errorf("on one CPU: eager limit %d, want the new table's switch %d minus one", sel.EagerMax(), want+1)
		}
		if err := check("pinned to one CPU", 20); err != nil {
			return err
		}

		if err := unix.SchedSetaffinity(0, &all); err != nil {
			return err
		}
		changed, err = sel.Reprobe()
		if err != nil {
			return err
		}
		lat := sel.Pair(peer).Placement.LineLatency
		shared := !sel.Pair(peer).Placement.Apart
		if lat <= 0 || shared != slices.Equal(changed, []int{peer}) || !shared && changed != nil {
			return fmt.Errorf("unpinned: line %v (%s), changed %v; want the pair back to the shared table exactly when the line is near", lat, sel.Regimes(), changed)
		}
		if b := sel.Pair(peer).Info.Table.Choose(size).Backend; shared != (b == threshold.Shm) {
			return fmt.Errorf("unpinned: line %v, the pair takes %s at 1 MiB", lat, b)
		}
		return check("unpinned", 30)
	})
}

func describe(sel *auto.Selection) string {
	var b strings.Builder
	sel.Describe(&b)
	return b.String()
}

// TestEagerLearned: with measurement on, a 16 KiB message may go eagerly
// or through the LMT: the peer's Learner measures the eager path beside
// the backends and settles, every message intact.
func TestEagerLearned(t *testing.T) {
	launchtest.Run(t, 2, func(p launch.Proc) error {
		ep, sel, done, err := join(p, options(filepath.Join(t.TempDir(), "none.json"), 0, 1))
		if err != nil {
			return err
		}
		defer done()
		if sel.ChooseAbove() != 4<<10-1 || sel.EagerMax() != 64<<10-1 {
			return fmt.Errorf("eager range (%d, %d], want (4095, 65535]", sel.ChooseAbove(), sel.EagerMax())
		}
		const n, msgs = 16 << 10, 80
		used := map[string]int{}
		for i := range msgs {
			got, err := exchange(ep, sel, 0, 1, i, n+i, i)
			if err != nil {
				return err
			}
			used[got]++
		}
		if p.Rank != 0 {
			return nil
		}
		l := sel.Pair(1).Learner
		st := l.State(n)
		fmt.Printf("16 KiB to rank 1 via %v; learner over %v: %+v\n", used, l.Candidates(), st)
		if used["eager"] == 0 || used["eager"] == msgs || st.Rounds == 0 || st.Costs[l.Index(threshold.Eager)] == 0 {
			return fmt.Errorf("%d messages went via %v; learner %+v: want eager and the LMT both used, a round completed, eager measured", msgs, used, st)
		}
		return nil
	})
}

// TestTunedSwitchBelowLearnedRange: a tuning file's switch below 4 KiB
// opens the learned range there, so its first message past the switch
// takes the file's backend, not the cells.
func TestTunedSwitchBelowLearnedRange(t *testing.T) {
	tt := threshold.TunedTable{LMTMin: 2 << 10, Rules: []threshold.TunedRule{{From: 2 << 10, Backend: threshold.Pipe}}}
	launchtest.Run(t, 2, func(p launch.Proc) error {
		ep, sel, done, err := join(p, options(tuning(t, here, tt), 0, 1))
		if err != nil {
			return err
		}
		defer done()
		if sel.ChooseAbove() != 2<<10-1 {
			return fmt.Errorf("per-peer choice above %d, want 2047", sel.ChooseAbove())
		}
		return expect(ep, sel, 0, 1, 0, []via{{2<<10 - 1, "eager"}, {3 << 10, "pipe"}})
	})
}

// TestArenaCopyIsLearned: in a job with an arena, each peer's Learner
// weighs arena-copy besides the others (TestPairs: without an arena it is
// not a candidate), and a ping-pong of 16 KiB messages from ordinary
// memory sends some by it during the first exploration round, which
// records a cost for it; every message arrives intact.
func TestArenaCopyIsLearned(t *testing.T) {
	launchtest.Run(t, 2, func(p launch.Proc) error {
		ep, err := nemesis.JoinProc(p, &nemesis.Options{ArenaSize: 2 << 20})
		if err != nil {
			return err
		}
		sel, err := auto.Attach(ep, measuring(options(filepath.Join(t.TempDir(), "none.json"), 0, 1), true))
		if err != nil {
			ep.Close()
			return err
		}
		defer ep.Close()
		defer sel.Close()
		peer := 1 - p.Rank
		l := sel.Pair(peer).Learner
		if !slices.Contains(l.Candidates(), threshold.ArenaCopy) {
			return fmt.Errorf("measuring %v, want arena-copy among them in a job with an arena", l.Candidates())
		}
		const n = 16 << 10
		used := map[string]int{}
		for i := range len(l.Candidates())*(1+threshold.LearnerSamples) + 8 {
			for src := range 2 {
				got, err := exchange(ep, sel, src, 1-src, i*2+src, n, i)
				if err != nil {
					return err
				}
				if src == p.Rank {
					used[got]++
				}
			}
		}
		if used[lmt.ArenaCopy] == 0 || l.State(n).Costs[l.Index(threshold.ArenaCopy)] == 0 {
			return fmt.Errorf("sent %v, state %+v: want some by arena-copy and a cost recorded for it", used, l.State(n))
		}
		return nil
	})
}

// TestMultiRailIsLearned: where CMA works, each peer's Learner weighs
// multirail besides cma-split, and a ping-pong of messages of about
// 1 MiB (odd lengths, so that no cut falls on the end of a page) sends
// them by it for a whole exploration step, a cold message and
// LearnerSamples counted ones, which record its cost. Every message
// arrives intact, and each one multirail carried was cut over both rails:
// the receiver's read and the sender's write together moved it whole.
func TestMultiRailIsLearned(t *testing.T) {
	if why := yamaRefusesSiblings(); why != "" {
		t.Skip("lacks cma-between-siblings: " + why)
	}
	launchtest.Run(t, 2, func(p launch.Proc) error {
		ep, sel, done, err := join(p, measuring(options(filepath.Join(t.TempDir(), "none.json"), 0, 1), true))
		if err != nil {
			return err
		}
		defer done()
		peer := 1 - p.Rank
		pair := sel.Pair(peer)
		l := pair.Learner
		if !slices.Contains(l.Candidates(), threshold.MultiRail) || slices.Contains(pair.Unavailable, threshold.MultiRail) {
			return fmt.Errorf("measuring %v, without %v: want multirail measured where CMA works", l.Candidates(), pair.Unavailable)
		}
		const base = 1 << 20
		sent, received := 0, 0
		for i := range len(l.Candidates())*(1+threshold.LearnerSamples) + 8 {
			for src := range 2 {
				n, tag := base+4099*i+src, 2*i+src
				st, err := transfer(ep, 1-src, src, tag, n)
				if err != nil {
					return err
				}
				if st.Backend != lmt.MultiRail {
					continue
				}
				if src == p.Rank {
					sent++
					continue
				}
				received++
				if r := st.Rails; r[lmt.ReadRail] <= 0 || r[lmt.WriteRail] <= 0 || r[lmt.ReadRail]+r[lmt.WriteRail] != int64(n) {
					return fmt.Errorf("%d bytes by multirail moved %d by the read rail, %d by the write rail: want both, summing to the message", n, r[lmt.ReadRail], r[lmt.WriteRail])
				}
			}
		}
		if st := l.State(base); sent < 1+threshold.LearnerSamples || received < 1+threshold.LearnerSamples || st.Costs[l.Index(threshold.MultiRail)] == 0 {
			return fmt.Errorf("sent %d, received %d messages by multirail; learner %+v: want a whole exploration step each way and a cost for it", sent, received, st)
		}
		return nil
	})
}

// yamaRefusesSiblings says why CMA cannot work between two ranks of a job
// here, "" when nothing known forbids it: Yama's ptrace_scope 3 refuses
// everyone, 2 all but CAP_SYS_PTRACE (every rank declares any tracer,
// which lifts scope 1).
func yamaRefusesSiblings() string {
	b, err := os.ReadFile(cma.YamaScopeFile)
	if err != nil {
		return ""
	}
	switch scope := strings.TrimSpace(string(b)); {
	case scope == "3", scope == "2" && os.Geteuid() != 0:
		return "kernel.yama.ptrace_scope is " + scope + " here: CMA, and so multirail, is refused between the ranks (TestPeersOwnSelectors checks the refusal)"
	}
	return ""
}

// transfer moves a message of n bytes from src to dst (content from tag,
// checked on arrival) and returns the LMT statistics of this rank's side;
// an eager message is an error.
func transfer(ep *nemesis.Endpoint, dst, src, tag, n int) (lmt.Stats, error) {
	var r nemesis.Request
	var buf []byte
	var err error
	if ep.Rank() == src {
		buf = lmttest.Message(n, tag)
		err = ep.Isend(&r, dst, tag, buf)
	} else {
		buf = make([]byte, n)
		err = ep.Irecv(&r, src, tag, buf)
	}
	if err == nil {
		err = ep.Wait(&r)
	}
	if err != nil {
		return lmt.Stats{}, err
	}
	if ep.Rank() == dst {
		if err := lmttest.Check(buf, tag); err != nil {
			return lmt.Stats{}, fmt.Errorf("%d bytes from rank %d: %w", n, src, err)
		}
	}
	st, ok := attach.Stats(&r)
	if !ok {
		return lmt.Stats{}, fmt.Errorf("%d bytes from rank %d did not go through the LMT", n, src)
	}
	return st, nil
}
