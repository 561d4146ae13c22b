package lmt_test

import (
	"errors"
	"fmt"

	"github.com/knemesis/knemesis/lmt"
	_ "github.com/knemesis/knemesis/pipe" // registers the pipe backend
)

// Listing the backends and why some cannot reach a peer, as lmtbench does.
func ExampleCheck() {
	peer := lmt.Peer{Rank: 1, PID: 0} // the peer's pid, from the job
	for _, name := range lmt.Backends() {
		err := lmt.Check(name, peer)
		var u *lmt.Unavailable
		switch {
		case err == nil:
			fmt.Println(name, "available")
		case errors.As(err, &u):
			fmt.Println(name, "unavailable:", u.Reason)
		}
	}
	// Output:
	// shm available
	// cma unavailable: the peer's process id is unknown
	// cma-write unavailable: the peer's process id is unknown
	// pipe available
	// cma-split unavailable: the peer's process id is unknown
	// multirail unavailable: the peer's process id is unknown
	// multirail-knem unavailable: the peer's process id is unknown
	// multirail-shm unavailable: the peer's process id is unknown
}
