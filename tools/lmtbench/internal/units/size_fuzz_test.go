package units

import "testing"

// FuzzParseSize: ParseSize never panics, accepts only sizes in 0..MaxSize,
// and reads back what Format writes. The seeds run under plain go test.
func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"4096", "4K", "4k", "4KB", "64KiB", "1MiB", "1G", "2G", "0", "", "-1", "K",
		"4X", " 4 k ", "1073741824", "1073741825", "9223372036854775807", "99999999999999999999", "1048577K"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		if err != nil {
			return
		}
		if n < 0 || n > MaxSize {
			t.Fatalf("ParseSize(%q) = %d, outside 0..%d", s, n, MaxSize)
		}
		if back, err := ParseSize(Format(n)); err != nil || back != n {
			t.Fatalf("ParseSize(Format(%d) = %q) = %d, %v", n, Format(n), back, err)
		}
	})
}
