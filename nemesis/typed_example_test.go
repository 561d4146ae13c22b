package nemesis_test

import (
	"fmt"

	"github.com/knemesis/knemesis/datatype"
	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/nemesis/launch"
)

// A column of a row-major matrix is a vector: one element per row, a row
// apart. Rank 0 sends column 2 of its 4×6 matrix without packing it;
// rank 1 receives it into column 0 of its own 4×3 matrix, a vector of
// another stride, and leaves the other columns alone. Either side could
// use a plain buffer instead: the message is the column's 4 bytes.
func ExampleEndpoint_SendType() {
	job := launch.NewJobName()
	done := make(chan error)
	go func() { // rank 1
		ep, err := nemesis.Join(job, 1, 2, nil)
		if err != nil {
			done <- err
			return
		}
		defer ep.Close()
		m := []byte("..." + "..." + "..." + "...")
		col0, _ := datatype.Vector(4, 1, 3)
		st, err := ep.RecvType(0, 5, m, col0)
		if err == nil {
			fmt.Printf("received %d bytes: %s %s %s %s\n", st.Count, m[0:3], m[3:6], m[6:9], m[9:12])
		}
		done <- err
	}()

	ep, err := nemesis.Join(job, 0, 2, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ep.Close()
	m := []byte("abcdef" + "ghijkl" + "mnopqr" + "stuvwx")
	col2, err := datatype.Vector(4, 1, 6) // bytes 2, 8, 14, 20 from m[2:]
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(ep.SendType(1, 5, m[2:], col2), <-done)
	// Output:
	// received 4 bytes: c.. i.. o.. u..
	// <nil> <nil>
}
