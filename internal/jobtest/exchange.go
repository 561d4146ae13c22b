package jobtest

import (
	"testing"

	"github.com/knemesis/knemesis/nemesis"
)

// Exchange sends msg from rank 0 of eps to rank 1's got b.N times, with
// tag 1, driving both endpoints from this goroutine until each message's
// send and receive are complete: the software of one message's path, with
// no second core and no waiting.
func Exchange(b *testing.B, eps [2]*nemesis.Endpoint, msg, got []byte) {
	var s, r nemesis.Request
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		if err := eps[1].Irecv(&r, 0, 1, got); err != nil {
			b.Fatal(err)
		}
		if err := eps[0].Isend(&s, 1, 1, msg); err != nil {
			b.Fatal(err)
		}
		for !s.Done() || !r.Done() {
			if _, err := eps[1].Test(&r); err != nil {
				b.Fatal(err)
			}
			if _, err := eps[0].Test(&s); err != nil {
				b.Fatal(err)
			}
		}
	}
}
