package units

import (
	"slices"
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int{
		"0": 0, "4096": 4096, "4K": 4096, "4k": 4096, "4KB": 4096, "4KiB": 4096,
		"64KiB": 65536, "1M": 1 << 20, "1MiB": 1 << 20, "1G": 1 << 30, "12B": 12, " 8 ": 8,
	} {
		got, err := ParseSize(in)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
}

func TestParseSizeErrors(t *testing.T) {
	for in, want := range map[string]string{
		"":                     "want a number",
		"K":                    "want a number",
		"4Q":                   `unknown unit "Q"`,
		"4.5K":                 `unknown unit ".5K"`,
		"2G":                   "larger than the 1G limit",
		"99999999999999999999": "larger than",
	} {
		_, err := ParseSize(in)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseSize(%q) error = %v; want it to contain %q", in, err, want)
		}
	}
}

func TestParseList(t *testing.T) {
	got, err := ParseList("4K-64K,1M,4K,3", 1)
	if err != nil {
		t.Fatal(err)
	}
	want := []int{3, 4096, 8192, 16384, 32768, 65536, 1 << 20}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	got, err = ParseList("0-8", 0)
	if err != nil || !slices.Equal(got, []int{0, 1, 2, 4, 8}) {
		t.Errorf("0-8 = %v, %v", got, err)
	}
	got, err = ParseList("4K-64M", 1)
	if err != nil || len(got) != 15 || got[14] != 64<<20 {
		t.Errorf("4K-64M = %v, %v; want the 15 powers of two", got, err)
	}
}

func TestParseListErrors(t *testing.T) {
	for in, want := range map[string]string{
		"0":      "a 0-byte message means nothing here",
		"0-4K":   "a 0-byte message means nothing here",
		"4K,,8K": "empty item",
		"64K-4K": "64K is above 4K",
		"4K-x":   "want a number",
	} {
		_, err := ParseList(in, 1)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseList(%q) error = %v; want it to contain %q", in, err, want)
		}
	}
}

func TestFormat(t *testing.T) {
	for n, want := range map[int]string{0: "0", 100: "100", 4096: "4K", 1 << 20: "1M", 3 << 30: "3G", 1536: "1536"} {
		if got := Format(n); got != want {
			t.Errorf("Format(%d) = %q, want %q", n, got, want)
		}
	}
}
