package bytesize

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	const gib, tib = 1 << 30, 1 << 40
	tests := []struct {
		in    string
		limit int64
		want  int64
		err   string // a part of the error; "" when in parses
	}{
		// lmtbench message sizes
		{"0", gib, 0, ""},
		{"4096", gib, 4096, ""},
		{"4K", gib, 4096, ""},
		{"4k", gib, 4096, ""},
		{"4KB", gib, 4096, ""},
		{"4Ki", gib, 4096, ""},
		{"4KiB", gib, 4096, ""},
		{"64KiB", gib, 65536, ""},
		{"1M", gib, 1 << 20, ""},
		{"1MiB", gib, 1 << 20, ""},
		{"1G", gib, 1 << 30, ""},
		{"12B", gib, 12, ""},
		{" 8 ", gib, 8, ""},
		{"", gib, 0, "want a number"},
		{"K", gib, 0, "want a number"},
		{"4Q", gib, 0, `unknown unit "Q"`},
		{"4.5K", gib, 0, `unknown unit ".5K"`},
		{"2G", gib, 0, "larger than the 1G limit"},
		{"1025M", gib, 0, "larger than the 1G limit"},
		{"99999999999999999999", gib, 0, "larger than"},
		// sysfs cache sizes and $KNEMESIS_CACHE levels
		{"32K", tib, 32 << 10, ""},
		{"32768K\n", tib, 32 << 20, ""},
		{"4M", tib, 4 << 20, ""},
		{"4MiB", tib, 4 << 20, ""},
		{"4 MiB", tib, 4 << 20, ""},
		{"1G", tib, 1 << 30, ""},
		{"100", tib, 100, ""},
		{"64B", tib, 64, ""},
		{"1024G", tib, tib, ""},
		{"", tib, 0, "want a number"},
		{"K", tib, 0, "want a number"},
		{"-1K", tib, 0, "want a number"},
		{"+1K", tib, 0, "want a number"},
		{"4T", tib, 0, `unknown unit "T"`},
		{"1025G", tib, 0, "larger than the 1024G limit"},
		{"99999999999G", tib, 0, "larger than the 1024G limit"},
	}
	for _, tt := range tests {
		got, err := Parse(tt.in, tt.limit)
		switch {
		case tt.err == "" && (err != nil || got != tt.want):
			t.Errorf("Parse(%q, %d) = %d, %v; want %d", tt.in, tt.limit, got, err, tt.want)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err) || !strings.HasPrefix(err.Error(), "size ")):
			t.Errorf("Parse(%q, %d) = %d, %v; want an error naming the size and containing %q", tt.in, tt.limit, got, err, tt.err)
		}
	}
}

func TestFormat(t *testing.T) {
	tests := []struct {
		n           int64
		long, short string
	}{
		{0, "0 B", "0"},
		{100, "100 B", "100"},
		{1536, "1536 B", "1536"},
		{4096, "4 KiB", "4K"},
		{1536 << 10, "1536 KiB", "1536K"},
		{1 << 20, "1 MiB", "1M"},
		{3 << 30, "3 GiB", "3G"},
	}
	for _, tt := range tests {
		if got := Format(tt.n); got != tt.long {
			t.Errorf("Format(%d) = %q, want %q", tt.n, got, tt.long)
		}
		if got := Short(tt.n); got != tt.short {
			t.Errorf("Short(%d) = %q, want %q", tt.n, got, tt.short)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"4K", "32768K", "1MiB", "99999999999G", " 7 b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := Parse(s, 1<<40)
		if err == nil && (n < 0 || n > 1<<40) {
			t.Fatalf("Parse(%q) = %d, outside [0, 1 TiB]", s, n)
		}
	})
}
