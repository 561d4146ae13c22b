package fifo

import (
	"fmt"

	"github.com/knemesis/knemesis/lmt"
)

// Settings are the pipe and vmsplice backends' own (an lmt.Settings, in
// lmt.Config.Backends): how large a pipe they ask for and accept, and how
// much one Step moves. Zero fields take the defaults below.
type Settings struct {
	// Size is the capacity asked of every pipe with F_SETPIPE_SZ
	// (default 1 MiB), but never beyond the system's cap (MaxSizePath);
	// below MinSize (default 64 KiB, the kernel default) the backends
	// report themselves unavailable.
	Size, MinSize int
	// Chunk bounds what a Step moves (default: the pipe's capacity, the
	// paper's chunk of one pipe-full). Every chunk costs the reader a
	// wake-up, which a busy machine makes expensive.
	Chunk int
	// MaxSizePath is where the cap is read (default
	// /proc/sys/fs/pipe-max-size; tests point it at a fake).
	MaxSizePath string
}

// Defaults.
const (
	DefaultSize    = 1 << 20
	DefaultMinSize = 64 << 10
	MaxSizeFile    = "/proc/sys/fs/pipe-max-size"
)

// Validate implements lmt.Settings.
func (s Settings) Validate() error {
	for _, f := range []struct {
		name string
		v    int
	}{{"Size", s.Size}, {"MinSize", s.MinSize}, {"Chunk", s.Chunk}} {
		if f.v < 0 {
			return fmt.Errorf("pipe: Settings.%s is %d, negative (0 takes the default)", f.name, f.v)
		}
	}
	if s.Size > 0 && s.MinSize > s.Size {
		return fmt.Errorf("pipe: Settings.MinSize %d is above Settings.Size %d", s.MinSize, s.Size)
	}
	return nil
}

// WithDefaults returns s with every zero field set to its default.
func (s Settings) WithDefaults() Settings {
	if s.Size <= 0 {
		s.Size = DefaultSize
	}
	if s.MinSize <= 0 {
		s.MinSize = DefaultMinSize
	}
	if s.MaxSizePath == "" {
		s.MaxSizePath = MaxSizeFile
	}
	return s
}

// settingsOf returns cfg's pipe settings with their defaults.
func settingsOf(cfg *lmt.Config) Settings {
	return lmt.SettingsOf[Settings](cfg).WithDefaults()
}

// PlanSize is Plan for cfg's pipe settings: the capacity the backends will
// give their pipes and whether the system's cap lowered it.
func PlanSize(cfg *lmt.Config) (size int, capped bool, err error) {
	s := settingsOf(cfg)
	return Plan(s.Size, s.MinSize, s.MaxSizePath)
}
