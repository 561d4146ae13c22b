package threshold_test

import (
	"fmt"
	"log"
	"os"
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

// How `lmtbench tune` uses this package: measure each pair kind the
// machine has, keep the result with the machine's identity.
func ExampleTune() {
	topo, err := topology.Detect(topology.DetectOptions{})
	if err != nil {
		log.Fatal(err)
	}
	file := &threshold.TuningFile{Machine: threshold.ThisMachine(topo), Measured: time.Now()}
	shared, unshared, hasShared, hasUnshared := topo.Pairs()
	sizes := []int{4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20}
	for _, kind := range []struct {
		pair   [2]int
		ok     bool
		shared bool
	}{{shared, hasShared, true}, {unshared, hasUnshared, false}} {
		if !kind.ok {
			continue
		}
		measure := func(backend string, size int) (float64, error) {
			// Run a ping-pong of size bytes with backend between ranks
			// pinned to kind.pair, return payload bytes per second, or an
			// error wrapping threshold.ErrBackendUnavailable.
			return 0, fmt.Errorf("%s: %w", backend, threshold.ErrBackendUnavailable)
		}
		tt, err := threshold.Tune(measure, sizes, threshold.Eager, threshold.Shm, threshold.CMA, threshold.Vmsplice, threshold.Knem)
		if err != nil {
			log.Print(err) // here: nothing could be measured
			continue
		}
		tt.SharedCache, tt.Pair = kind.shared, kind.pair
		file.Put(*tt)
	}
	path, err := threshold.DefaultTuningPath()
	if err != nil {
		log.Fatal(err)
	}
	if len(file.Tables) > 0 {
		if err := file.Save(path); err != nil {
			log.Fatal(err)
		}
	}
	info, err := threshold.Load(threshold.Config{TuningPath: path, Env: threshold.Env{Placement: threshold.Placement{Sender: 0, Receiver: 1}}})
	if err != nil {
		log.Fatal(err)
	}
	info.Describe(os.Stdout)
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
