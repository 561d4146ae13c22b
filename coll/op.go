package coll

// Op is a reduction of T: an associative operation, applied element by
// element. Every rank of a reduction must pass the same one (the header
// of each message names it, so a rank that passes another gets a
// MismatchError); a user operation is told apart only by its name.
//
// The result is the rank-order fold on every rank, whatever the
// algorithm: for ranks 0..n-1 contributing a0..a(n-1), element by
// element, ((a0 op a1) op a2) ... op a(n-1), so a non-commutative
// operation gets its order and floating-point sums are bit-identical on
// every rank and from one algorithm to another.
type Op[T Number] struct {
	name string
	code uint8
	// fold sets acc[i] = acc[i] op in[i]: acc holds the fold of the
	// lower ranks, in the next rank's contribution.
	fold func(acc, in []T)
}

// Name is the operation's name, as errors print it.
func (o Op[T]) Name() string { return o.name }

// Operation codes in message headers; user operations share one.
const (
	opNone uint8 = iota
	opSum
	opProd
	opMin
	opMax
	opBAnd
	opBOr
	opBXor
	opLAnd
	opLOr
	opLXor
	opUser
)

var opNames = [...]string{"none", "Sum", "Prod", "Min", "Max", "BAnd", "BOr", "BXor", "LAnd", "LOr", "LXor", "a user operation"}

func opName(c uint8) string {
	if int(c) < len(opNames) {
		return opNames[c]
	}
	return "unknown"
}

// Sum adds.
func Sum[T Number]() Op[T] {
	return Op[T]{"Sum", opSum, func(acc, in []T) {
		for i := range acc {
			acc[i] += in[i]
		}
	}}
}

// Prod multiplies.
func Prod[T Number]() Op[T] {
	return Op[T]{"Prod", opProd, func(acc, in []T) {
		for i := range acc {
			acc[i] *= in[i]
		}
	}}
}

// Min keeps the smaller (Go's min: a NaN wins).
func Min[T Ordered]() Op[T] {
	return Op[T]{"Min", opMin, func(acc, in []T) {
		for i := range acc {
			acc[i] = min(acc[i], in[i])
		}
	}}
}

// Max keeps the larger (Go's max: a NaN wins).
func Max[T Ordered]() Op[T] {
	return Op[T]{"Max", opMax, func(acc, in []T) {
		for i := range acc {
			acc[i] = max(acc[i], in[i])
		}
	}}
}

// BAnd is bitwise and.
func BAnd[T Integer]() Op[T] {
	return Op[T]{"BAnd", opBAnd, func(acc, in []T) {
		for i := range acc {
			acc[i] &= in[i]
		}
	}}
}

// BOr is bitwise or.
func BOr[T Integer]() Op[T] {
	return Op[T]{"BOr", opBOr, func(acc, in []T) {
		for i := range acc {
			acc[i] |= in[i]
		}
	}}
}

// BXor is bitwise exclusive or.
func BXor[T Integer]() Op[T] {
	return Op[T]{"BXor", opBXor, func(acc, in []T) {
		for i := range acc {
			acc[i] ^= in[i]
		}
	}}
}

// LAnd is logical and: non-zero is true, the result 1 or 0.
func LAnd[T Number]() Op[T] {
	return Op[T]{"LAnd", opLAnd, func(acc, in []T) {
		for i := range acc {
			acc[i] = truth[T](acc[i] != 0 && in[i] != 0)
		}
	}}
}

// LOr is logical or: non-zero is true, the result 1 or 0.
func LOr[T Number]() Op[T] {
	return Op[T]{"LOr", opLOr, func(acc, in []T) {
		for i := range acc {
			acc[i] = truth[T](acc[i] != 0 || in[i] != 0)
		}
	}}
}

// LXor is logical exclusive or: non-zero is true, the result 1 or 0.
func LXor[T Number]() Op[T] {
	return Op[T]{"LXor", opLXor, func(acc, in []T) {
		for i := range acc {
			acc[i] = truth[T]((acc[i] != 0) != (in[i] != 0))
		}
	}}
}

func truth[T Number](b bool) T {
	if b {
		return 1
	}
	return 0
}

// NewOp is a user reduction: fold sets acc[i] = acc[i] op in[i] for every
// i, where acc holds the fold of the lower ranks and in the next rank's
// contribution (the operation need not commute). The name tells it apart
// in errors only: every rank must pass the same function.
func NewOp[T Number](name string, fold func(acc, in []T)) Op[T] {
	return Op[T]{name, opUser, fold}
}
