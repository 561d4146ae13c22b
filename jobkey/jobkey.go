// Package jobkey is a job's secret: 256 random bits that every rank of one
// job holds and nobody else does.
//
// A job's identity is its key, not the name a user passes to Join: names of
// shared objects carry a part derived from the key ([Key.Name]), so another
// user cannot guess them to pre-create or squat them, and messages between
// nodes carry a MAC keyed from it ([Key.Derive]), so a process outside the
// job cannot pose as a rank.
//
// The launcher hands the key to its ranks: launch.Run puts it in the
// environment variable [Env] of every rank it starts, and under PMIx rank 0
// draws it and publishes it with Put and Fence. A program that starts its
// ranks by other means draws one key with [New] and hands it to every rank
// by a channel only the job's user can read.
//
// A Key's String never shows the secret; [Key.Encode] does, for the
// environment of a child.
package jobkey

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Env is the environment variable through which a launcher hands a job's
// key to its ranks, hex-encoded.
const Env = "KNEMESIS_JOB_KEY"

// Size is a key's length in bytes.
const Size = 32

// Key is a job's secret. The zero Key is no key.
type Key [Size]byte

// ErrNoKey is returned by FromEnv when the environment holds no key.
var ErrNoKey = errors.New("jobkey: no job key")

// New draws a key from getrandom(2).
func New() (Key, error) {
	var k Key
	for n := 0; n < Size; {
		m, err := unix.Getrandom(k[n:], 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return Key{}, fmt.Errorf("jobkey: getrandom: %w", err)
		}
		n += m
	}
	return k, nil
}

// Parse decodes a key from its Encode form.
func Parse(s string) (Key, error) {
	var k Key
	if len(s) != 2*Size {
		return Key{}, fmt.Errorf("jobkey: key has %d characters, want %d hex digits (%s as set by the launcher)", len(s), 2*Size, Env)
	}
	if _, err := hex.Decode(k[:], []byte(s)); err != nil {
		return Key{}, fmt.Errorf("jobkey: key is not hex: %w", err)
	}
	if k.IsZero() {
		return Key{}, errors.New("jobkey: the all-zero key is no key")
	}
	return k, nil
}

// FromEnv reads the key the launcher put in [Env]. It returns an error
// wrapping ErrNoKey when the variable is unset.
func FromEnv() (Key, error) {
	s, ok := os.LookupEnv(Env)
	if !ok {
		return Key{}, fmt.Errorf("%w: %s is not set; start the ranks with launch.Run or under PMIx (mpirun, srun), or hand every rank the key of jobkey.New", ErrNoKey, Env)
	}
	return Parse(s)
}

// IsZero reports whether k is no key.
func (k Key) IsZero() bool { return k == Key{} }

// Encode is k in hex, for Env.
func (k Key) Encode() string { return hex.EncodeToString(k[:]) }

// String names k without revealing it: a short fingerprint.
func (k Key) String() string {
	if k.IsZero() {
		return "jobkey(none)"
	}
	f := k.Derive("fingerprint")
	return "jobkey(" + hex.EncodeToString(f[:4]) + ")"
}

// Derive is a subkey for one purpose: HMAC-SHA256 of the purpose under k.
// Different purposes give independent subkeys, so a name derived from the
// key reveals nothing of a MAC key derived from it.
func (k Key) Derive(purpose string) [sha256.Size]byte {
	m := hmac.New(sha256.New, k[:])
	m.Write([]byte("knemesis/" + purpose))
	var out [sha256.Size]byte
	m.Sum(out[:0])
	return out
}

// Name is an unguessable file-name part for the object named purpose: 128
// bits of Derive(purpose) in lower-case base32, 26 characters from
// [a-z2-7].
func (k Key) Name(purpose string) string {
	d := k.Derive("name/" + purpose)
	return nameEncoding.EncodeToString(d[:16])
}

var nameEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)
