package threshold

import "github.com/knemesis/knemesis/topology"

// CopyMode is how the KNEM-ABI module copies one transfer.
type CopyMode uint8

// Copy modes, cheapest first for small messages.
const (
	// CPUCopy: the module (or a user-space backend) copies with the CPU.
	CPUCopy CopyMode = iota
	// SyncDMA: the engine copies; the command returns when it is done.
	SyncDMA
	// AsyncDMA: the command returns at once; the engine writes SUCCESS into
	// the status array slot after the payload (KNEM's trailing one-byte
	// copy, §3.4), which the receiver polls between other work.
	AsyncDMA
)

func (m CopyMode) String() string {
	switch m {
	case CPUCopy:
		return "cpu"
	case SyncDMA:
		return "sync-dma"
	case AsyncDMA:
		return "async-dma"
	}
	return "invalid"
}

// Transfer is what [DecideCopy] looks at for one copy.
type Transfer struct {
	Size int64
	// DMAMin is the threshold for a lone transfer ([DMAMin], the table's,
	// or [MachineDMAMin]); DecideCopy lowers it for Concurrent transfers.
	DMAMin int64
	// Concurrent is the number of large transfers this process has in
	// flight, this one included.
	Concurrent int
	// Offload is true when the module can use a DMA channel (package
	// ioat's Status.Offload, or the GET_INFO DMA feature bit).
	Offload bool
	// StatusSlot is true when the status array is mapped and has a free
	// slot for this transfer's completion.
	StatusSlot bool
}

// DecideCopy is the one place that chooses between a CPU copy and DMA
// offload. Up to the (concurrency-lowered) DMA_min the CPU copy wins:
// submitting to the engine costs a device access per physically contiguous
// chunk (§4.2), and the message fits in the cache. Above it (§3.5: the
// cache must be at least twice the message) DMA keeps the receiver's cache
// clean; asynchronous completion is preferred because it lets the receiver
// keep polling and overlaps the copy (§4.3: KNEM enables async mode by
// default with I/OAT), and synchronous DMA stands in when there is no
// status slot. [Build] places its DMA rule at the same size
// ([Table.Choose] answers DMA exactly where DecideCopy would).
//
// It is a per-message call: no allocation, lock or map lookup.
func DecideCopy(t Transfer) CopyMode {
	if !t.Offload || t.DMAMin <= 0 || t.Size < offloadFrom(EffectiveDMAMin(t.DMAMin, t.Concurrent)) {
		return CPUCopy
	}
	if t.StatusSlot {
		return AsyncDMA
	}
	return SyncDMA
}

// offloadFrom is the smallest size DMA offload takes, given DMA_min: the
// paper wants the cache "at least two times larger" than the message, so a
// message of exactly DMA_min still fits and stays on the CPU.
func offloadFrom(dmaMin int64) int64 { return dmaMin + 1 }

// MachineDMAMin is DMA_min for a process that does not know its peer's
// CPU: the §3.5 threshold of the outermost cache of the first CPU opts
// detects, divided among the cores that share it. It is zero when the
// topology is unknown, which keeps every copy on the CPU: without DMA_min
// there is no evidence that offload pays.
func MachineDMAMin(opts topology.DetectOptions) int64 {
	topo, err := topology.Detect(opts)
	if err != nil || len(topo.CPUs) == 0 {
		return 0
	}
	cpu := topo.CPUs[0]
	t, _, err := DMAMin(topo, Placement{Sender: cpu, Receiver: cpu})
	if err != nil {
		return 0
	}
	return t.Bytes
}
