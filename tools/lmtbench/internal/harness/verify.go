package harness

import "fmt"

// verify moves one patterned message each way (and, for bidir, one more
// through SendRecv) and checks every byte, so that a backend that loses or
// corrupts data fails loudly instead of posting a fast number.
func (r *rank) verify(size int) error {
	s, d := r.send[:size], r.recv[:size]
	fill(s, seed(r.me, size))
	want := seed(1-r.me, size)
	var err error
	if r.me == 0 {
		if err = r.e.Send(s); err == nil {
			err = r.e.Recv(d)
		}
	} else {
		if err = r.e.Recv(d); err == nil {
			err = r.e.Send(s)
		}
	}
	if err != nil {
		return err
	}
	if err := check(d, want, r.spec.Backend, "ping-pong"); err != nil {
		return err
	}
	if r.spec.Mode != Bidir {
		return nil
	}
	clear(d)
	if err := r.e.SendRecv(s, d); err != nil {
		return err
	}
	return check(d, want, r.spec.Backend, "bidirectional exchange")
}

func seed(rank, size int) uint64 { return uint64(size)*0x9E3779B97F4A7C15 + uint64(rank) + 1 }

// fill writes a xorshift stream, so that a shifted, truncated or stale
// buffer differs from the expected one within a few bytes.
func fill(b []byte, x uint64) {
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte(x)
	}
}

func check(got []byte, x uint64, backend, how string) error {
	for i := range got {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		if got[i] != byte(x) {
			return fmt.Errorf("%s corrupted a %d-byte message in a %s: byte %d is %#02x, want %#02x",
				backend, len(got), how, i, got[i], byte(x))
		}
	}
	return nil
}
