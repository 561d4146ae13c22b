package threshold_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/knemesis/knemesis/threshold"
	"github.com/knemesis/knemesis/topology"
)

// The paper's worked cases for DMA_min (§3.5).
func ExampleDMAMinBytes() {
	fmt.Println(threshold.FormatSize(threshold.DMAMinBytes(4<<20, 2))) // 4 MiB L2 shared by 2
	fmt.Println(threshold.FormatSize(threshold.DMAMinBytes(4<<20, 1))) // each process alone on its L2
	fmt.Println(threshold.FormatSize(threshold.DMAMinBytes(6<<20, 2))) // a 6 MiB L2
	// Output:
	// 1 MiB
	// 2 MiB
	// 1536 KiB
}

// Describe a machine by hand (as $KNEMESIS_CACHE would) and ask the table
// for a few sizes: the paper's Xeon E5345, two ranks behind one L2, the
// KNEM module loaded with an I/OAT channel.
func ExampleBuild() {
	o, err := topology.ParseOverride("L2:4M:0+4,1+5,2+6,3+7")
	if err != nil {
		log.Fatal(err)
	}
	topo, err := o.Apply(nil)
	if err != nil {
		log.Fatal(err)
	}
	table, err := threshold.Build(threshold.Env{
		Topology:  topo,
		Placement: threshold.Placement{Sender: 0, Receiver: 4},
		Knem:      true,
		DMA:       true,
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("DMA_min:", table.DMAMin)
	for _, size := range []int64{4 << 10, 256 << 10, 4 << 20} {
		c := table.Choose(size)
		fmt.Printf("%s: eager=%v backend=%q dma=%v\n", threshold.FormatSize(size), c.Eager, c.Backend, c.DMA)
	}
	// Output:
	// DMA_min: 1 MiB (formula: L2 shared by the pair 4 MiB / (2 × 2 cores sharing it))
	// 4 KiB: eager=true backend="" dma=false
	// 256 KiB: eager=false backend="shm" dma=false
	// 4 MiB: eager=false backend="knem" dma=true
}

// How `lmtbench tune` uses this package: measure the backends at each size
// between a pair of ranks, keep the table of the fastest with the machine's
// identity, and load it back where the machine matches. Here the
// measurements are made up: eager fastest up to 16 KiB, shm up to 1 MiB,
// CMA from 4 MiB; the knem module is not loaded.
func ExampleTune() {
	gbps := map[threshold.Backend]map[int]float64{
		threshold.Eager: {4 << 10: 8, 16 << 10: 8, 64 << 10: 5, 1 << 20: 3, 4 << 20: 2},
		threshold.Shm:   {4 << 10: 2, 16 << 10: 6, 64 << 10: 12, 1 << 20: 14, 4 << 20: 10},
		threshold.CMA:   {4 << 10: 1, 16 << 10: 3, 64 << 10: 7, 1 << 20: 11, 4 << 20: 16},
	}
	measure := func(backend string, size int) (float64, error) {
		// Run a ping-pong of size bytes with backend between the pair,
		// return payload bytes per second, or an error wrapping
		// threshold.ErrBackendUnavailable.
		rate, ok := gbps[threshold.Backend(backend)]
		if !ok {
			return 0, fmt.Errorf("%s: %w", backend, threshold.ErrBackendUnavailable)
		}
		return rate[size] * 1e9, nil
	}
	sizes := []int{4 << 10, 16 << 10, 64 << 10, 1 << 20, 4 << 20}
	tt, err := threshold.Tune(measure, sizes, threshold.Eager, threshold.Shm, threshold.CMA, threshold.Knem)
	if err != nil {
		log.Fatal(err)
	}
	tt.SharedCache, tt.Concurrent, tt.Pair = true, 1, [2]int{0, 1}
	fmt.Println("lmt_min:", threshold.FormatSize(tt.LMTMin))
	for _, r := range tt.Rules {
		fmt.Printf("from %s: %s\n", threshold.FormatSize(r.From), r.Backend)
	}

	// The file belongs to this machine (CPU, caches, kernel, host).
	topo, err := topology.Detect(topology.DetectOptions{})
	if err != nil {
		log.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "knemesis-tuning")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "tuning.json") // threshold.DefaultTuningPath() in real use
	file := &threshold.TuningFile{Machine: threshold.ThisMachine(topo), Measured: time.Now()}
	file.Put(*tt)
	if err := file.Save(path); err != nil {
		log.Fatal(err)
	}
	loaded, err := threshold.LoadTuning(path, threshold.ThisMachine(topo))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("tables loaded:", len(loaded.Tables), "measured points:", len(loaded.Tables[0].Points))
	// Output:
	// lmt_min: 64 KiB
	// from 64 KiB: shm
	// from 4 MiB: cma
	// tables loaded: 1 measured points: 15
}

// A Learner starts a size class from the table's choice, measures every
// candidate, and keeps the fastest: here the eager path loses to one CMA
// copy at 16 KiB, though the formula's switch (64 KiB) said eager.
func ExampleLearner() {
	t := &threshold.Table{LMTMin: threshold.Threshold{Bytes: 64 << 10}, Rules: []threshold.Rule{{From: 64 << 10, Backend: threshold.Shm}}}
	l, err := threshold.NewLearner(t, []threshold.Backend{threshold.Eager, threshold.CMA}, 64<<10-1, 4<<10-1)
	if err != nil {
		log.Fatal(err)
	}
	nsPerByte := map[threshold.Backend]float64{threshold.Eager: 0.08, threshold.CMA: 0.05}
	const size = 16 << 10
	for range 8 { // a round: one cold and three counted messages each
		b := l.Choose(size)
		l.Record(size, l.Index(b), time.Duration(nsPerByte[b]*size))
	}
	s := l.State(size)
	fmt.Println(l.Choose(size), s.Settled, s.Rounds, s.NextRecheck)
	// Output: cma true 1 64
}
