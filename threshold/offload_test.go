package threshold

import (
	"fmt"
	"os"
	"testing"

	"github.com/knemesis/knemesis/topology"
)

func TestDecideCopy(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		tr   Transfer
		want CopyMode
	}{
		{Transfer{Size: 4 * mib, DMAMin: mib, Offload: false, StatusSlot: true}, CPUCopy},
		{Transfer{Size: mib - 1, DMAMin: mib, Offload: true, StatusSlot: true}, CPUCopy},
		{Transfer{Size: mib, DMAMin: mib, Offload: true, StatusSlot: true}, CPUCopy},
		{Transfer{Size: mib + 1, DMAMin: mib, Offload: true, StatusSlot: true}, AsyncDMA},
		{Transfer{Size: mib + 1, DMAMin: mib, Offload: true}, SyncDMA},
		{Transfer{Size: 4 * mib, DMAMin: 0, Offload: true, StatusSlot: true}, CPUCopy},
		// §4.4: with five transfers in flight, 1 MiB falls to ~205 KiB.
		{Transfer{Size: 200 << 10, DMAMin: mib, Concurrent: 5, Offload: true, StatusSlot: true}, CPUCopy},
		{Transfer{Size: 205 << 10, DMAMin: mib, Concurrent: 5, Offload: true, StatusSlot: true}, AsyncDMA},
		{Transfer{Size: 205 << 10, DMAMin: mib, Concurrent: 5, Offload: true}, SyncDMA},
		{Transfer{Size: 205 << 10, DMAMin: mib, Concurrent: 1, Offload: true, StatusSlot: true}, CPUCopy},
		{Transfer{Size: 205 << 10, DMAMin: mib, Concurrent: 0, Offload: true, StatusSlot: true}, CPUCopy},
	}
	for _, tt := range tests {
		if got := DecideCopy(tt.tr); got != tt.want {
			t.Errorf("DecideCopy(%+v) = %v, want %v", tt.tr, got, tt.want)
		}
	}
	tr := Transfer{Size: 4 * mib, DMAMin: mib, Offload: true, StatusSlot: true}
	if a := testing.AllocsPerRun(100, func() { DecideCopy(tr) }); a != 0 {
		t.Errorf("DecideCopy allocates %v times", a)
	}
}

// TestTableOffloadsWhereDecideCopyDoes: the table's DMA rule and the
// per-transfer decision are one rule, alone and with concurrent transfers.
func TestTableOffloadsWhereDecideCopyDoes(t *testing.T) {
	for _, conc := range []int{1, 5} {
		p := Placement{Sender: 0, Receiver: 4, Concurrent: conc}
		table, err := Build(Env{Topology: mustSysfs(t, "xeon-e5345"), Placement: p, Knem: true, DMA: true})
		if err != nil {
			t.Fatal(err)
		}
		lone, _, err := DMAMin(mustSysfs(t, "xeon-e5345"), Placement{Sender: 0, Receiver: 4})
		if err != nil {
			t.Fatal(err)
		}
		edge := table.DMAMin.Bytes
		for _, size := range []int64{edge - 1, edge, edge + 1, 2 * edge} {
			table := table.Choose(size).DMA
			decided := DecideCopy(Transfer{Size: size, DMAMin: lone.Bytes, Concurrent: conc, Offload: true}) != CPUCopy
			if table != decided {
				t.Errorf("%d concurrent, %d bytes: the table says DMA %v, DecideCopy %v", conc, size, table, decided)
			}
		}
	}
}

// TestMachineDMAMin: the first CPU's outermost cache over the cores that
// share it, and zero when no source describes a cache.
func TestMachineDMAMin(t *testing.T) {
	kvm := topology.DetectOptions{Sysfs: os.DirFS(fixtures + "epyc-kvm"), Override: topology.CacheOverride{}}
	if got := MachineDMAMin(kvm); got != 8<<20 {
		t.Errorf("epyc-kvm: %d, want 32 MiB / (2 × 2) = 8 MiB", got)
	}
	none := topology.DetectOptions{
		Sysfs:    os.DirFS(fixtures + "vm-nocache"),
		CPUID:    func(topology.CPUSet) (map[int]topology.CPUIDInfo, error) { return nil, topology.ErrNoCPUID },
		Override: topology.CacheOverride{},
	}
	if got := MachineDMAMin(none); got != 0 {
		t.Errorf("no cache described: %d, want 0", got)
	}
}

func ExampleDecideCopy() {
	// A 4 MiB L2 shared by two cores gives DMA_min = 1 MiB (§3.5).
	for _, size := range []int64{512 << 10, 2 << 20} {
		m := DecideCopy(Transfer{Size: size, DMAMin: 1 << 20, Offload: true, StatusSlot: true})
		fmt.Printf("%d KiB: %v\n", size>>10, m)
	}
	// Output:
	// 512 KiB: cpu
	// 2048 KiB: async-dma
}
