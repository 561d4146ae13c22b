package auto_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/knemesis/knemesis/lmt/attach"
	"github.com/knemesis/knemesis/lmt/auto"
	"github.com/knemesis/knemesis/lmt/lmttest"
	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/nemesis/launch/launchtest"
	"github.com/knemesis/knemesis/threshold"
)

// fixture is package threshold's sysfs of this kind of VM: CPUs 0 and 1
// sharing a 32 MiB L3, so that every test sees the same tables whatever
// machine runs it.
const fixture = "../../threshold/testdata/epyc-kvm"

// here is the machine the fixture describes, as tuning files record it.
var here = threshold.Machine{CPUModel: "AMD EPYC", CPUs: 2, Caches: "L1d 32 KiB ×2, L1i 32 KiB ×2, L2 512 KiB ×2, L3 32 MiB ×1",
	Kernel: "6.18.44", HostHash: "0123456789abcdef"}

// options selects on the fixture with the tuning file at path (written by
// tuning, or absent) and the ranks on cpus.
func options(path string, cpus ...int) auto.Options {
	return auto.Options{
		CPUs: cpus,
		Threshold: threshold.Config{
			Detect:     threshold.DetectOptions{Sysfs: os.DirFS(fixture), Override: threshold.CacheOverride{}},
			TuningPath: path,
			Machine:    &here,
		},
	}
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

func message(n, seed int) []byte {
	b := make([]byte, n)
	lmttest.Fill(b, seed)
	return b
}

func check(got []byte, seed int) error {
	want := message(len(got), seed)
	for i := range got {
		if got[i] != want[i] {
			return fmt.Errorf("byte %d of %d is %#x, want %#x", i, len(got), got[i], want[i])
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
		buf = message(n, seed)
		err = ep.Isend(&r, dst, tag, buf)
	case dst:
		buf = make([]byte, n)
		err = ep.Irecv(&r, src, tag, buf)
	default:
		return "", nil
	}
	if err == nil {
		err = sel.Wait(&r)
	}
	if err != nil {
		return "", err
	}
	if ep.Rank() == dst {
		if st := r.Status(); st.Len != n {
			return "", fmt.Errorf("received %d bytes from rank %d, want %d", st.Len, src, n)
		}
		if err := check(buf, seed); err != nil {
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
	sizes := []struct {
		n    int
		want string
	}{{40<<10 - 1, "eager"}, {40 << 10, "pipe"}, {256<<10 - 1, "pipe"}, {256 << 10, "vmsplice"}, {2<<20 - 1, "vmsplice"}, {2<<20 + 3, "shm"}}
	for _, tableOnly := range []bool{false, true} {
		t.Run(fmt.Sprintf("TableOnly=%v", tableOnly), func(t *testing.T) {
			launchtest.Run(t, 2, func(p launch.Proc) error {
				ep, err := nemesis.JoinProc(p, nil)
				if err != nil {
					return err
				}
				defer ep.Close()
				o := options(tuning(t, here, tt), 0, 1)
				o.TableOnly = tableOnly
				sel, err := auto.Attach(ep, o)
				if err != nil {
					return err
				}
				defer sel.Close()
				peer := 1 - p.Rank
				info := sel.Pair(peer).Info
				if info.TuningStatus != "loaded" || len(sel.Warnings()) != 0 {
					return fmt.Errorf("tuning file %s, warnings %q; want it loaded, no warning", info.TuningStatus, sel.Warnings())
				}
				if got, want := sel.EagerMax(), 40<<10-1; got != want || int64(got) != info.Table.LMTMin.Bytes-1 {
					return fmt.Errorf("eager limit %d, want %d (table LMTMin %d - 1)", got, want, info.Table.LMTMin.Bytes)
				}
				if (sel.Pair(peer).Adaptive == nil) != tableOnly {
					return fmt.Errorf("TableOnly %v but Adaptive %v", tableOnly, sel.Pair(peer).Adaptive)
				}
				for dir := range 2 {
					for i, s := range sizes {
						got, err := exchange(ep, sel, dir, 1-dir, i, s.n, 10*dir+i)
						if err != nil {
							return err
						}
						if got != s.want {
							return fmt.Errorf("%d bytes from rank %d went via %s on rank %d, want %s", s.n, dir, got, p.Rank, s.want)
						}
					}
				}
				return nil
			})
		})
	}
}

// TestEagerOverride: Options.Attach.EagerMax moves the switch, and the
// messages between it and the table's switch take the table's first
// backend.
func TestEagerOverride(t *testing.T) {
	launchtest.Run(t, 2, func(p launch.Proc) error {
		ep, err := nemesis.JoinProc(p, nil)
		if err != nil {
			return err
		}
		defer ep.Close()
		o := options(filepath.Join(t.TempDir(), "none.json"), 0, 1)
		o.Attach.EagerMax = 1000
		sel, err := auto.Attach(ep, o)
		if err != nil {
			return err
		}
		defer sel.Close()
		if sel.EagerMax() != 1000 {
			return fmt.Errorf("eager limit %d, want the 1000 given", sel.EagerMax())
		}
		for i, s := range []struct {
			n    int
			want string
		}{{1000, "eager"}, {1001, "shm"}, {64 << 10, "shm"}} {
			got, err := exchange(ep, sel, 0, 1, i, s.n, i)
			if err != nil {
				return err
			}
			if got != s.want {
				return fmt.Errorf("%d bytes went via %s on rank %d, want %s", s.n, got, p.Rank, s.want)
			}
		}
		return nil
	})
}

// TestForeignTuningFile: a tuning file measured on another host is ignored
// with a warning naming why, and the paper's formula makes the table: the
// pair shares the L3, so shm from MPICH's 64 KiB.
func TestForeignTuningFile(t *testing.T) {
	launchtest.Run(t, 2, func(p launch.Proc) error {
		ep, err := nemesis.JoinProc(p, nil)
		if err != nil {
			return err
		}
		defer ep.Close()
		foreign := here
		foreign.HostHash = "ffffffffffffffff"
		path := tuning(t, foreign, threshold.TunedTable{LMTMin: 4096, Rules: []threshold.TunedRule{{From: 4096, Backend: threshold.Pipe}}})
		_, refusal := threshold.LoadTuning(path, here)
		if !errors.Is(refusal, threshold.ErrForeignTuning) {
			return fmt.Errorf("LoadTuning of the foreign file: %v, want ErrForeignTuning", refusal)
		}
		sel, err := auto.Attach(ep, options(path, 0, 1))
		if err != nil {
			return err
		}
		defer sel.Close()
		info := sel.Pair(1 - p.Rank).Info
		if w := sel.Warnings(); info.TuningStatus != "ignored" || !slices.Equal(w, []string{"tuning file ignored: " + refusal.Error()}) {
			return fmt.Errorf("status %q, warnings %q; want the file ignored with its refusal", info.TuningStatus, w)
		}
		if info.Table.LMTMin.Source != threshold.SourceDefault || info.Table.Rules[0].Source != threshold.SourceFormula || sel.EagerMax() != 64<<10-1 {
			return fmt.Errorf("switch %v, first rule %+v, eager limit %d; want the formula's 64 KiB", info.Table.LMTMin, info.Table.Rules[0], sel.EagerMax())
		}
		for i, s := range []struct {
			n    int
			want string
		}{{64<<10 - 1, "eager"}, {64 << 10, "shm"}, {4 << 20, "shm"}} {
			got, err := exchange(ep, sel, 0, 1, i, s.n, i)
			if err != nil {
				return err
			}
			if got != s.want {
				return fmt.Errorf("%d bytes went via %s on rank %d, want %s", s.n, got, p.Rank, s.want)
			}
		}
		return nil
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
		for _, c := range []struct {
			o    auto.Options
			want string
		}{
			{withSelect, "auto: Options.Attach.Select is set: Attach installs its own selectors (call attach.Attach to choose yourself)"},
			{withPlacement, "auto: Options.Threshold.Env.Placement is set: Attach places each pair itself; give Options.CPUs and Options.Concurrent"},
			{negative, "auto: Options.Concurrent is -1, want 0 or more transfers"},
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
