package nemesis_test

import (
	"fmt"

	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/nemesis/launch"
)

// Eight small sends started in a batch leave in one cell with the
// aggregate strategy, and arrive as eight messages, each with its tag.
func ExampleEndpoint_Batch() {
	job := launch.NewJobName()
	peer := make(chan *nemesis.Endpoint)
	go func() {
		ep, err := nemesis.Join(job, 1, 2, nil)
		if err != nil {
			fmt.Println(err)
		}
		peer <- ep
	}()
	ep, err := nemesis.Join(job, 0, 2, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ep.Close()
	rank1 := <-peer
	if rank1 == nil {
		return
	}
	defer rank1.Close()

	ep.SetStrategy(nemesis.Aggregate)
	var sends [8]nemesis.Request
	ep.Batch()
	for i := range sends {
		ep.Isend(&sends[i], 1, 100+i, []byte{byte('a' + i)})
	}
	if err := ep.Flush(); err != nil {
		fmt.Println(err)
		return
	}
	st := ep.Stats()
	fmt.Printf("%d cell for %d messages\n", st.Cells, st.Aggregated)
	buf := make([]byte, 1)
	for range sends {
		m, err := rank1.Recv(0, nemesis.AnyTag, buf)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%d:%s ", m.Tag, buf)
	}
	fmt.Println()
	// Output:
	// 1 cell for 8 messages
	// 100:a 101:b 102:c 103:d 104:e 105:f 106:g 107:h
}
