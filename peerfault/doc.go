// Package peerfault is the one error every layer of knemesis (nemesis, lmt
// and its backends, rma, the network module) returns when a peer process
// misbehaves or is gone: an [*Error] naming the rank, and for a bad value
// the field it wrote, the value and the protocol's limit it broke.
//
// The contract it states: a rank never trusts what another process wrote
// into memory they share or into a packet. Each such field is read once
// into private memory, checked against the protocol's bounds, and only the
// copy is used. A value out of bounds fails the requests that involve the
// rank that wrote it with an *Error of kind [ErrCorrupt], and only those:
// pairs that share nothing with it go on. A peer whose process exited fails
// them with kind [ErrDead].
//
// Test the kind with errors.Is, and read the rank and field with errors.As:
//
//	var pe *peerfault.Error
//	if errors.As(err, &pe) && errors.Is(err, peerfault.ErrCorrupt) {
//		log.Printf("rank %d wrote a bad %s; %s", pe.Rank, pe.Field, pe.Fix())
//	}
//
// The package imports only the standard library, so that every layer can
// use it without depending on another.
package peerfault
