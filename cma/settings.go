package cma

import (
	"fmt"

	"github.com/knemesis/knemesis/lmt"
)

// Settings are the CMA backends' own (an lmt.Settings, in
// lmt.Config.Backends).
type Settings struct {
	// Chunk replaces lmt.Config.Chunk for the CMA backends (default 4
	// MiB): each process_vm_readv or process_vm_writev costs a system
	// call and the pinning of the peer's pages beyond its copy, as much
	// as copying tens of KiB, while 4 MiB still moves in well under a
	// millisecond (docs/performance.md).
	Chunk int
}

// DefaultChunk is Settings.Chunk's default.
const DefaultChunk = 4 << 20

// Validate implements lmt.Settings.
func (s Settings) Validate() error {
	if s.Chunk < 0 {
		return fmt.Errorf("cma: Settings.Chunk is %d, negative (0 takes the default)", s.Chunk)
	}
	return nil
}

// chunkOf returns what one call moves under cfg.
func chunkOf(cfg *lmt.Config) int {
	if c := lmt.SettingsOf[Settings](cfg).Chunk; c > 0 {
		return c
	}
	return DefaultChunk
}
