package threshold

import (
	"errors"
	"fmt"
	"time"

	"github.com/knemesis/knemesis/internal/bytesize"
	"github.com/knemesis/knemesis/topology"
)

// DMAMinBytes is the formula of §3.5: a receiver copying a message through
// its cache reads it in and writes it out, so the copy stays harmless while
// the cache holds twice the message for each of its users:
//
//	DMA_min = cache size / (2 × users of the cache)
//
// Above it the copy would flush the cache, and an offloaded DMA copy, which
// touches no cache line, pays. users below 1 count as 1.
func DMAMinBytes(cacheSize int64, users int) int64 {
	return cacheSize / (2 * int64(max(users, 1)))
}

// Placement says where a transfer's two processes run and what else the job
// does at the same time. CPU numbers are those of the Topology.
type Placement struct {
	Sender, Receiver int
	// JobCPUs holds the CPU of every process of the job, when known. With
	// it, DMA_min divides by the processes using the cache (§3.5, first
	// formula); without it, by the cores sharing the cache (second
	// formula: one process per core, as MPI jobs usually run). Cores are
	// counted as logical CPUs: an SMT thread can host a rank too, and the
	// lower threshold errs on the side of keeping the cache.
	JobCPUs []int
	// Concurrent is the number of large transfers each process has in
	// flight at once (collectives, §4.4); 0 or 1 is a lone transfer.
	Concurrent int
	// LineLatency is how long a cache line took, one way, between the
	// two processes when measured (nemesis.Endpoint.LineLatency); 0 when
	// not measured. It is reported, and decides nothing by itself.
	LineLatency time.Duration
	// Apart says the measured line falls in the slow one of two regimes
	// the job's readings show ([FindRegimes]): Build then treats a pair
	// the topology says shares a cache as sharing none (a VM's topology
	// does not follow its vCPUs around the host).
	Apart bool
}

// Threshold is a size in bytes and where it came from.
type Threshold struct {
	Bytes  int64
	Source Source
	Why    string
}

func (t Threshold) String() string {
	return fmt.Sprintf("%s (%s: %s)", bytesize.Format(t.Bytes), t.Source, t.Why)
}

// FormatSize writes n bytes as this package's tables do: "1 MiB", "1536 KiB".
func FormatSize(n int64) string { return bytesize.Format(n) }

// DMAMin applies the formula to a placement. The cache is the outermost one
// the pair shares; when they share none, the receiver's outermost cache.
// The paper correlates the threshold with "the largest cache" the receiving
// copy goes through (its L2, the last level on the Xeon E5345): the copy
// only evicts what it must when that cache still holds it. A private L2
// below a shared L3 is not the limit: the copy spills into the L3 without
// harm to memory traffic.
//
// With several concurrent transfers per process the cache is split further,
// so the threshold is divided by their number. This is the paper's
// explanation of I/OAT paying from ~200 KiB in an 8-process Alltoall
// instead of 1 MiB (§4.4): 4 MiB / (2 × 2 × 5) ≈ 205 KiB for five of the
// seven peers' transfers in flight.
func DMAMin(t *topology.Topology, p Placement) (Threshold, topology.Cache, error) {
	for _, cpu := range []int{p.Sender, p.Receiver} {
		if !t.CPUs.Contains(cpu) {
			return Threshold{}, topology.Cache{}, fmt.Errorf("DMA_min: cpu%d: %w (%s)", cpu, ErrUnknownCPU, t.CPUs)
		}
	}
	c, shared := t.SharedCache(p.Sender, p.Receiver)
	where := "shared by the pair"
	if !shared {
		var ok bool
		if c, ok = t.LastLevel(p.Receiver); !ok {
			return Threshold{}, c, fmt.Errorf("DMA_min: no data cache known for receiver cpu%d", p.Receiver)
		}
		where = fmt.Sprintf("of receiver cpu%d, none shared", p.Receiver)
	}
	users, unit := len(c.CPUs), "cores sharing it"
	if p.JobCPUs != nil {
		users, unit = max(topology.ProcessesUsing(c, p.JobCPUs), 1), "job processes using it"
	}
	conc := max(p.Concurrent, 1)
	why := fmt.Sprintf("%s %s %s / (2 × %d %s)", c.Name(), where, bytesize.Format(c.Size), users, unit)
	if conc > 1 {
		why += fmt.Sprintf(" / %d concurrent transfers", conc)
	}
	return Threshold{Bytes: EffectiveDMAMin(DMAMinBytes(c.Size, users), conc), Source: SourceFormula, Why: why}, c, nil
}

// EffectiveDMAMin lowers a DMA_min for concurrent transfers, as [DMAMin]
// does; [DecideCopy] uses it for per-transfer decisions.
func EffectiveDMAMin(dmaMin int64, concurrent int) int64 {
	return dmaMin / int64(max(concurrent, 1))
}

// ErrUnknownCPU means a placement names a CPU the topology does not describe.
var ErrUnknownCPU = errors.New("CPU not in the topology")
