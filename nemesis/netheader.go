package nemesis

import "encoding/binary"

// NetHeaderSource is the rank a network packet's header names as its
// sender, or -1 for a header shorter than NetHeaderSize. A network module
// that knows where a packet came from (the provider's source address)
// checks the two agree before it hands the packet over.
func NetHeaderSource(hdr []byte) int {
	if len(hdr) < NetHeaderSize {
		return -1
	}
	return int(binary.LittleEndian.Uint32(hdr[4:8]))
}
