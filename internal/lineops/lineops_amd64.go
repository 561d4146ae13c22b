//go:build amd64 && !race

package lineops

import (
	"sync/atomic"
	"unsafe"
)

// StoreRelease stores v in *p with release ordering: no earlier load or
// store of this goroutine is seen after it.
func StoreRelease(p *atomic.Uint32, v uint32) { storeRelease32((*uint32)(unsafe.Pointer(p)), v) }

// StoreRelease64 is StoreRelease for a 64-bit word.
func StoreRelease64(p *atomic.Uint64, v uint64) { storeRelease64((*uint64)(unsafe.Pointer(p)), v) }

// Prefetch asks for the cache line holding p, without waiting for it.
func Prefetch(p unsafe.Pointer) { prefetch(p) }

// PrefetchWrite asks for the cache line holding p in a state that lets
// this core write it (PREFETCHW), without waiting for it: a store to the
// line later finds it here alone, with no transfer to wait for. A CPU
// without the instruction treats it as a NOP.
func PrefetchWrite(p unsafe.Pointer) { prefetchWrite(p) }

// Assembly, so that the compiler can neither reorder memory accesses across
// the store nor drop the prefetch.

//go:noescape
func storeRelease32(p *uint32, v uint32)

//go:noescape
func storeRelease64(p *uint64, v uint64)

//go:noescape
func prefetch(p unsafe.Pointer)

//go:noescape
func prefetchWrite(p unsafe.Pointer)
