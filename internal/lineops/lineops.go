// Package lineops holds the two operations on cache lines shared between
// processes that sync/atomic does not offer: a store with release ordering
// only, and a prefetch.
//
// A fastbox is handed over by storing its flag after its payload, and handed
// back by clearing the flag after the payload was read: release ordering is
// all either side needs. sync/atomic's Store is sequentially consistent, an
// XCHG on amd64, which waits until every earlier store owns its line: for a
// fastbox whose lines the peer core read last, that is a round trip to the
// other core (hundreds of nanoseconds between physical cores;
// docs/performance.md, internal/lineops) during which the sender can do
// nothing else. StoreRelease is the
// plain MOV that x86's total store order makes a release, as C11's
// atomic_store_explicit(p, v, memory_order_release) compiles: the sender
// goes on while the line travels, and the peer sees the flag no later.
//
// Prefetch starts bringing a line into the cache without waiting for it: a
// receiver that has seen a fastbox's flag prefetches the payload's second
// line at once, and the miss overlaps the work done before the payload is
// read instead of following it.
//
// The shm ring's counters and owner words are handed over the same way, with
// StoreRelease64.
//
// On other architectures, and under the race detector (which must see the
// release to know the payload's writes happened before its reads),
// StoreRelease and StoreRelease64 are the atomic Stores and Prefetch does
// nothing.
package lineops
