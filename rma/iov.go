package rma

import "github.com/knemesis/knemesis/internal/memcopy"

// iovLen is the sum of the entries' lengths.
func iovLen(iov [][]byte) int {
	n := 0
	for _, b := range iov {
		n += len(b)
	}
	return n
}

// seek returns the entry of iov holding byte pos of the list and pos's
// offset in it.
func seek(iov [][]byte, pos int) (int, int) {
	for i, b := range iov {
		if pos < len(b) {
			return i, pos
		}
		pos -= len(b)
	}
	return len(iov), 0
}

// gather copies len(dst) bytes of the list, from its byte pos, into dst.
func gather(dst []byte, iov [][]byte, pos int) {
	i, off := seek(iov, pos)
	for k := 0; k < len(dst) && i < len(iov); i, off = i+1, 0 {
		k += memcopy.Copy(dst[k:], iov[i][off:])
	}
}

// scatter copies src into the list from its byte pos.
func scatter(iov [][]byte, pos int, src []byte) {
	i, off := seek(iov, pos)
	for k := 0; k < len(src) && i < len(iov); i, off = i+1, 0 {
		k += memcopy.Copy(iov[i][off:], src[k:])
	}
}
