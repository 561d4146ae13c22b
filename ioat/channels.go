package ioat

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
)

// SysfsDMARoot is where dmaengine lists its channels; [ReadChannels] takes
// an fs.FS rooted there (os.DirFS(SysfsDMARoot)) so that tests can pass
// recorded trees.
const SysfsDMARoot = "/sys/class/dma"

// Memcpy says whether a channel can do DMA_MEMCPY.
type Memcpy string

// Sysfs exposes no capability mask, so a channel is known to copy memory
// only when its driver is one that registers DMA_MEMCPY.
const (
	MemcpyYes     Memcpy = "yes"
	MemcpyUnknown Memcpy = "unknown"
)

// MemcpyDrivers are the dmaengine drivers known to register DMA_MEMCPY
// channels for general use: Intel I/OAT, Intel DSA, and the project's
// test-only provider (kmod/softdma) that stands in for them under QEMU.
var MemcpyDrivers = []string{"ioatdma", "idxd", "softdma"}

// Channel is one dmaengine channel, as /sys/class/dma/dmaNchanM shows it.
type Channel struct {
	Name             string // dma0chan0
	Device           string // the DMA controller: PCI address or platform name
	Driver           string // driver bound to the controller, "" if none
	InUse            bool   // a client (KNEM, async_tx) holds the channel
	MemcpyCount      uint64 // memcpy operations done so far
	BytesTransferred uint64
	Memcpy           Memcpy
}

// ReadChannels lists the channels under a /sys/class/dma tree. A missing
// directory (dmaengine not built in) is no channel, not an error.
func ReadChannels(fsys fs.FS) ([]Channel, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("dma channels: %w", err)
	}
	var chans []Channel
	for _, e := range entries {
		if !isChannelName(e.Name()) {
			continue
		}
		c, err := readChannel(fsys, e.Name())
		if err != nil {
			return nil, err
		}
		chans = append(chans, c)
	}
	slices.SortFunc(chans, func(a, b Channel) int { return strings.Compare(a.Name, b.Name) })
	return chans, nil
}

// isChannelName matches dmaNchanM.
func isChannelName(s string) bool {
	dev, ch, ok := strings.Cut(strings.TrimPrefix(s, "dma"), "chan")
	if !ok || !strings.HasPrefix(s, "dma") {
		return false
	}
	_, err1 := strconv.ParseUint(dev, 10, 32)
	_, err2 := strconv.ParseUint(ch, 10, 32)
	return err1 == nil && err2 == nil
}

func readChannel(fsys fs.FS, name string) (Channel, error) {
	c := Channel{Name: name, Memcpy: MemcpyUnknown}
	num := func(attr string) (uint64, error) {
		b, err := fs.ReadFile(fsys, path.Join(name, attr))
		if err != nil {
			return 0, fmt.Errorf("dma channels: %w", err)
		}
		n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("dma channels: %s/%s = %q: not a count", name, attr, strings.TrimSpace(string(b)))
		}
		return n, nil
	}
	inUse, err := num("in_use")
	if err != nil {
		return c, err
	}
	c.InUse = inUse != 0
	if c.MemcpyCount, err = num("memcpy_count"); err != nil {
		return c, err
	}
	if c.BytesTransferred, err = num("bytes_transferred"); err != nil {
		return c, err
	}
	// The links are informative: a tree without them still lists the channel.
	if dev, err := fs.ReadLink(fsys, path.Join(name, "device")); err == nil {
		c.Device = path.Base(dev)
	}
	if drv, err := fs.ReadLink(fsys, path.Join(name, "device", "driver")); err == nil {
		c.Driver = path.Base(drv)
	}
	if slices.Contains(MemcpyDrivers, c.Driver) {
		c.Memcpy = MemcpyYes
	}
	return c, nil
}
