package lmt

import (
	"fmt"
	"sort"
)

// The backends' names, as Config.Prefer, the tuning files and lmtbench
// spell them.
const (
	Shm      = "shm"
	CMA      = "cma"
	CMAWrite = "cma-write"
	Pipe     = "pipe"
	Vmsplice = "vmsplice"
	Knem     = "knem"
	CMASplit = "cma-split"
	// MultiRail is cma-split cut by the rails' measured speeds.
	MultiRail = "multirail"
	// MultiRailKnem is multirail with the knem module's kernel copy as
	// a third rail, where /dev/knem works.
	MultiRailKnem = "multirail-knem"
	// MultiRailShm is multirail with the pair's shm ring as a third
	// rail.
	MultiRailShm = "multirail-shm"
	Arena        = "arena"
	// ArenaCopy is named apart from Arena: the same receiver, a sender
	// that copies first (see its identity).
	ArenaCopy = "arena-copy"
	// NetRead is the one backend between nodes: the receiver reads the
	// sender's registered region with the network module's one-sided
	// read (libfabric's fi_read).
	NetRead = "net-read"
)

// ArenaCopyMax is the longest message arena-copy carries (its Identity's
// MaxLen): the size of its slots.
const ArenaCopyMax = 256 << 10

// Identity is what every rank of a job must agree on about a backend: its
// name, its number on the wire (RTS and CTS name the backend by it), and
// its flow, which says how the rendezvous runs. It is declared once, in
// [Identities]; backend packages register implementations against it, and
// the selector's and lmtbench's lists derive from it.
type Identity struct {
	ID   uint8
	Name string
	Flow Flow
	// Copies is how many times a byte is copied: 2 for the double-copy
	// backends, 1 for the single-copy ones.
	Copies int
	// Default is the backend's place in the default preference list
	// (Config.Prefer), 1 first; 0 when it is used only on request.
	Default int
	// Choice is its place in the order the selection's tables (package
	// threshold) choose from when the pair shares no cache, the paper's
	// preference: the module, then single copies, then double copies; 1
	// first, 0 when no table chooses it.
	Choice int
	// Home is the package that implements it.
	Home string
	// Summary says in a line how it moves a message.
	Summary string
	// MaxLen is the longest message it carries, 0 for any: a selector
	// weighs it only up to there.
	MaxLen int64
	// Remote: it carries messages to ranks on other nodes, and only to
	// them (Config.Remote says which); every other backend carries
	// messages within a node only. An Engine refuses the one kind for the
	// other kind of peer, and tries the remote ones for a remote peer
	// whatever Config.Prefer lists.
	Remote bool
	// Offload names, for a Split backend, the backend whose [Offloader]
	// carries one more piece of each message beside the read and write
	// rails, when it is registered and works with the peer; without it
	// the Split backend runs on its two rails.
	Offload string
	// Ring names, for a Split backend, the backend whose [Ringer]'s
	// shared ring carries one more piece of each message, filled by the
	// sender while the receiver empties it, when it is registered and
	// works with the peer.
	Ring string
}

// identities lists every backend by copies made: the order lmtbench's
// tables show them in.
var identities = []Identity{
	{ID: 1, Name: Shm, Choice: 6, Flow: Stream, Copies: 2, Default: 1, Home: "shm",
		Summary: "shared-memory ring, pipelined double copy (two user copies)"},
	{ID: 4, Name: Pipe, Choice: 7, Flow: Stream, Copies: 2, Default: 4, Home: "pipe",
		Summary: "writev/readv through a pipe (two kernel copies)"},
	{ID: 5, Name: Vmsplice, Choice: 5, Flow: Stream, Copies: 1, Default: 2, Home: "vmsplice",
		Summary: "sender's pages spliced into a pipe, readv out (one kernel copy)"},
	{ID: 2, Name: CMA, Choice: 2, Flow: Pull, Copies: 1, Default: 3, Home: "cma",
		Summary: "receiver pulls with process_vm_readv (one kernel copy)"},
	{ID: 3, Name: CMAWrite, Flow: Push, Copies: 1, Default: 5, Home: "cma",
		Summary: "sender pushes with process_vm_writev after the CTS (one kernel copy)"},
	{ID: 7, Name: CMASplit, Choice: 3, Flow: Split, Copies: 1, Home: "cma",
		Summary: "receiver reads the first half while the sender writes the second (one kernel copy, two CPUs)"},
	{ID: 9, Name: MultiRail, Choice: 4, Flow: Split, Copies: 1, Home: "cma",
		Summary: "cma-split cut by the measured speed of each rail, receiver read and sender write, so that both pieces finish together (one kernel copy, two CPUs)"},
	// Not in the default preference: it pays only where a third copier
	// (the module's kernel thread on a third core, or a DMA engine)
	// runs beside the two CPUs of the CMA rails.
	{ID: 12, Name: MultiRailKnem, Flow: Split, Copies: 1, Home: "cma", Offload: Knem,
		Summary: "multirail with a third rail where /dev/knem works: the knem module's kernel thread or DMA channel copies one more piece asynchronously, each piece cut by its rail's measured speed (one copy, two CPUs and the kernel's copier)"},
	// Not in the default preference: a ring piece costs both CPUs two
	// copies, and it pays only where they copy faster than CMA walks
	// and pins the pages; its measured speed says so per pair.
	{ID: 13, Name: MultiRailShm, Flow: Split, Copies: 1, Home: "cma", Ring: Shm,
		Summary: "multirail with a third rail through the pair's shm ring: the sender copies one more piece into the ring while the receiver copies it out, each piece cut by its rail's measured speed (one kernel copy for the CMA pieces, two user copies for the ring's)"},
	{ID: 6, Name: Knem, Choice: 1, Flow: Pull, Copies: 1, Home: "kmod/knem/knemlmt",
		Summary: "the KNEM-ABI module copies in the kernel, or offloads to DMA (one copy)"},
	// Not in the default preference: it carries only messages whose
	// send buffer lies in the job's shared arena, and attach picks it
	// for those when the preference names it or a message forces it
	// (otherwise the endpoint's own descriptor carries them).
	{ID: 8, Name: Arena, Flow: Pull, Copies: 1, Home: "arena",
		Summary: "receiver copies straight out of the sender's buffer in the job's shared arena (one user copy, no system call)"},
	// Not in the default preference either: it needs the job's arena,
	// which a job has only on request, and it serves medium messages,
	// where the selector weighs it against the others.
	{ID: 10, Name: ArenaCopy, Flow: Pull, Copies: 2, Home: "arena", MaxLen: ArenaCopyMax,
		Summary: "sender copies into a slot of its shared arena and completes; receiver copies out (two user copies, no system call, no wait for the DONE)"},
	// The rendezvous of ranks on other nodes: the RTS carries the keys of
	// the sender's registered regions, the receiver's network interface
	// reads them into its buffers, DONE completes the sender.
	{ID: 11, Name: NetRead, Flow: Pull, Copies: 1, Home: "netmod/netread", Remote: true,
		Summary: "receiver reads the sender's registered buffer with the network module's one-sided read, libfabric fi_read (ranks on other nodes only)"},
}

// Identities returns every backend's identity, registered or not, by
// copies made.
func Identities() []Identity { return append([]Identity(nil), identities...) }

// IdentityOf returns the identity of the backend called name.
func IdentityOf(name string) (Identity, bool) {
	for _, id := range identities {
		if id.Name == name {
			return id, true
		}
	}
	return Identity{}, false
}

// DefaultPreference returns the default Config.Prefer: the backends with a
// Default place, in that order.
func DefaultPreference() []string { return placed(func(id Identity) int { return id.Default }) }

var defaultPrefer = DefaultPreference()

// Choices returns the names of the backends with a Choice place, in that
// order.
func Choices() []string { return placed(func(id Identity) int { return id.Choice }) }

// placed returns the names of the backends place gives a place (above 0),
// in the order of their places.
func placed(place func(Identity) int) []string {
	var ids []Identity
	for _, id := range identities {
		if place(id) > 0 {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return place(ids[i]) < place(ids[j]) })
	names := make([]string, len(ids))
	for i, id := range ids {
		names[i] = id.Name
	}
	return names
}

// Factory creates a backend for an Engine.
type Factory func(env *Env) (Backend, error)

// Prober checks availability without an Engine (see [Check]).
type Prober func(cfg *Config, peer Peer) error

type registration struct {
	Identity
	factory Factory
	check   Prober
}

// registry is filled by init functions only (the backend packages), before
// any Engine exists, so it needs no lock. It is kept in wire-id order.
var registry []registration

// Register makes the implementation of backend name known to every Engine
// created afterwards; a backend package calls it from init. name must be
// one of [Identities]; registering it twice panics.
func Register(name string, f Factory, check Prober) {
	id, ok := IdentityOf(name)
	if !ok {
		panic(fmt.Sprintf("lmt: Register of %q, which is not among the backends' identities", name))
	}
	for _, r := range registry {
		if r.Name == name {
			panic(fmt.Sprintf("lmt: backend %q registered twice", name))
		}
	}
	registry = append(registry, registration{id, f, check})
	sort.Slice(registry, func(i, j int) bool { return registry[i].ID < registry[j].ID })
}

// Backends lists the names of the registered backends, in wire-id order.
func Backends() []string {
	names := make([]string, len(registry))
	for i, r := range registry {
		names[i] = r.Name
	}
	return names
}

func lookup(name string) (registration, bool) {
	for _, r := range registry {
		if r.Name == name {
			return r, true
		}
	}
	return registration{}, false
}
