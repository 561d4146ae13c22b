package cli

import (
	"fmt"
	"io"

	"github.com/knemesis/knemesis/internal/memplace"
	"github.com/knemesis/knemesis/internal/pages"
	"github.com/knemesis/knemesis/topology"
)

// infoObject is the size the pages line decides for: a large-message
// buffer, where the page size matters.
const infoObject = 64 << 20

// writeMemory prints the NUMA layout with where this process's objects
// would be placed, and the page mode a large memfd, a /dev/shm file and a
// private buffer (lmtbench's own, under --hugepages) get,
// each with the line that says what to change.
func writeMemory(w io.Writer) {
	if n, err := topology.HostNUMA(); err != nil {
		fmt.Fprintf(w, "numa:      unknown (%v)\n", err)
	} else {
		_, why := memplace.Home()
		home := why
		if node, _ := memplace.Home(); node >= 0 {
			home = fmt.Sprintf("node %d", node)
		}
		fmt.Fprintf(w, "numa:      %s; this process places on: %s\n", n, home)
	}
	sys, cfg := pages.Host()
	fmt.Fprintf(w, "pages:     64 MiB memfd: %s; 64 MiB /dev/shm file: %s; 64 MiB private buffer (lmtbench --hugepages): %s\n",
		pages.Decide(sys, cfg, pages.Memfd, infoObject, 0), pages.Decide(sys, cfg, pages.DevShm, infoObject, 0),
		pages.Decide(sys, cfg, pages.Anon, infoObject, 0))
}
