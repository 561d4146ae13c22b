package nemesis

// Holder is what an application holds of an endpoint: a *Endpoint, or a
// value that embeds one, as knemesis.Endpoint does. The layers built on
// the endpoint (rma.Allocate, coll.World, knemesis's typed calls) take a
// Holder, so that the endpoint knemesis.Join returns is passed as it is,
// without reaching for its Endpoint field. Its one method is unexported:
// only this package's Endpoint has it, through embedding or not.
type Holder interface {
	endpoint() *Endpoint
}

func (ep *Endpoint) endpoint() *Endpoint { return ep }

// EndpointOf returns the endpoint h holds; nil for a nil h.
func EndpointOf(h Holder) *Endpoint {
	if h == nil {
		return nil
	}
	return h.endpoint()
}
