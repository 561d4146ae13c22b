package ioat

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"

	"github.com/knemesis/knemesis/kmod/knem"
)

// Status is what stands for and against DMA offload on this machine.
type Status struct {
	Module    ModuleInfo
	ModuleErr error // why GET_INFO failed; nil when Module is valid
	Channels  []Channel
	SysfsErr  error // why /sys/class/dma could not be read
}

// Options says where [Discover] looks; the zero value reads this machine.
type Options struct {
	Info  InfoReader // nil: Device(knem.DevicePath)
	Sysfs fs.FS      // nil: os.DirFS(SysfsDMARoot)
}

// Discover asks the module and sysfs. It never fails: what could not be
// read is recorded in the Status and explained by Missing.
func Discover(opts Options) Status {
	info := opts.Info
	if info == nil {
		info = Device(knem.DevicePath)
	}
	sysfs := opts.Sysfs
	if sysfs == nil {
		sysfs = os.DirFS(SysfsDMARoot)
	}
	var s Status
	s.Module, s.ModuleErr = info.GetInfo()
	if s.ModuleErr == nil && s.Module.ABI != knem.ABIVersion {
		s.ModuleErr = fmt.Errorf("module speaks KNEM ABI %#x, clients need %#x", s.Module.ABI, knem.ABIVersion)
	}
	s.Channels, s.SysfsErr = ReadChannels(sysfs)
	return s
}

// Offload reports whether copies can go to a DMA engine now: the module
// answers with the right ABI and says it holds a DMA channel.
func (s Status) Offload() bool { return s.ModuleErr == nil && dma(s.Module) }

// Knem reports whether the module answers with the right ABI.
func (s Status) Knem() bool { return s.ModuleErr == nil }

// MemcpyChannels counts channels that copy memory or might (unknown
// drivers): what the module could use.
func (s Status) MemcpyChannels() (known, unknown int) {
	for _, c := range s.Channels {
		switch c.Memcpy {
		case MemcpyYes:
			known++
		default:
			unknown++
		}
	}
	return known, unknown
}

// Missing explains, one line per obstacle, why offload is not available;
// empty when Offload is true.
func (s Status) Missing() []string {
	if s.Offload() {
		return nil
	}
	var m []string
	if s.ModuleErr != nil {
		m = append(m, s.ModuleErr.Error())
	}
	known, unknown := s.MemcpyChannels()
	switch {
	case s.SysfsErr != nil:
		m = append(m, "cannot list DMA channels: "+s.SysfsErr.Error())
	case known == 0 && unknown == 0:
		m = append(m, "no DMA_MEMCPY channel in "+SysfsDMARoot)
	case known == 0:
		m = append(m, fmt.Sprintf("no known DMA_MEMCPY channel in %s (%d channels of drivers %s, whose capabilities sysfs does not show)",
			SysfsDMARoot, unknown, s.drivers()))
	}
	if s.ModuleErr == nil && !dma(s.Module) {
		m = append(m, "module loaded but its DMA feature bit is clear: it found no usable DMA_MEMCPY channel")
	}
	return m
}

func (s Status) drivers() string {
	var ds []string
	for _, c := range s.Channels {
		d := c.Driver
		if d == "" {
			d = "(none)"
		}
		ds = append(ds, d)
	}
	slices.Sort(ds)
	return fmt.Sprint(slices.Compact(ds))
}

// Describe prints the module's answer, the channels and what is missing,
// for `lmtbench info`.
func (s Status) Describe(w io.Writer) error {
	if s.ModuleErr == nil {
		fmt.Fprintf(w, "knem module\tABI %#x, features %#x (DMA %v), ignored flags %#x, forced flags %#x\n",
			s.Module.ABI, s.Module.Features, dma(s.Module), s.Module.IgnoredFlags, s.Module.ForcedFlags)
	} else {
		fmt.Fprintf(w, "knem module\t%v\n", s.ModuleErr)
	}
	fmt.Fprintf(w, "dma channels\t%d in %s\n", len(s.Channels), SysfsDMARoot)
	for _, c := range s.Channels {
		fmt.Fprintf(w, "  %s\t%s (%s), memcpy %s, in use %v, %d copies, %d bytes\n",
			c.Name, c.Device, c.Driver, c.Memcpy, c.InUse, c.MemcpyCount, c.BytesTransferred)
	}
	for _, m := range s.Missing() {
		fmt.Fprintf(w, "offload missing\t%s\n", m)
	}
	_, err := fmt.Fprintf(w, "offload\t%v\n", s.Offload())
	return err
}
