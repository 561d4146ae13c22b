// Package rawbench builds and runs csrc/raw.c, the C reference for the LMT
// benchmarks: the bare mechanism of each backend (pipe, vmsplice,
// process_vm_readv, a shared ring) between two pinned processes, measured
// in the same run as the Go engine so that the two are compared as a ratio.
package rawbench

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
)

var (
	once   sync.Once
	binary string
	errBin error
)

// Build compiles the reference with gcc once per process and returns the
// binary's path.
func Build() (string, error) {
	once.Do(func() {
		_, self, _, _ := runtime.Caller(0)
		src := filepath.Join(filepath.Dir(self), "csrc", "raw.c")
		text, err := os.ReadFile(src)
		if err != nil {
			errBin = err
			return
		}
		// One binary per version of the source, reused across runs.
		sum := sha256.Sum256(text)
		dir := filepath.Join(os.TempDir(), "knemesis-rawbench")
		binary = filepath.Join(dir, "raw-"+hex.EncodeToString(sum[:8]))
		if _, err := os.Stat(binary); err == nil {
			return
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			errBin = err
			return
		}
		tmp := binary + ".tmp" + strconv.Itoa(os.Getpid())
		out, err := exec.Command("gcc", "-O2", "-Wall", "-o", tmp, src).CombinedOutput()
		if err != nil {
			errBin = fmt.Errorf("gcc %s: %v\n%s", src, err, out)
			return
		}
		errBin = os.Rename(tmp, binary)
	})
	return binary, errBin
}

// Params shape one run of the reference.
type Params struct {
	Mech     string // pipe, vmsplice, cma, cma-write, cma-split, cma-split-preset, shm
	PingPong bool
	Size     int
	Iters    int
	Chunk    int // bytes per process_vm_readv call
	Slots    int // shm ring
	SlotSize int
	PipeSize int
}

// Run runs the reference and returns its throughput in GB/s (10^9 payload
// bytes per second; ping-pong counts both directions, like NetPIPE).
func Run(p Params) (float64, error) {
	bin, err := Build()
	if err != nil {
		return 0, err
	}
	shape := "stream"
	if p.PingPong {
		shape = "pingpong"
	}
	args := []string{p.Mech, shape, strconv.Itoa(p.Size), strconv.Itoa(p.Iters),
		strconv.Itoa(p.Chunk), strconv.Itoa(p.Slots), strconv.Itoa(p.SlotSize), strconv.Itoa(p.PipeSize)}
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("raw %v: %v\n%s", args, err, out)
	}
	f := strings.Fields(string(out))
	if len(f) != 7 || f[0] != "raw" {
		return 0, fmt.Errorf("raw %v: unexpected output %q", args, out)
	}
	return strconv.ParseFloat(f[6], 64)
}
