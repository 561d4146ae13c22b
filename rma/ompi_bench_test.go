package rma_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/knemesis/knemesis/rma"
)

// The comparison with Open MPI's one-sided communication: testdata/osc.c,
// built with Open MPI's mpicc and run under its mpirun, measures MPI_Put and
// MPI_Get in passive-target mode (MPI_Win_lock_all, MPI_Win_flush) the way
// ompiMeasure measures package rma, with the same sizes, iterations and
// bursts, in the same benchmark run. It runs the two programs the way
// lmtbench's peers run Open MPI (mpirun.openmpi, --allow-run-as-root when
// root, vader's files in a directory of /dev/shm of this run alone,
// removed after it).

// ompiSizes are the sizes compared, as lmtbench peers' defaults (8, 64K,
// 1M, 4M) with a page between.
var ompiSizes = []int{8, 4096, 64 << 10, 1 << 20, 4 << 20}

// ompiBurst, ompiIters and ompiRounds are testdata/osc.c's BURST,
// osc_iters and osc_rounds: keep them in step.
const ompiBurst = 16

func clamp(v, lo, hi int) int { return max(lo, min(v, hi)) }
func ompiIters(size int) int  { return clamp((256<<20)/(size+1), 20, 20000) }
func ompiRounds(size int) int { return clamp((1024<<20)/(ompiBurst*(size+1)), 5, 2000) }

// ompiSample is one operation at one size: latency (operation then
// completion at the target) and throughput (bursts of operations, then
// one completion).
type ompiSample struct {
	latUs, gbs float64
}

// BenchmarkVsOpenMPI: put and get latency and throughput, 8 B to 4 MiB,
// through an allocated window against MPI_Win_allocate (osc/sm) and
// through CMA on an exposed window against MPI_Win_create (osc over
// vader's single copy), with the ratios, one table per pair. Run it once:
//
//	go test -run '^$' -bench VsOpenMPI -benchtime 1x ./rma
func BenchmarkVsOpenMPI(b *testing.B) {
	osc := buildOSC(b)
	for _, c := range []struct{ kind, win string }{{"allocated", "allocate"}, {"cma", "create"}} {
		b.Run(c.kind, func(b *testing.B) {
			theirs, err := runOSC(osc, c.win)
			if err != nil {
				b.Fatal(err)
			}
			_, w := startPeer(b, c.kind, ompiSizes[len(ompiSizes)-1])
			fmt.Printf("\nrma %s window vs Open MPI MPI_Win_%s, passive target (lock_all, flush)\n", c.kind, c.win)
			fmt.Printf("%-4s %9s %12s %12s %7s %12s %12s %7s\n", "op", "size", "rma µs", "ompi µs", "ratio", "rma GB/s", "ompi GB/s", "ratio")
			for _, size := range ompiSizes {
				for _, get := range []bool{false, true} {
					name := map[bool]string{false: "put", true: "get"}[get]
					mine, err := ompiMeasure(w, get, size)
					if err != nil {
						b.Fatal(err)
					}
					t, ok := theirs[name+" "+strconv.Itoa(size)]
					if !ok {
						b.Fatalf("osc printed no %s of %d bytes", name, size)
					}
					fmt.Printf("%-4s %9d %12.3f %12.3f %7.2f %12.3f %12.3f %7.2f\n", name, size,
						mine.latUs, t.latUs, mine.latUs/t.latUs, mine.gbs, t.gbs, mine.gbs/t.gbs)
				}
			}
			fmt.Println("(latency ratio: rma ÷ Open MPI, lower is better; throughput ratio: rma ÷ Open MPI, higher is better)")
		})
	}
}

// ompiMeasure is osc.c's measure for one rma operation toward rank 1.
func ompiMeasure(w *rma.Window, get bool, size int) (ompiSample, error) {
	buf := make([]byte, size)
	pattern(buf, 2)
	var ops [ompiBurst]rma.Op
	start := func(op *rma.Op) error {
		if get {
			return w.Get(op, 1, 0, buf)
		}
		return w.Put(op, 1, 0, buf)
	}
	one := func() error {
		if err := start(&ops[0]); err != nil {
			return err
		}
		return w.Wait(&ops[0])
	}
	for range 10 {
		if err := one(); err != nil {
			return ompiSample{}, err
		}
	}
	iters, rounds := ompiIters(size), ompiRounds(size)
	t0 := time.Now()
	for range iters {
		if err := one(); err != nil {
			return ompiSample{}, err
		}
	}
	lat := time.Since(t0).Seconds() / float64(iters) * 1e6
	t0 = time.Now()
	for range rounds {
		for k := range ops {
			if err := start(&ops[k]); err != nil {
				return ompiSample{}, err
			}
		}
		if err := w.Flush(1); err != nil {
			return ompiSample{}, err
		}
	}
	gbs := float64(size) * ompiBurst * float64(rounds) / time.Since(t0).Seconds() / 1e9
	return ompiSample{latUs: lat, gbs: gbs}, nil
}

// buildOSC builds testdata/osc.c with Open MPI's mpicc, once per run.
func buildOSC(b *testing.B) string {
	b.Helper()
	for _, p := range []string{"mpirun.openmpi", "mpicc.openmpi"} {
		if _, err := exec.LookPath(p); err != nil {
			b.Skipf("lacks openmpi: %s absent: Open MPI cannot be measured (apt-get install openmpi-bin libopenmpi-dev; mk/rma.mk)", p)
		}
	}
	bin := filepath.Join(b.TempDir(), "osc")
	if out, err := exec.Command("mpicc.openmpi", "-O2", "-Wall", "-o", bin, "testdata/osc.c").CombinedOutput(); err != nil {
		b.Fatalf("mpicc.openmpi testdata/osc.c: %v\n%s", err, out)
	}
	return bin
}

// runOSC runs osc over window kind win at every size and returns its
// samples by "op size".
func runOSC(osc, win string) (map[string]ompiSample, error) {
	shm, err := os.MkdirTemp("/dev/shm", "knemesis-rma-ompi-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(shm)
	args := []string{"-np", "2", "--bind-to", "none", "--mca", "btl_vader_backing_directory", shm}
	if os.Geteuid() == 0 {
		args = append([]string{"--allow-run-as-root"}, args...)
	}
	args = append(args, osc, win)
	for _, s := range ompiSizes {
		args = append(args, strconv.Itoa(s))
	}
	cmd := exec.Command("mpirun.openmpi", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("mpirun.openmpi %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.Bytes())
	}
	got := map[string]ompiSample{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 6 || (f[0] != "put" && f[0] != "get") {
			continue
		}
		lat, err1 := strconv.ParseFloat(f[3], 64)
		gbs, err2 := strconv.ParseFloat(f[5], 64)
		if err1 != nil || err2 != nil || lat <= 0 || gbs <= 0 {
			return nil, fmt.Errorf("osc line %q: latency and GB/s must be positive numbers", sc.Text())
		}
		got[f[0]+" "+f[1]] = ompiSample{latUs: lat, gbs: gbs}
	}
	return got, nil
}
