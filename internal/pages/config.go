package pages

import (
	"fmt"
	"os"
	"strings"

	"github.com/knemesis/knemesis/internal/bytesize"
)

// EnvVar turns hugetlb pages on: "hugetlb:<cap>" (such as hugetlb:512M)
// lets this process take up to cap bytes of the reserved pool; "" or "off"
// leaves the pool to the application.
const EnvVar = "KNEMESIS_HUGEPAGES"

// maxCap bounds the cap a person can type, so that a typo is refused.
const maxCap = 1 << 40

// Config is the job's choice about hugetlb pages.
type Config struct {
	// HugeTLB allows MFD_HUGETLB memfds.
	HugeTLB bool
	// Cap is the most bytes of hugetlb pages one process takes.
	Cap int64
}

// ParseConfig reads a value of EnvVar.
func ParseConfig(v string) (Config, error) {
	v = strings.TrimSpace(v)
	if v == "" || v == "off" {
		return Config{}, nil
	}
	c, ok := strings.CutPrefix(v, "hugetlb:")
	if !ok {
		return Config{}, fmt.Errorf("%s=%q: want hugetlb:<cap bytes> (such as hugetlb:512M) or off", EnvVar, v)
	}
	n, err := bytesize.Parse(c, maxCap)
	if err != nil {
		return Config{}, fmt.Errorf("%s=%q: %w", EnvVar, v, err)
	}
	return Config{HugeTLB: n > 0, Cap: n}, nil
}

// ConfigFromEnv reads EnvVar; a value it cannot read turns hugetlb pages
// off and says so in the error, which the caller prints and goes on.
func ConfigFromEnv() (Config, error) { return ParseConfig(os.Getenv(EnvVar)) }
