package ioat

import "github.com/knemesis/knemesis/threshold"

// Mode is how one transfer's copy is done.
type Mode uint8

// Copy modes, cheapest first for small messages.
const (
	// CPUCopy: the module (or a user-space backend) copies with the CPU.
	CPUCopy Mode = iota
	// SyncDMA: the engine copies; the command returns when it is done.
	SyncDMA
	// AsyncDMA: the command returns at once; the engine writes SUCCESS into
	// the status array slot after the payload (KNEM's trailing one-byte
	// copy, §3.4), which the receiver polls between other work.
	AsyncDMA
)

func (m Mode) String() string {
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

// Flags are the KNEM copy-command flags for the mode.
func (m Mode) Flags() uint32 {
	switch m {
	case SyncDMA:
		return FlagDMA
	case AsyncDMA:
		return FlagDMA | FlagAsyncDMAComplete
	}
	return 0
}

// Transfer is what [Decide] looks at for one copy.
type Transfer struct {
	Size int64
	// DMAMin is the threshold for a lone transfer (threshold.DMAMin, or
	// the table's); Decide lowers it for Concurrent transfers.
	DMAMin int64
	// Concurrent is the number of large transfers this process has in
	// flight, this one included.
	Concurrent int
	// Offload is Status.Offload(): the module can use a DMA channel.
	Offload bool
	// StatusSlot is true when the status array is mapped and has a free
	// slot for this transfer's completion.
	StatusSlot bool
}

// Decide picks the copy mode. Up to the (concurrency-lowered) DMA_min the
// CPU copy wins: submitting to the engine costs a device access per
// physically contiguous chunk (§4.2), and the message fits in the cache.
// Above it (§3.5: the cache must be at least twice the message), DMA keeps the receiver's cache clean; asynchronous completion
// is preferred because it lets the receiver keep polling and overlaps the
// copy (§4.3: KNEM enables async mode by default with I/OAT), and falls
// back to synchronous DMA when there is no status slot.
func Decide(t Transfer) Mode {
	if !t.Offload || t.DMAMin <= 0 || t.Size <= threshold.EffectiveDMAMin(t.DMAMin, t.Concurrent) {
		return CPUCopy
	}
	if t.StatusSlot {
		return AsyncDMA
	}
	return SyncDMA
}
