// Package ofi is a Nemesis network module over libfabric: reliable
// datagram endpoints (FI_EP_RDM) with tagged messages and RMA reads, driven
// by manual progress: the network module of Buntinas, Mercier and Gropp,
// "Design and Evaluation of Nemesis" (CCGRID 2006, §2.2, §3.4-3.5), whose
// init, finalize, send and polls are Open, Close, Isend and Poll here.
//
// The package needs libfabric (libfabric-dev) and the build tag ofi;
// without the tag it is empty and knemesis stays pure Go.
//
// # The contract
//
// Open asks fi_getinfo for an FI_EP_RDM endpoint with FI_TAGGED, FI_MSG and
// FI_RMA from the provider named in Config.Provider ("tcp;ofi_rxm" on a
// laptop, "verbs;ofi_rxm", "efa" or "cxi" on a cluster), bound to
// Config.Node, with manual data progress and send-after-send ordering. A
// provider that cannot start fails Open with a *StartError naming the
// provider, the libfabric call that failed, what it said, and which
// providers fi_getinfo does offer here.
//
// Name returns the endpoint's address, to be published (through PMIx, see
// package netmod/pmix); Insert enters a peer's published address in the
// address vector and returns its Addr. Addresses are inserted in order, so a
// job that inserts every rank's address in rank order gets Addr(rank).
//
// Every message carries exactly Config.HeaderSize bytes of header, copied
// into C memory at Isend (the caller may reuse its header at once) and
// handed back in Request.Hdr at the receive, then the payload: up to
// MaxPayloadIov entries gathered at the sender and scattered at the
// receiver by the provider (fi_tsendmsg, fi_trecvmsg). Receives are posted
// with a tag and ignore mask and match in libfabric, from one Addr or from
// AnyAddr. A message longer than its receive fails the receive with
// ErrTruncated and nothing written past the buffers (an [Inbox] keeps
// nemesis from ever letting a provider truncate: docs/design/ofi.md).
//
// Large payloads move by RMA: the owner registers its buffer (Register,
// fi_mr_reg), sends the RemoteRegion (address, key, length: 24 bytes, see
// RemoteRegion.Put) in a message, and the other side pulls it with Read
// (fi_read). This is the LMT rendezvous of knemesis over the network.
//
// Nothing moves unless Poll is called: one Poll reads up to Config.Batch
// completions in one cgo call and completes their requests. Requests are
// caller-owned values (var r ofi.Request), operation contexts are
// preallocated C slots, and the per-message path allocates nothing. An
// Endpoint belongs to one goroutine (FI_THREAD_DOMAIN). libfabric keeps
// an operation's buffers until its completion: Go buffers are pinned
// until then and must not be touched; a region stays pinned until its
// Region.Close.
//
// # Faults
//
// A completion in error fails its request with a *PeerError naming the peer
// (the label given to Insert and its provider address) and libfabric's
// error (Errno, with fi_cq_strerror's provider detail); the codes of a
// broken connection match ErrPeerLost. A provider does not always fail
// what was in flight with a peer that died (docs/design/ofi.md says where
// tcp;ofi_rxm does not). Wait bounds that: a request that sees
// no completion on the endpoint for Config.PeerTimeout is cancelled and
// fails with ErrTimeout, naming its peer. A send the provider cannot
// cancel keeps its buffers pinned and owned by the endpoint until it
// completes or the endpoint closes.
package ofi
