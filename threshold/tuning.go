package threshold

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/knemesis/knemesis/internal/bytesize"
	"github.com/knemesis/knemesis/topology"
)

// EnvTuning names the environment variable holding the tuning file's path.
const EnvTuning = "KNEMESIS_TUNING"

// TuningVersion is the tuning file format written by this package.
const TuningVersion = 1

// ErrForeignTuning means a tuning file was measured on another machine (or
// on this one with different hardware, kernel or cache override); its
// thresholds would mislead, so it is ignored.
var ErrForeignTuning = errors.New("tuning file is from another machine")

// TuningFile holds measured switch sizes and the machine they belong to.
type TuningFile struct {
	Version  int          `json:"version"`
	Machine  Machine      `json:"machine"`
	Measured time.Time    `json:"measured"`
	Tables   []TunedTable `json:"tables"`
}

// Machine identifies where a tuning file was measured.
type Machine struct {
	CPUModel string `json:"cpu_model"`
	CPUs     int    `json:"cpus"`
	Caches   string `json:"caches"` // e.g. "L1d 32 KiB ×2, L2 512 KiB ×2, L3 32 MiB ×1"
	Kernel   string `json:"kernel"` // uname release
	HostHash string `json:"host_hash"`
}

// TunedTable is the result of one [Tune] run: one kind of pair (sharing a
// cache or not), one level of concurrency.
type TunedTable struct {
	SharedCache bool        `json:"shared_cache"`
	Concurrent  int         `json:"concurrent"` // transfers in flight per process while measured
	Pair        [2]int      `json:"pair"`       // sender and receiver CPU measured
	LMTMin      int64       `json:"lmt_min,omitempty"`
	Rules       []TunedRule `json:"rules"`
	Points      []Point     `json:"points"`
}

// TunedRule says Backend was fastest from size From on.
type TunedRule struct {
	From    int64   `json:"from"`
	Backend Backend `json:"backend"`
}

// Point is one measurement.
type Point struct {
	Size        int     `json:"size"`
	Backend     Backend `json:"backend"`
	BytesPerSec float64 `json:"bytes_per_sec"`
}

// table finds the measured table for a pair kind; nil when f is nil or has
// none. Concurrency classes are lone (≤1) and several (>1).
func (f *TuningFile) table(shared, concurrent bool) *TunedTable {
	if f == nil {
		return nil
	}
	for i := range f.Tables {
		if tt := &f.Tables[i]; tt.SharedCache == shared && (tt.Concurrent > 1) == concurrent {
			return tt
		}
	}
	return nil
}

// Put adds tt to the file, replacing the table for the same kind of pair.
func (f *TuningFile) Put(tt TunedTable) {
	if old := f.table(tt.SharedCache, tt.Concurrent > 1); old != nil {
		*old = tt
		return
	}
	f.Tables = append(f.Tables, tt)
}

// ThisMachine describes the running machine with the given topology.
func ThisMachine(t *topology.Topology) Machine {
	m := Machine{CPUModel: topology.CPUModel(), CPUs: len(t.CPUs), Caches: cacheSummary(t)}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		m.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	if h, err := os.Hostname(); err == nil {
		sum := sha256.Sum256([]byte(h))
		m.HostHash = hex.EncodeToString(sum[:8])
	}
	return m
}

func cacheSummary(t *topology.Topology) string {
	var parts []string
	for i := 0; i < len(t.Caches); {
		j := i
		for j < len(t.Caches) && t.Caches[j].Name() == t.Caches[i].Name() && t.Caches[j].Size == t.Caches[i].Size {
			j++
		}
		parts = append(parts, fmt.Sprintf("%s %s ×%d", t.Caches[i].Name(), bytesize.Format(t.Caches[i].Size), j-i))
		i = j
	}
	return strings.Join(parts, ", ")
}

// Differences lists the fields in which m and o differ; nil when equal.
func (m Machine) Differences(o Machine) []string {
	var d []string
	diff := func(name, a, b string) {
		if a != b {
			d = append(d, fmt.Sprintf("%s %q here, %q in file", name, a, b))
		}
	}
	diff("cpu model", m.CPUModel, o.CPUModel)
	diff("cpus", fmt.Sprint(m.CPUs), fmt.Sprint(o.CPUs))
	diff("caches", m.Caches, o.Caches)
	diff("kernel", m.Kernel, o.Kernel)
	diff("host", m.HostHash, o.HostHash)
	return d
}

// DefaultTuningPath is $KNEMESIS_TUNING, else knemesis/tuning.json in the
// user's configuration directory.
func DefaultTuningPath() (string, error) {
	if p := os.Getenv(EnvTuning); p != "" {
		return p, nil
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("tuning file: %w (set %s)", err, EnvTuning)
	}
	return filepath.Join(dir, "knemesis", "tuning.json"), nil
}

// LoadTuning reads the tuning file at path and checks it belongs to here.
// A missing file yields an error satisfying errors.Is(err, fs.ErrNotExist);
// a foreign one, ErrForeignTuning with the differences.
func LoadTuning(path string, here Machine) (*TuningFile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tuning file: %w", err)
	}
	return parseTuning(b, path, here)
}

// parseTuning is LoadTuning on the file's content b: one JSON object with
// only the fields of TuningFile, of this version, from here, whose every
// table is valid.
func parseTuning(b []byte, path string, here Machine) (*TuningFile, error) {
	var f TuningFile
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		if err == io.EOF {
			return nil, fmt.Errorf("tuning file %s: empty", path)
		}
		return nil, fmt.Errorf("tuning file %s: %w", path, err)
	}
	if end := dec.InputOffset(); !isEOF(dec) {
		return nil, fmt.Errorf("tuning file %s: data after the JSON object, which ends at byte %d", path, end)
	}
	if f.Version != TuningVersion {
		return nil, fmt.Errorf("tuning file %s: version %d, this program reads %d", path, f.Version, TuningVersion)
	}
	if d := here.Differences(f.Machine); d != nil {
		return nil, fmt.Errorf("%w: %s: %s", ErrForeignTuning, path, strings.Join(d, "; "))
	}
	for i, tt := range f.Tables {
		if err := tt.validate(); err != nil {
			return nil, fmt.Errorf("tuning file %s: table %d: %w", path, i, err)
		}
	}
	return &f, nil
}

// isEOF reports whether dec holds nothing but white space any more.
func isEOF(dec *json.Decoder) bool {
	_, err := dec.Token()
	return err == io.EOF
}

func (tt *TunedTable) validate() error {
	if len(tt.Rules) == 0 {
		return errors.New("no rules")
	}
	for i, r := range tt.Rules {
		if !r.Backend.Valid() || r.Backend == Eager {
			return fmt.Errorf("rule %d: unknown backend %q", i, r.Backend)
		}
		if r.From < 0 || (i > 0 && r.From <= tt.Rules[i-1].From) {
			return fmt.Errorf("rule %d: sizes must ascend (from %d)", i, r.From)
		}
	}
	if tt.LMTMin < 0 {
		return fmt.Errorf("negative lmt_min %d", tt.LMTMin)
	}
	return nil
}

func (f *TuningFile) writeMachine(w io.Writer) error {
	return json.NewEncoder(w).Encode(f.Machine)
}

// Save writes f to path atomically (a reader never sees half a file),
// creating the directory.
func (f *TuningFile) Save(path string) error {
	f.Version = TuningVersion
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("tuning file: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tuning-*.json")
	if err != nil {
		return fmt.Errorf("tuning file: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("tuning file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("tuning file: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("tuning file: %w", err)
	}
	return nil
}
