package fdpass

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Want is what the receiver expects of a descriptor: exactly Size bytes,
// or, when Size is 0, at least MinSize.
type Want struct {
	Size, MinSize int64
}

// CheckSealed refuses the descriptor fd unless it is a regular file (a
// memfd) of this euid with no access for others, sealed with Seals, of
// the size w asks for; it returns its size. Once it passes, nobody can
// change the size, so a mapping of that size never faults.
func CheckSealed(fd int, w Want) (int64, string) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, fmt.Sprintf("fstat: %v", err)
	}
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return 0, fmt.Sprintf("it is not a regular file (mode %#o)", st.Mode)
	case int(st.Uid) != os.Geteuid():
		return 0, fmt.Sprintf("it belongs to uid %d, not to this process's uid %d", st.Uid, os.Geteuid())
	case st.Mode&0o077 != 0:
		return 0, fmt.Sprintf("group or other users may access it (mode %#o)", st.Mode&0o777)
	case err != nil:
		return 0, fmt.Sprintf("it cannot carry seals (F_GET_SEALS: %v): not a memfd", err)
	case seals&Seals != Seals:
		return 0, fmt.Sprintf("its seals are %#x, not F_SEAL_SHRINK|F_SEAL_GROW|F_SEAL_SEAL (%#x): its size could change under the mapping", seals, Seals)
	case w.Size > 0 && st.Size != w.Size:
		return 0, fmt.Sprintf("it is %d bytes, want %d", st.Size, w.Size)
	case st.Size < w.MinSize:
		return 0, fmt.Sprintf("it is %d bytes, want at least %d", st.Size, w.MinSize)
	}
	return st.Size, ""
}
