//go:build !race

package nemesis

// allToAllSize is TestJob192's all-to-all message size: see allToAll64K.
const allToAllSize = 64 << 10
