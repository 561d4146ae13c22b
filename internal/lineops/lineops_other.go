//go:build !amd64 || race

package lineops

import (
	"sync/atomic"
	"unsafe"
)

// StoreRelease stores v in *p with (at least) release ordering.
func StoreRelease(p *atomic.Uint32, v uint32) { p.Store(v) }

// StoreRelease64 stores v in *p with (at least) release ordering.
func StoreRelease64(p *atomic.Uint64, v uint64) { p.Store(v) }

// Prefetch does nothing here.
func Prefetch(p unsafe.Pointer) {}

// PrefetchWrite does nothing here.
func PrefetchWrite(p unsafe.Pointer) {}
