package knem

import (
	"bytes"
	"testing"

	"golang.org/x/sys/unix"
)

// TestAttach reads a region of another descriptor through an attachment,
// writes it back, and checks the driver's access rules.
func TestAttach(t *testing.T) {
	owner, user := open(t), open(t)
	info, err := user.Info()
	if err != nil {
		t.Fatal(err)
	}
	if info.Features&FeatureAttach == 0 {
		t.Fatalf("GET_INFO features %#x lack FeatureAttach", info.Features)
	}
	src := payload(31, 3*4096+777)
	c := region(t, owner, [][]byte{src[5:]}, ProtRead|ProtWrite, 0)
	a, err := user.Attach(c, ProtRead|ProtWrite)
	if err != nil {
		t.Fatal(err)
	}
	got := a.Bytes()
	if len(got) != len(src)-5 || checksum(got) != checksum(src[5:]) {
		t.Fatalf("attached %d bytes, checksum %#x; want %d bytes, %#x",
			len(got), checksum(got), len(src)-5, checksum(src[5:]))
	}
	want := payload(32, len(got))
	copy(got, want)
	if !bytes.Equal(src[5:], want) {
		t.Fatalf("writes through the attachment differ at byte %d", firstDiff(src[5:], want))
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	ro := region(t, owner, [][]byte{src}, ProtRead, 0)
	_, err = user.Attach(ro, ProtRead|ProtWrite)
	wantErrno(t, "writable attachment of a read-only region", err, unix.EACCES)
	single := region(t, owner, [][]byte{src}, ProtRead, FlagSingleUse)
	_, err = user.Attach(single, ProtRead)
	wantErrno(t, "attachment of a single-use region", err, unix.EINVAL)
}
