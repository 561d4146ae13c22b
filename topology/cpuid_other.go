//go:build !(linux && amd64)

package topology

// HostCPUID is unavailable off linux/amd64; it answers zeros, which
// DecodeCPUID reports as no cache information.
func HostCPUID(leaf, subleaf uint32) Regs { return Regs{} }

// ReadCPUID is unavailable off linux/amd64.
func ReadCPUID(cpus CPUSet) (map[int]CPUIDInfo, error) { return nil, ErrNoCPUID }
