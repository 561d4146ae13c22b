//go:build ofi

package ofi

// #cgo LDFLAGS: -lfabric
// #include <stdlib.h>
// #include "shim.h"
import "C"

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Limits and defaults.
const (
	HeaderMax          = C.KN_HDR_MAX // bytes of header a message may carry
	DefaultSlots       = 256
	DefaultBatch       = 32
	DefaultPeerTimeout = 10 * time.Second
	maxSlots           = 1 << 16
)

// Addr names a peer in the endpoint's address vector (fi_addr_t).
type Addr uint64

// AnyAddr receives from any peer (FI_ADDR_UNSPEC).
const AnyAddr = Addr(C.FI_ADDR_UNSPEC)

// UnknownAddr is the source of a message from an address never inserted,
// or from anyone when the provider does not say (FI_ADDR_NOTAVAIL).
const UnknownAddr = Addr(C.FI_ADDR_NOTAVAIL)

// Config chooses the provider and sizes an endpoint. Provider and Node are
// required; zero values elsewhere give the defaults.
type Config struct {
	Provider    string        // fi_getinfo provider name, such as "tcp;ofi_rxm"
	Node        string        // local address to bind, such as "127.0.0.1"
	HeaderSize  int           // header bytes every message carries, 0..HeaderMax
	Slots       int           // operations in flight at most; DefaultSlots
	Batch       int           // completions one Poll reads at most; DefaultBatch
	PeerTimeout time.Duration // see Wait; DefaultPeerTimeout
	// Sources asks for each received message's source address
	// (FI_SOURCE, Request.Src), where the provider has it.
	Sources bool
}

// Endpoint is one process's network module: an RDM endpoint with its
// address vector and completion queue.
type Endpoint struct {
	c        *C.struct_kn_ep
	cfg      Config
	slots    []slot  // Go side of the C slots, same index
	free     []int32 // indexes of idle slots, a stack
	backlog  ring    // slots the provider refused with FI_EAGAIN, in post order
	peers    []peerInfo
	regions  *Region       // registered, for Close
	keys     *rand.ChaCha8 // draws the regions' keys (Register)
	payIov   int           // payload entries a message may have
	provider string
	closed   bool
	// completed counts the completions Wait's polls read: its mark of
	// progress (request.go).
	completed uint64
}

type peerInfo struct {
	label, address string
}

// Open starts the network module described by cfg.
func Open(cfg Config) (*Endpoint, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	prov, node := C.CString(cfg.Provider), C.CString(cfg.Node)
	defer C.free(unsafe.Pointer(prov))
	defer C.free(unsafe.Pointer(node))
	var c *C.struct_kn_ep
	var stage *C.char
	sources := C.int(0)
	if cfg.Sources {
		sources = 1
	}
	if ret := C.kn_open(prov, node, C.int(cfg.Slots), C.int(cfg.Batch), sources, &c, &stage); ret != 0 {
		return nil, startError(cfg, C.GoString(stage), Errno(-ret), node)
	}
	e := &Endpoint{
		c:        c,
		cfg:      cfg,
		slots:    make([]slot, cfg.Slots),
		free:     make([]int32, cfg.Slots),
		backlog:  ring{buf: make([]int32, cfg.Slots)},
		provider: C.GoString(c.info.fabric_attr.prov_name),
	}
	var seed [32]byte
	if _, err := unix.Getrandom(seed[:], 0); err != nil {
		C.kn_close(c)
		return nil, fmt.Errorf("ofi: seeding the regions' keys: getrandom: %w", err)
	}
	e.keys = rand.NewChaCha8(seed)
	for i := range e.free {
		e.free[i] = int32(cfg.Slots - 1 - i)
	}
	e.payIov = int(min(c.tx_iov_limit, c.rx_iov_limit, C.KN_IOV_MAX))
	if cfg.HeaderSize > 0 {
		e.payIov--
	}
	if e.payIov < 1 {
		limit := min(c.tx_iov_limit, c.rx_iov_limit)
		C.kn_close(c)
		return nil, errorf(ErrNoProvider, "provider %q takes %d iovec entries a message, too few for a header and a payload",
			cfg.Provider, limit)
	}
	return e, nil
}

func (cfg *Config) check() error {
	if cfg.Provider == "" || cfg.Node == "" {
		return errorf(ErrInvalidArg, "Config.Provider (%q) and Config.Node (%q) are required", cfg.Provider, cfg.Node)
	}
	if cfg.HeaderSize < 0 || cfg.HeaderSize > HeaderMax {
		return errorf(ErrInvalidArg, "Config.HeaderSize %d is outside 0..%d", cfg.HeaderSize, HeaderMax)
	}
	if cfg.Slots == 0 {
		cfg.Slots = DefaultSlots
	}
	if cfg.Batch == 0 {
		cfg.Batch = DefaultBatch
	}
	if cfg.PeerTimeout == 0 {
		cfg.PeerTimeout = DefaultPeerTimeout
	}
	if cfg.Slots < 1 || cfg.Slots > maxSlots || cfg.Batch < 1 || cfg.PeerTimeout < 0 {
		return errorf(ErrInvalidArg, "Config.Slots %d (1..%d), Config.Batch %d (≥1), Config.PeerTimeout %v (≥0)",
			cfg.Slots, maxSlots, cfg.Batch, cfg.PeerTimeout)
	}
	return nil
}

func startError(cfg Config, call string, err Errno, node *C.char) error {
	var buf [512]C.char
	e := &StartError{Provider: cfg.Provider, Node: cfg.Node, Call: call, Err: err}
	if C.kn_providers(node, &buf[0], C.size_t(len(buf))) == 0 {
		e.Offered = C.GoString(&buf[0])
	}
	return e
}

// Provider names the provider fi_getinfo chose, such as "tcp;ofi_rxm".
func (e *Endpoint) Provider() string { return e.provider }

// Sources reports whether the provider gives each received message's
// source address (FI_SOURCE; Request.Src): Config.Sources asked for it,
// and the provider has it.
func (e *Endpoint) Sources() bool { return e.c != nil && e.c.source != 0 }

// MaxPayloadIov is how many payload entries a message may have.
func (e *Endpoint) MaxPayloadIov() int { return e.payIov }

// Name returns the endpoint's address (fi_getname), to publish to peers.
func (e *Endpoint) Name() []byte {
	return C.GoBytes(unsafe.Pointer(&e.c.name[0]), C.int(e.c.namelen))
}

// Insert enters a peer's published address; label names the peer in
// errors ("rank 3"). Peers inserted in order get consecutive Addrs from 0.
func (e *Endpoint) Insert(name []byte, label string) (Addr, error) {
	if e.closed {
		return 0, ErrClosed
	}
	if len(name) != int(e.c.namelen) {
		return 0, errorf(ErrInvalidArg, "address of %s is %d bytes, this provider's are %d", label, len(name), e.c.namelen)
	}
	cname := C.CBytes(name)
	defer C.free(cname)
	var a C.uint64_t
	if ret := C.kn_av_insert(e.c, cname, &a); ret != 0 {
		return 0, fmt.Errorf("ofi: fi_av_insert of %s: %w", label, Errno(-ret))
	}
	var buf [128]C.char
	C.kn_av_straddr(e.c, cname, &buf[0], C.size_t(len(buf)))
	for Addr(len(e.peers)) <= Addr(a) {
		e.peers = append(e.peers, peerInfo{})
	}
	e.peers[a] = peerInfo{label: label, address: C.GoString(&buf[0])}
	return Addr(a), nil
}

// Close shuts the endpoint: it deregisters every region still open, closes
// the libfabric objects, then unpins the buffers of operations still in
// flight, which fail with ErrClosed.
func (e *Endpoint) Close() error {
	if e.closed {
		return nil
	}
	e.closed = true
	var first error
	for r := e.regions; r != nil; r = e.regions {
		if err := r.Close(); err != nil && first == nil {
			first = err
		}
	}
	C.kn_close(e.c)
	e.c = nil
	for i := range e.slots {
		if s := &e.slots[i]; s.busy {
			e.finish(int32(i), 0, 0, ErrClosed)
		}
	}
	runtime.KeepAlive(e)
	return first
}
