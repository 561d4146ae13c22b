package threshold

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/knemesis/knemesis/internal/bytesize"
	"github.com/knemesis/knemesis/topology"
)

// Config is what [Load] needs: where to detect, where the tuning file is,
// and the job's facts that detection cannot see.
type Config struct {
	Detect topology.DetectOptions
	// TuningPath is the tuning file; "" means [DefaultTuningPath].
	TuningPath string
	// Machine identifies this machine for the tuning file; nil means
	// [ThisMachine]. Tests set it to check the refusal of foreign files.
	Machine *Machine
	// Env's Topology and Tuning are filled by Load; the rest is the job's.
	Env Env
}

// Info is the selector's state, as `lmtbench info` prints it.
type Info struct {
	Topology     *topology.Topology
	Machine      Machine
	TuningPath   string
	TuningStatus string // "loaded", "none", or why it was ignored
	Table        *Table
	// Warnings are problems the user should hear about that did not stop
	// the selector (a foreign or unreadable tuning file).
	Warnings []string

	// What Load found before building the table, for For.
	tuning       *TuningFile
	loadWarnings []string
}

// Load detects the topology, loads the tuning file if it belongs to this
// machine, and builds the table for cfg.Env's placement. A foreign or
// broken tuning file is a warning, not an error: the formula stands in.
func Load(cfg Config) (*Info, error) {
	topo, err := topology.Detect(cfg.Detect)
	if err != nil {
		return nil, err
	}
	info := &Info{Topology: topo, TuningStatus: "none"}
	if cfg.Machine != nil {
		info.Machine = *cfg.Machine
	} else {
		info.Machine = ThisMachine(topo)
	}
	info.TuningPath = cfg.TuningPath
	if info.TuningPath == "" {
		if info.TuningPath, err = DefaultTuningPath(); err != nil {
			info.Warnings = append(info.Warnings, err.Error())
		}
	}
	env := cfg.Env
	env.Topology = topo
	if info.TuningPath != "" {
		f, err := LoadTuning(info.TuningPath, info.Machine)
		switch {
		case err == nil:
			env.Tuning, info.TuningStatus = f, "loaded"
		case errors.Is(err, fs.ErrNotExist):
			info.TuningStatus = "none (formula in use; run `lmtbench tune`)"
		default:
			info.TuningStatus = "ignored"
			info.Warnings = append(info.Warnings, "tuning file ignored: "+err.Error())
		}
	}
	info.tuning = env.Tuning
	info.loadWarnings = slices.Clone(info.Warnings)
	if err := info.build(env); err != nil {
		return nil, err
	}
	return info, nil
}

// For returns the Info of another pair of processes on the same machine:
// the topology, machine and tuning file Load found, and the table built
// for env's placement and availability (env's Topology and Tuning are
// replaced by Load's). A process talking to many peers calls Load once and
// For once per peer, instead of detecting the machine again for each.
func (i *Info) For(env Env) (*Info, error) {
	out := &Info{Topology: i.Topology, Machine: i.Machine, TuningPath: i.TuningPath, TuningStatus: i.TuningStatus,
		tuning: i.tuning, loadWarnings: i.loadWarnings}
	env.Topology, env.Tuning = i.Topology, i.tuning
	out.Warnings = slices.Clone(i.loadWarnings)
	if err := out.build(env); err != nil {
		return nil, err
	}
	return out, nil
}

func (i *Info) build(env Env) error {
	t, err := Build(env)
	if err != nil {
		return err
	}
	i.Table = t
	i.Warnings = append(i.Warnings, t.Notes...)
	return nil
}

// Describe prints topology, thresholds with their sources, and the
// size→backend table.
func (i *Info) Describe(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	p := func(format string, a ...any) { fmt.Fprintf(tw, format, a...) }
	p("machine\t%s, %d CPUs, kernel %s\n", i.Machine.CPUModel, i.Machine.CPUs, i.Machine.Kernel)
	p("caches\t\n")
	for _, c := range i.Topology.Caches {
		p("  %s\t%s\tcpus %s\t%s\n", c.Name(), bytesize.Format(c.Size), c.CPUs, c.Source)
	}
	for _, n := range i.Topology.Notes {
		p("  note\t%s\n", n)
	}
	t := i.Table
	shared := "no cache shared"
	if t.Shared {
		shared = t.Cache.Name() + " shared"
	}
	if t.LineLatency > 0 {
		shared += fmt.Sprintf("; a cache line crosses in %v (measured)", t.LineLatency)
	}
	p("pair\t%s\n", shared)
	p("eager→LMT\t%s\n", t.LMTMin)
	p("DMA_min\t%s\n", t.DMAMin)
	p("tuning file\t%s: %s\n", i.TuningPath, i.TuningStatus)
	p("table\t\n")
	p("  < %s\teager\t\n", bytesize.Format(t.LMTMin.Bytes))
	for _, r := range t.Rules {
		name := string(r.Backend)
		if r.DMA {
			name += "+dma"
		}
		p("  %s\t%s\t%s: %s\n", r.Range(), name, r.Source, r.Why)
	}
	for _, warn := range i.Warnings {
		p("warning\t%s\n", strings.TrimSpace(warn))
	}
	return tw.Flush()
}
