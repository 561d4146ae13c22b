package auto_test

import (
	"fmt"
	"io"
	"log"
	"os"

	"github.com/knemesis/knemesis/attach"
	"github.com/knemesis/knemesis/auto"
	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/nemesis/launch"
)

// Each rank joins the endpoint and lets auto choose: from then on Send and
// Recv keep small messages on the cells and move large ones by the backend
// the pair's table, corrected by measurement, says.
func ExampleAttach() {
	if p, ok := launch.Self(); ok { // started by launch.Run
		if err := rank(p, os.Stdout); err != nil {
			log.Fatalf("rank %d: %v", p.Rank, err)
		}
	}
}

// rank is one rank's part; it writes what moved to w (TestExample checks it).
func rank(p launch.Proc, w io.Writer) error {
	ep, err := nemesis.JoinProc(p, nil)
	if err != nil {
		return err
	}
	defer ep.Close()
	sel, err := auto.Attach(ep, auto.Options{})
	if err != nil {
		return err
	}
	defer sel.Close()
	for _, w := range sel.Warnings() {
		log.Printf("rank %d: %s", p.Rank, w) // a tuning file from another machine, say
	}

	big := make([]byte, 8<<20)
	if p.Rank != 0 {
		_, err := ep.Recv(0, 0, big)
		return err
	}
	// What was chosen, for which pair, and why.
	if err := sel.Describe(os.Stderr); err != nil {
		return err
	}
	var r nemesis.Request
	if err := ep.Isend(&r, 1, 0, big); err != nil {
		return err
	}
	if err := ep.Wait(&r); err != nil {
		return err
	}
	st, _ := attach.Stats(&r)
	fmt.Fprintf(w, "%d bytes via %s (eager up to %d bytes)\n", st.Bytes, st.Backend, sel.EagerMax())
	return nil
}
