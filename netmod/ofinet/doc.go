// Package ofinet is the libfabric network module of nemesis: it puts a
// netmod/ofi endpoint behind the nemesis.NetModule interface, so that ranks
// on other nodes are reached over whatever provider fi_getinfo offers
// (tcp;ofi_rxm here; verbs, efa or cxi on a cluster) while ranks of one
// node keep the shared-memory segment (Buntinas, Mercier, Gropp, "Design
// and Evaluation of Nemesis", CCGRID 2006, §2.2).
//
// It needs the build tag ofi (and libfabric-dev); without the tag the
// package is empty and knemesis stays pure Go. Join, under the tags ofi and
// pmix, joins the job mpirun or srun started this process in: rank, size
// and node from PMIx, addresses exchanged by PMIx put, commit, fence and
// get.
//
// # The contract
//
// Every packet is one tagged libfabric message: nemesis's 32-byte header
// (source, tag, kind, sequence, lengths), a 16-byte MAC, then its payload,
// at most Packet bytes. A packet counts only if its MAC, keyed from the
// job's key (Config.JobKey, jobkey.Env, or PMIx under Join), verifies for
// its source rank, this rank, this module's session and the next packet
// number from that rank; where the provider gives sources (FI_SOURCE),
// the address it came from must also be that rank's. Any other packet is
// dropped and counted (Module.Refused): see admit.go and
// docs/security.md, "Processes on the network". An ofi.Inbox keeps Receives receives posted from any peer on
// bounce buffers of Packet bytes, so the provider never truncates; packets
// are handed to nemesis in the order the provider matched them, which per
// peer is the order they were sent (FI_ORDER_SAS). Matching, any-source,
// probe and truncation are the endpoint's own, for both paths.
//
// Sends post the user's buffers themselves (zero copies at the sender)
// when they fit the provider's iovec limit, else one copy into the send's
// bounce buffer. A send completion in error reports the packet failed and,
// for a broken connection (ofi.ErrPeerLost), the rank gone: nemesis then
// fails what waits on it with a *nemesis.PeerError naming it.
//
// Messages longer than Packet travel as a series of packets (as cells do
// in the segment), received with one copy from the bounce buffers, unless
// the endpoint has an LMT (attach, auto): past its eager limit they go
// through the LMT's rendezvous, whose net-read backend (netmod/netread)
// has the receiver pull them with fi_read from the sender's registered
// buffers (the module's nemesis.NetReader, read.go).
package ofinet
