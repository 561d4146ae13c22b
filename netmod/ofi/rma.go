//go:build ofi

package ofi

// #include "shim.h"
import "C"

import (
	"encoding/binary"
	"runtime"
	"unsafe"
)

// RemoteRegionSize is the length of a RemoteRegion on the wire.
const RemoteRegionSize = 24

// RemoteRegion is what a peer needs to read a registered region: the
// address to name (the buffer's own address, or 0 where the provider
// addresses regions by offset) and the key. It travels in the RTS.
type RemoteRegion struct {
	Addr, Key, Len uint64
}

// Put writes rr into b[:RemoteRegionSize], little-endian.
func (rr RemoteRegion) Put(b []byte) {
	binary.LittleEndian.PutUint64(b[0:], rr.Addr)
	binary.LittleEndian.PutUint64(b[8:], rr.Key)
	binary.LittleEndian.PutUint64(b[16:], rr.Len)
}

// GetRemoteRegion reads what Put wrote.
func GetRemoteRegion(b []byte) RemoteRegion {
	return RemoteRegion{
		Addr: binary.LittleEndian.Uint64(b[0:]),
		Key:  binary.LittleEndian.Uint64(b[8:]),
		Len:  binary.LittleEndian.Uint64(b[16:]),
	}
}

// Region is a buffer registered for remote reads (fi_mr_reg); the caller
// owns it (var reg ofi.Region), so that registering allocates nothing.
type Region struct {
	mr     *C.struct_fid_mr
	ep     *Endpoint
	next   *Region // in ep.regions
	pin    runtime.Pinner
	remote RemoteRegion
	// key and addr receive what fi_mr_reg gave: fields, not locals,
	// which taking their address for cgo would move to the heap on
	// every registration.
	key, addr C.uint64_t
}

// Register registers buf so that peers may Read it, under a key unique in
// the endpoint. buf stays pinned until reg.Close. The key is drawn at
// random (regionKey), where the provider takes the key it is asked for
// (tcp;ofi_rxm does): anyone who can reach the endpoint can issue reads,
// and a key counted from 1 would let a process outside the job read a
// buffer while it is exposed. A provider that chooses its keys itself
// (FI_MR_PROV_KEY) keeps its own.
func (e *Endpoint) Register(reg *Region, buf []byte) error {
	if e.closed {
		return ErrClosed
	}
	if reg.mr != nil {
		return errorf(ErrInvalidArg, "region already registered (key %d)", reg.remote.Key)
	}
	if len(buf) == 0 {
		return errorf(ErrInvalidArg, "cannot register an empty buffer")
	}
	p := unsafe.Pointer(unsafe.SliceData(buf))
	reg.pin.Pin(p)
	var ret C.int
	for range 4 { // a key already taken (FI_ENOKEY): one in 2^64 / regions
		ret = C.kn_mr_reg(e.c, p, C.size_t(len(buf)), C.FI_REMOTE_READ, C.uint64_t(e.regionKey()), &reg.mr, &reg.key, &reg.addr)
		if ret != -C.FI_ENOKEY {
			break
		}
	}
	if ret != 0 {
		reg.pin.Unpin()
		reg.mr = nil
		return errorf(ErrInvalidArg, "fi_mr_reg of %d bytes: %v", len(buf), Errno(-ret))
	}
	reg.ep, reg.remote = e, RemoteRegion{Addr: uint64(reg.addr), Key: uint64(reg.key), Len: uint64(len(buf))}
	reg.next, e.regions = e.regions, reg
	return nil
}

// regionKey draws a region's key: 47 random bits (ChaCha8 seeded from
// getrandom), odd. Not 64: with keys that use the high bits, tcp;ofi_rxm
// (libfabric 1.17) crashes the reading process (TestTwoProcesses). A
// guess costs the guesser its connection (TestReadBadKey), and a region is
// exposed only while its message moves.
func (e *Endpoint) regionKey() uint64 { return e.keys.Uint64()>>17 | 1 }

// Remote describes the region for a peer's Read.
func (reg *Region) Remote() RemoteRegion { return reg.remote }

// Close deregisters the region and unpins its buffer. Reads of it in
// flight fail at the reader.
func (reg *Region) Close() error {
	if reg.mr == nil {
		return nil
	}
	e := reg.ep
	for p := &e.regions; *p != nil; p = &(*p).next {
		if *p == reg {
			*p = reg.next
			break
		}
	}
	ret := C.kn_mr_close(reg.mr)
	reg.mr, reg.ep, reg.next = nil, nil, nil
	reg.pin.Unpin()
	if ret != 0 {
		return errorf(ErrInvalidArg, "fi_close of region with key %d: %v", reg.remote.Key, Errno(-ret))
	}
	return nil
}

// Read starts pulling len(dst) bytes of peer's region src, from offset off,
// into dst (fi_read), which must stay untouched until r completes.
func (e *Endpoint) Read(r *Request, peer Addr, dst []byte, src RemoteRegion, off uint64) error {
	if peer == AnyAddr {
		return errorf(ErrInvalidArg, "a read needs a peer, not AnyAddr")
	}
	if off > src.Len || uint64(len(dst)) > src.Len-off {
		return errorf(ErrInvalidArg, "read of %d bytes at offset %d of a %d-byte region", len(dst), off, src.Len)
	}
	i, cs, err := e.take(r, opRead, peer)
	if err != nil {
		return err
	}
	if len(dst) == 0 {
		e.finish(i, 0, 0, nil)
		return nil
	}
	e.setIov(&e.slots[i], cs, 0, [][]byte{dst})
	e.slots[i].raddr, e.slots[i].key = src.Addr+off, src.Key
	return e.post(i)
}
