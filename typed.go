package knemesis

import (
	"unsafe"

	"github.com/knemesis/knemesis/coll"
	"github.com/knemesis/knemesis/nemesis"
)

// The typed calls: the []byte calls of the endpoint for a slice of any
// fixed-size numeric type (coll.Number, the one constraint of the typed
// calls and of coll's collectives), as Go methods cannot take type
// parameters. A []T moves as its memory, unsafe.Slice over its backing
// array: no encoding, no reflection, nothing looked up per message, and
// []byte is one instance. Ranks of one job share a machine's or a build's
// layout, so the receiver reads the values the sender wrote. Each takes
// what the application holds (a *Endpoint, or a *nemesis.Endpoint).

// Request, Status and Message are nemesis's, named here so that a program
// of this package alone reads whole.
type (
	Request = nemesis.Request
	Status  = nemesis.Status
	Message = nemesis.Message
)

// AnySource and AnyTag are the wildcards of the receives and probes.
const (
	AnySource = nemesis.AnySource
	AnyTag    = nemesis.AnyTag
)

// bytesOf is the memory of s, as bytes.
func bytesOf[T coll.Number](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(s[0])))
}

// Send sends buf to dst with tag, and returns once buf may be reused.
func Send[T coll.Number](ep nemesis.Holder, dst, tag int, buf []T) error {
	return nemesis.EndpointOf(ep).Send(dst, tag, bytesOf(buf))
}

// Recv receives into buf a message from src with tag (wildcards allowed).
// Its Status counts bytes; Count[T] turns them into elements.
func Recv[T coll.Number](ep nemesis.Holder, src, tag int, buf []T) (Status, error) {
	return nemesis.EndpointOf(ep).Recv(src, tag, bytesOf(buf))
}

// Isend starts sending buf to dst with tag; buf must not change until r
// completes.
func Isend[T coll.Number](ep nemesis.Holder, r *Request, dst, tag int, buf []T) error {
	return nemesis.EndpointOf(ep).Isend(r, dst, tag, bytesOf(buf))
}

// Irecv starts receiving into buf a message from src with tag (wildcards
// allowed); a longer message completes r with nemesis.ErrTruncated.
func Irecv[T coll.Number](ep nemesis.Holder, r *Request, src, tag int, buf []T) error {
	return nemesis.EndpointOf(ep).Irecv(r, src, tag, bytesOf(buf))
}

// Sendrecv sends sbuf to dst with stag while it receives into rbuf from
// src with rtag, as nemesis.Endpoint.Sendrecv; the element types may
// differ.
func Sendrecv[S, R coll.Number](ep nemesis.Holder, dst, stag int, sbuf []S, src, rtag int, rbuf []R) (Status, error) {
	return nemesis.EndpointOf(ep).Sendrecv(dst, stag, bytesOf(sbuf), src, rtag, bytesOf(rbuf))
}

// Mrecv receives into buf the message Improbe or Mprobe took into m.
func Mrecv[T coll.Number](ep nemesis.Holder, m *Message, buf []T) (Status, error) {
	return nemesis.EndpointOf(ep).Mrecv(m, bytesOf(buf))
}

// Imrecv starts receiving into buf the message Improbe or Mprobe took
// into m.
func Imrecv[T coll.Number](ep nemesis.Holder, r *Request, m *Message, buf []T) error {
	return nemesis.EndpointOf(ep).Imrecv(r, m, bytesOf(buf))
}

// Count returns how many elements of T the receive st describes wrote,
// or -1 when its bytes are not a whole number of them (MPI_UNDEFINED).
func Count[T coll.Number](st Status) int {
	var zero T
	size := int(unsafe.Sizeof(zero))
	if st.Count%size != 0 {
		return -1
	}
	return st.Count / size
}
