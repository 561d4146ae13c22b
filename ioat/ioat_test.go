package ioat

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"

	"golang.org/x/sys/unix"

	"github.com/knemesis/knemesis/kmod/knem"
)

func TestReadChannelsFixtures(t *testing.T) {
	chans, err := ReadChannels(os.DirFS("testdata/ioat/class/dma"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Channel{
		{"dma0chan0", "0000:00:04.0", "ioatdma", true, 1200, 314572800, MemcpyYes},
		{"dma1chan0", "0000:00:04.1", "ioatdma", true, 1200, 314572800, MemcpyYes},
		{"dma2chan0", "0000:00:04.2", "ioatdma", false, 0, 0, MemcpyYes},
		{"dma3chan0", "0000:00:04.3", "ioatdma", false, 0, 0, MemcpyYes},
	}
	if !reflect.DeepEqual(chans, want) {
		t.Errorf("ioat:\n got %+v\nwant %+v", chans, want)
	}

	chans, err = ReadChannels(os.DirFS("testdata/platform/class/dma"))
	if err != nil || len(chans) != 2 || chans[1].Name != "dma0chan1" || chans[1].Device != "ff7c0000.dma-controller" ||
		chans[1].Driver != "dw_axi_dmac" || chans[1].Memcpy != MemcpyUnknown {
		t.Errorf("platform: %+v, %v", chans, err)
	}
	chans, err = ReadChannels(os.DirFS("testdata/softdma/class/dma"))
	if err != nil || len(chans) != 2 || chans[0].Device != "softdma.0" || chans[0].Driver != "softdma" ||
		chans[0].Memcpy != MemcpyYes || !chans[0].InUse {
		t.Errorf("softdma: %+v, %v", chans, err)
	}
	if chans, err := ReadChannels(os.DirFS("testdata/none/class/dma")); err != nil || len(chans) != 0 {
		t.Errorf("none: %+v, %v", chans, err)
	}
	if chans, err := ReadChannels(os.DirFS("testdata/absent")); err != nil || chans != nil {
		t.Errorf("absent class directory: %+v, %v", chans, err)
	}
}

func TestReadChannelsErrors(t *testing.T) {
	fsys := fstest.MapFS{
		"dma0chan0/in_use":            {Data: []byte("1\n")},
		"dma0chan0/memcpy_count":      {Data: []byte("lots\n")},
		"dma0chan0/bytes_transferred": {Data: []byte("0\n")},
		"dmachan":                     {Data: []byte("not a channel")},
	}
	if _, err := ReadChannels(fsys); err == nil || err.Error() != `dma channels: dma0chan0/memcpy_count = "lots": not a count` {
		t.Errorf("bad count: %v", err)
	}
	delete(fsys, "dma0chan0/memcpy_count")
	if _, err := ReadChannels(fsys); !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "memcpy_count") {
		t.Errorf("missing attribute: %v", err)
	}
	for _, s := range []string{"dma0chan0", "dma12chan3"} {
		if !isChannelName(s) {
			t.Errorf("%s not taken for a channel", s)
		}
	}
	for _, s := range []string{"dmachan", "dma0chan", "dma0", "xdma0chan0", "dma-1chan0", ".keep"} {
		if isChannelName(s) {
			t.Errorf("%s taken for a channel", s)
		}
	}
}

func TestDeviceGetInfoErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "knem")
	_, err := Device(missing).GetInfo()
	if !errors.Is(err, ErrModuleNotLoaded) || err.Error() != "module not loaded: "+missing+" missing — modprobe knem" {
		t.Errorf("missing device: %v", err)
	}
	// /dev/null takes no ioctl: the answer must say so, not read garbage.
	_, err = Device("/dev/null").GetInfo()
	if !errors.Is(err, unix.ENOTTY) || !strings.Contains(err.Error(), "not a KNEM device") {
		t.Errorf("/dev/null: %v", err)
	}
}

type fakeInfo struct {
	info ModuleInfo
	err  error
}

func (f fakeInfo) GetInfo() (ModuleInfo, error) { return f.info, f.err }

func TestDiscover(t *testing.T) {
	ioat := os.DirFS("testdata/ioat/class/dma")
	none := os.DirFS("testdata/none/class/dma")
	platform := os.DirFS("testdata/platform/class/dma")
	notLoaded := fakeInfo{err: fmt.Errorf("%w: /dev/knem missing — modprobe knem", ErrModuleNotLoaded)}
	tests := []struct {
		name    string
		opts    Options
		offload bool
		missing []string
	}{
		{"module with DMA", Options{Info: fakeInfo{info: ModuleInfo{ABI: 0xd, Features: knem.FeatureDMA}}, Sysfs: ioat}, true, nil},
		{"module without a channel", Options{Info: fakeInfo{info: ModuleInfo{ABI: 0xd}}, Sysfs: none}, false, []string{
			"no DMA_MEMCPY channel in /sys/class/dma",
			"module loaded but its DMA feature bit is clear: it found no usable DMA_MEMCPY channel"}},
		{"channels but no module", Options{Info: notLoaded, Sysfs: ioat}, false, []string{
			"module not loaded: /dev/knem missing — modprobe knem"}},
		{"this machine's kind: nothing", Options{Info: notLoaded, Sysfs: none}, false, []string{
			"module not loaded: /dev/knem missing — modprobe knem",
			"no DMA_MEMCPY channel in /sys/class/dma"}},
		{"unknown provider", Options{Info: fakeInfo{info: ModuleInfo{ABI: 0xd}}, Sysfs: platform}, false, []string{
			"no known DMA_MEMCPY channel in /sys/class/dma (2 channels of drivers [dw_axi_dmac], whose capabilities sysfs does not show)",
			"module loaded but its DMA feature bit is clear: it found no usable DMA_MEMCPY channel"}},
		{"wrong ABI", Options{Info: fakeInfo{info: ModuleInfo{ABI: 0xc, Features: knem.FeatureDMA}}, Sysfs: ioat}, false, []string{
			"module speaks KNEM ABI 0xc, clients need 0xd"}},
	}
	for _, tt := range tests {
		s := Discover(tt.opts)
		if s.Offload() != tt.offload || !reflect.DeepEqual(s.Missing(), tt.missing) {
			t.Errorf("%s: offload %v missing %q; want %v %q", tt.name, s.Offload(), s.Missing(), tt.offload, tt.missing)
		}
	}
}

// TestDiscoverHost reads this machine. Where /dev/knem is absent, the
// answer must be the not-loaded line; where it exists, GET_INFO must work.
func TestDiscoverHost(t *testing.T) {
	s := Discover(Options{})
	t.Logf("host: module %+v err %v; %d channels; missing %q", s.Module, s.ModuleErr, len(s.Channels), s.Missing())
	if _, err := os.Stat(knem.DevicePath); errors.Is(err, os.ErrNotExist) {
		if !errors.Is(s.ModuleErr, ErrModuleNotLoaded) || s.Missing()[0] != "module not loaded: /dev/knem missing — modprobe knem" {
			t.Errorf("without %s: %v / %q", knem.DevicePath, s.ModuleErr, s.Missing())
		}
	} else if s.ModuleErr != nil {
		t.Errorf("%s exists but GET_INFO failed: %v", knem.DevicePath, s.ModuleErr)
	}
}

func TestStatusDescribe(t *testing.T) {
	var b strings.Builder
	s := Discover(Options{Info: fakeInfo{info: ModuleInfo{ABI: 0xd, Features: knem.FeatureDMA}}, Sysfs: os.DirFS("testdata/ioat/class/dma")})
	if err := s.Describe(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"knem module\tABI 0xd, features 0x1 (DMA true)",
		"dma channels\t4 in /sys/class/dma",
		"  dma1chan0\t0000:00:04.1 (ioatdma), memcpy yes, in use true, 1200 copies, 314572800 bytes",
		"offload\ttrue",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("Describe lacks %q:\n%s", want, b.String())
		}
	}
}
