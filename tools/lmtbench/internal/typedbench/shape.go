package typedbench

import (
	"fmt"

	"github.com/knemesis/knemesis/datatype"
	"github.com/knemesis/knemesis/internal/bytesize"
)

// Kinds of shape: the commands' names.
const (
	Vector  = "vector"
	Indexed = "indexed"
)

// IndexedGap is the hole after every block of an indexed shape: without
// one, neighbouring blocks would be one contiguous run.
const IndexedGap = 64

// Shape is the message of one row: Count blocks of BlockLen bytes, Stride
// apart (vector), or Blocks blocks alternating Small and Large bytes, the
// first one small, IndexedGap bytes apart (indexed).
type Shape struct {
	Kind                    string
	Count, BlockLen, Stride int64
	Blocks                  int
	Small, Large            int64
}

// Type builds the shape's description.
func (s Shape) Type() (*datatype.Type, error) {
	if s.Kind == Vector {
		return datatype.Vector(s.Count, s.BlockLen, s.Stride)
	}
	lens, disps := make([]int64, s.Blocks), make([]int64, s.Blocks)
	var at int64
	for i := range lens {
		lens[i] = s.Small
		if i%2 == 1 {
			lens[i] = s.Large
		}
		disps[i] = at
		at += lens[i] + IndexedGap
	}
	return datatype.Indexed(lens, disps)
}

func (s Shape) String() string {
	if s.Kind == Vector {
		return fmt.Sprintf("vector of %d blocks of %s, stride %s", s.Count, bytesize.Short(s.BlockLen), bytesize.Short(s.Stride))
	}
	return fmt.Sprintf("indexed of %d blocks alternating %s and %s", s.Blocks, bytesize.Short(s.Small), bytesize.Short(s.Large))
}
