package coll

import (
	"reflect"
	"unsafe"
)

// Integer is every Go integer type, by underlying type.
type Integer interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 |
		~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~uintptr
}

// Float is every Go floating-point type, by underlying type.
type Float interface{ ~float32 | ~float64 }

// Ordered is what Min and Max take: the integers and the floats.
type Ordered interface{ Integer | Float }

// Number is every fixed-size numeric type: what the collectives move. Its
// values have no pointers and the same layout in every rank of a job (one
// machine, one build), so a slice of them travels as its bytes, with no
// encoding: unsafe.Slice over the element type.
type Number interface {
	Integer | Float | ~complex64 | ~complex128
}

// asBytes is the memory of s, as bytes.
func asBytes[T Number](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(s[0])))
}

// asElems is b, which holds whole elements of T at T's alignment (a user
// slice seen through asBytes, or scratch), as a slice of T.
func asElems[T Number](b []byte) []T {
	if len(b) == 0 {
		return nil
	}
	var zero T
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/int(unsafe.Sizeof(zero)))
}

// elemOf describes T for the wire header and the byte-level engine.
func elemOf[T Number]() elem {
	var zero T
	return elem{kind: uint8(reflect.TypeFor[T]().Kind()), size: int(unsafe.Sizeof(zero))}
}

// elem is an element type as the engine sees it: its reflect.Kind, which
// the header carries so that ranks calling with different types fail with
// a MismatchError, and its size in bytes.
type elem struct {
	kind uint8
	size int
}

func kindName(k uint8) string {
	if k == 0 {
		return "none"
	}
	return reflect.Kind(k).String()
}

// scratch returns n bytes aligned for any Number (8 bytes; complex128's
// alignment), zeroed.
func scratch(n int) []byte {
	if n == 0 {
		return nil
	}
	w := make([]uint64, (n+7)/8)
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(w))), n)
}

// aliased reports whether a and b start at the same byte (the in-place
// form: the caller passed one buffer as both), and overlap whether they
// share any byte at all.
func aliased(a, b []byte) bool {
	return len(a) > 0 && len(b) > 0 && unsafe.SliceData(a) == unsafe.SliceData(b)
}

func overlap(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	pa, pb := uintptr(unsafe.Pointer(unsafe.SliceData(a))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return pa < pb+uintptr(len(b)) && pb < pa+uintptr(len(a))
}
