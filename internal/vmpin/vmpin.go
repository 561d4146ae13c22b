// Package vmpin reads this process's pinned memory (VmPin in
// /proc/self/status, the kernel's pinned_vm): what a driver that pins
// user pages charges against RLIMIT_MEMLOCK. Tests of the knem driver
// check with it that a copy leaves nothing pinned. It imports nothing of
// the project, so the knem package's own tests can use it too.
package vmpin

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// Bytes returns this process's VmPin in bytes.
func Bytes() (uint64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for _, l := range bytes.Split(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(l, []byte("VmPin:")); ok {
			kb, err := strconv.ParseUint(string(bytes.TrimSuffix(bytes.TrimSpace(v), []byte(" kB"))), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("vmpin: VmPin %q: %w", v, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("vmpin: /proc/self/status has no VmPin line")
}
