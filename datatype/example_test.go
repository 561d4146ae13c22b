package datatype_test

import (
	"fmt"

	"github.com/knemesis/knemesis/datatype"
	"golang.org/x/sys/unix"
)

// A column of a 4×4 matrix of 8-byte elements, packed and walked as
// iovecs in chunks of 12 bytes.
func Example() {
	column, err := datatype.Vector(4, 8, 4*8)
	if err != nil {
		panic(err)
	}
	matrix := make([]byte, 4*4*8)
	for i := range matrix {
		matrix[i] = byte(i)
	}
	packed := make([]byte, column.Size())
	n, _ := column.Pack(packed, matrix)
	fmt.Println(n, packed[:10])

	c := column.Cursor()
	iov := make([]unix.Iovec, 4)
	for {
		entries, bytes, _ := c.FillIovec(matrix, iov, 12)
		if entries == 0 {
			break
		}
		fmt.Printf("%d entries, %d bytes, now at %d\n", entries, bytes, c.Pos())
	}
	fmt.Printf("% x\n", column.AppendEncode(nil))
	// Output:
	// 32 [0 1 2 3 4 5 6 7 32 33]
	// 2 entries, 12 bytes, now at 12
	// 2 entries, 12 bytes, now at 24
	// 1 entries, 8 bytes, now at 32
	// 02 04 08 20
}

// NewMadeleine's split of an indexed type: small blocks aggregated into
// one packet, large ones left in place for a zero-copy move.
func ExampleType_Select() {
	ty, err := datatype.Indexed([]int64{64, 256 << 10, 64}, []int64{0, 128, 300 << 10})
	if err != nil {
		panic(err)
	}
	const threshold = 4096
	fmt.Printf("%+v\n", ty.Classify(threshold))
	base := make([]byte, ty.Extent())
	small := ty.Select(datatype.Small, threshold)
	eager := make([]byte, ty.Classify(threshold).SmallBytes)
	n, _ := small.Pack(eager, base)
	large := ty.Select(datatype.Large, threshold)
	iov := make([]unix.RemoteIovec, 8)
	entries, bytes, _ := large.FillRemoteIovec(0x10000, iov, 1<<20)
	fmt.Println(n, entries, bytes, fmt.Sprintf("%#x", iov[0].Base))
	// Output:
	// {SmallBlocks:2 SmallBytes:128 LargeBlocks:1 LargeBytes:262144}
	// 128 1 262144 0x10080
}

// A receiver's layout of two 8-byte blocks, a 64 KiB one and three 8-byte
// ones: the small blocks are named in the staging buffer (here at
// 0x900000), the two runs of them as one entry each, the large one in
// place in the base buffer (at 0x10000).
func ExampleStage() {
	ty, err := datatype.Indexed([]int64{8, 8, 64 << 10, 8, 8, 8}, []int64{0, 16, 32, 80 << 10, 96 << 10, 112 << 10})
	if err != nil {
		panic(err)
	}
	var st datatype.Stage
	st.Reset(ty, datatype.DefaultSmallBlock)
	c := ty.Cursor()
	iov := make([]unix.RemoteIovec, 8)
	entries, _, _ := c.FillStagedRemoteIovec(&st, 0x10000, 0x900000, iov, ty.Size())
	fmt.Println(st.Bytes(), "bytes staged")
	for _, v := range iov[:entries] {
		fmt.Printf("%#x %d\n", v.Base, v.Len)
	}
	// Output:
	// 40 bytes staged
	// 0x900000 16
	// 0x10020 65536
	// 0x900010 24
}
