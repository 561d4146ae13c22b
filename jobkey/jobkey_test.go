package jobkey

import (
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	k, err := New()
	if err != nil {
		t.Fatal(err)
	}
	if k.IsZero() {
		t.Fatal("New returned the zero key")
	}
	got, err := Parse(k.Encode())
	if err != nil {
		t.Fatal(err)
	}
	if got != k {
		t.Fatalf("Parse(Encode(k)) = %x, want %x", got, k)
	}
	k2, err := New()
	if err != nil {
		t.Fatal(err)
	}
	if k2 == k {
		t.Fatal("two keys from New are equal")
	}
}

func TestParseErrors(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"abc", "key has 3 characters, want 64 hex digits"},
		{strings.Repeat("zz", Size), "key is not hex"},
		{strings.Repeat("00", Size), "the all-zero key is no key"},
	} {
		_, err := Parse(c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%q) = %v, want an error containing %q", c.in, err, c.want)
		}
	}
}

func TestFromEnv(t *testing.T) {
	t.Setenv(Env, "")
	if _, err := FromEnv(); err == nil {
		t.Fatal("FromEnv accepted an empty key")
	}
	k, err := New()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(Env, k.Encode())
	got, err := FromEnv()
	if err != nil || got != k {
		t.Fatalf("FromEnv = %v, %v, want the key set", got, err)
	}
}

func TestFromEnvUnset(t *testing.T) {
	t.Setenv(Env, "x") // restored after the test
	if err := os.Unsetenv(Env); err != nil {
		t.Fatal(err)
	}
	if _, err := FromEnv(); !errors.Is(err, ErrNoKey) {
		t.Fatalf("FromEnv with %s unset = %v, want ErrNoKey", Env, err)
	}
}

func TestDeriveAndName(t *testing.T) {
	var a, b Key
	a[0], b[0] = 1, 2
	if a.Derive("x") == a.Derive("y") {
		t.Error("two purposes gave the same subkey")
	}
	if a.Derive("x") == b.Derive("x") {
		t.Error("two keys gave the same subkey")
	}
	n := a.Name("segment")
	if !regexp.MustCompile(`^[a-z2-7]{26}$`).MatchString(n) {
		t.Errorf("Name = %q, want 26 characters of [a-z2-7]", n)
	}
	if n == a.Name("ring") || n == b.Name("segment") {
		t.Error("names of different purposes or keys coincide")
	}
	if a.Name("segment") != n {
		t.Error("Name is not deterministic")
	}
}

func TestStringHidesKey(t *testing.T) {
	var k Key
	for i := range k {
		k[i] = byte(i + 1)
	}
	s := k.String()
	if strings.Contains(s, k.Encode()[:8]) {
		t.Errorf("String %q shows the key", s)
	}
	if !regexp.MustCompile(`^jobkey\([0-9a-f]{8}\)$`).MatchString(s) {
		t.Errorf("String = %q, want jobkey(8 hex digits)", s)
	}
	if (Key{}).String() != "jobkey(none)" {
		t.Errorf("zero key String = %q", Key{}.String())
	}
}
