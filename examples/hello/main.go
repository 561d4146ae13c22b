// Command hello is the smallest knemesis program: the parent starts four
// copies of this binary with launch.Run; each child learns its rank, the
// job's size and name from launch.Self, joins the job, and sends rank 0 a
// greeting, which rank 0 prints in rank order.
package main

import (
	"context"
	"fmt"
	"log"

	"github.com/knemesis/knemesis"
	"github.com/knemesis/knemesis/nemesis/launch"
)

func main() {
	if p, ok := launch.Self(); ok { // a child: rank p.Rank of p.Size
		if err := rank(p); err != nil {
			log.Fatalf("rank %d: %v", p.Rank, err)
		}
		return
	}
	// The parent: start the job and wait for every rank.
	if err := launch.Run(context.Background(), launch.Options{Procs: 4}); err != nil {
		log.Fatal(err)
	}
}

func rank(p launch.Proc) error {
	ep, err := knemesis.JoinProc(p, nil)
	if err != nil {
		return err
	}
	defer ep.Close()
	msg := fmt.Sprintf("hello from rank %d of %d", p.Rank, p.Size)
	if p.Rank != 0 {
		return ep.Send(0, 0, []byte(msg))
	}
	fmt.Println(msg)
	buf := make([]byte, 64)
	for src := 1; src < p.Size; src++ { // in rank order, whoever sent first
		st, err := ep.Recv(src, 0, buf)
		if err != nil {
			return err
		}
		fmt.Println(string(buf[:st.Count]))
	}
	return nil
}
