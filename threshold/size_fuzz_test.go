package threshold

import "testing"

// FuzzParseSize: ParseSize never panics, accepts only sizes in 0..2^62,
// and reads back what FormatSize writes. The seeds run under plain go
// test.
func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"32K", "32768K", "4 KiB", "1MB", "3G", "0", "12B", "", "-1", "K", "1.5M",
		"4611686018427387904", "4611686018427387905", "4194304G", "9999999999999999999999", " 64 k "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		if err != nil {
			return
		}
		if n < 0 || n > 1<<62 {
			t.Fatalf("ParseSize(%q) = %d, outside 0..2^62", s, n)
		}
		if back, err := ParseSize(FormatSize(n)); err != nil || back != n {
			t.Fatalf("ParseSize(FormatSize(%d) = %q) = %d, %v", n, FormatSize(n), back, err)
		}
	})
}
