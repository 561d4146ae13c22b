package knem

// One test per ABI fact of shared/docs/knem-abi.md: each error path with its
// exact errno, and the copy-length rules with exact byte counts.

import (
	"errors"
	"fmt"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/knemesis/knemesis/kmod/knem/internal/uapi"
)

func TestInfoReportsABI0xd(t *testing.T) {
	d := open(t)
	info, err := d.Info()
	if err != nil {
		t.Fatal(err)
	}
	if info.ABI != 0xd {
		t.Fatalf("ABI %#x, want 0xd", info.ABI)
	}
	if inGuest && info.Features&FeatureDMA == 0 {
		t.Fatal("softdma is loaded but GET_INFO reports no DMA feature")
	}
}

// TestReadInfoMatchesInfo: the diagnostic probe, which checks no ABI,
// gets the open context's answer.
func TestReadInfoMatchesInfo(t *testing.T) {
	want, err := open(t).Info()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := ReadInfo(DevicePath); err != nil || got != want {
		t.Fatalf("ReadInfo = %+v, %v; want %+v", got, err, want)
	}
}

func TestUnknownCommandIsENOSYS(t *testing.T) {
	d := open(t)
	var buf [64]byte
	arg := uintptr(unsafe.Pointer(&buf[0]))
	for _, cmd := range []uintptr{
		2<<30 | 'K'<<8 | 0x7f | 16<<16,    // unused number
		2<<30 | 'K'<<8 | 0x33 | 40<<16,    // INLINE_COPY with a wrong size
		1<<30 | 'K'<<8 | 0x33 | 48<<16,    // INLINE_COPY with a wrong direction
		2<<30 | 'Q'<<8 | 0x10 | 16<<16,    // another magic
		uapi.CmdGetInfo &^ (0x3fff << 16), // GET_INFO without a size
	} {
		wantErrno(t, "ioctl "+hex(cmd), ioctlRaw(d, cmd, arg), unix.ENOSYS)
	}
}

func hex[T ~uint32 | ~uintptr](v T) string { return fmt.Sprintf("%#x", uint64(v)) }

func TestUnreadableArgumentsAreEFAULT(t *testing.T) {
	d := open(t)
	bad := faultingAddr(t)
	for _, cmd := range []struct {
		name string
		nr   uintptr
	}{
		{"GET_INFO", uapi.CmdGetInfo},
		{"BIND_OFFLOAD", uapi.CmdBindOffload},
		{"INIT_SEND", uapi.CmdInitSend},
		{"CREATE_REGION", uapi.CmdCreateRegion},
		{"DESTROY_REGION", uapi.CmdDestroyRegion},
		{"INIT_ASYNC_RECV", uapi.CmdInitAsyncRecv},
		{"SYNC_RECV", uapi.CmdSyncRecv},
		{"COPY", uapi.CmdCopy},
		{"INLINE_COPY", uapi.CmdInlineCopy},
		{"COPY_BOUNDED", uapi.CmdCopyBounded},
		{"INLINE_COPY_BOUNDED", uapi.CmdInlineCopyBounded},
	} {
		wantErrno(t, cmd.name+" on an inaccessible argument", ioctlRaw(d, cmd.nr, bad), unix.EFAULT)
		wantErrno(t, cmd.name+" on a NULL argument", ioctlRaw(d, cmd.nr, 0), unix.EFAULT)
	}
}

func TestRegionOverUnpinnableMemoryIsEFAULT(t *testing.T) {
	d := open(t)
	good := make([]byte, 8192)

	_, err := d.CreateRegion([][]byte{good, noAccess(t, 4096)}, ProtRead, 0)
	wantErrno(t, "region over a PROT_NONE page", err, unix.EFAULT)

	ro := mmapBytes(t, 8192, unix.PROT_READ)
	_, err = d.CreateRegion([][]byte{ro}, ProtWrite, 0)
	wantErrno(t, "writable region over read-only memory", err, unix.EFAULT)
	_, err = d.CreateRegion([][]byte{ro}, ProtRead|ProtWrite, 0)
	wantErrno(t, "read-write region over read-only memory", err, unix.EFAULT)
	// Reading read-only memory is what a send does: allowed.
	region(t, d, [][]byte{ro}, ProtRead, 0)

	// The iovec array itself unreadable.
	c := uapi.CreateRegion{IovecArray: faultingIovecs(t), IovecNr: 2, Protection: unix.PROT_READ}
	wantErrno(t, "CREATE_REGION with an inaccessible iovec array",
		ioctlRaw(d, uapi.CmdCreateRegion, uintptr(unsafe.Pointer(&c))), unix.EFAULT)

	if _, err := d.InitSend([][]byte{noAccess(t, 100)}, 0); !errors.Is(err, unix.EFAULT) {
		t.Errorf("INIT_SEND over a PROT_NONE page: %v, want EFAULT", err)
	}
}

func TestInlineCopyIntoUnwritableLocalMemoryIsEFAULT(t *testing.T) {
	d := open(t)
	src := payload(1, 10000)
	c := region(t, d, [][]byte{src}, ProtRead|ProtWrite, 0)
	ro := mmapBytes(t, 16384, unix.PROT_READ)
	for _, flags := range []Flags{0, FlagPinLocal} {
		_, err := d.InlineCopy(Read, [][]byte{ro}, c, 0, All, flags, 0)
		wantErrno(t, "INLINE_COPY read into read-only memory", err, unix.EFAULT)
		_, err = d.InlineCopy(Read, [][]byte{noAccess(t, 4096)}, c, 0, All, flags, 0)
		wantErrno(t, "INLINE_COPY read into PROT_NONE memory", err, unix.EFAULT)
		_, err = d.InlineCopy(Write, [][]byte{noAccess(t, 4096)}, c, 0, All, flags, 0)
		wantErrno(t, "INLINE_COPY write from PROT_NONE memory", err, unix.EFAULT)
	}
	var ic uapi.InlineCopy
	ic.LocalIovecArray, ic.LocalIovecNr, ic.RemoteCookie = faultingIovecs(t), 1, uint64(c)
	wantErrno(t, "INLINE_COPY with an unmapped iovec array",
		ioctlRaw(d, uapi.CmdInlineCopy, uintptr(unsafe.Pointer(&ic))), unix.EFAULT)
}

func TestProtectionIsEACCES(t *testing.T) {
	d := open(t)
	buf := make([]byte, 4096)
	local := [][]byte{make([]byte, 4096)}
	ro := region(t, d, [][]byte{buf}, ProtRead, 0)
	wo := region(t, d, [][]byte{buf}, ProtWrite, 0)
	none := region(t, d, [][]byte{buf}, 0, 0)
	rw := region(t, d, [][]byte{make([]byte, 4096)}, ProtRead|ProtWrite, 0)

	_, err := d.InlineCopy(Write, local, ro, 0, All, 0, 0)
	wantErrno(t, "inline write into a read-only region", err, unix.EACCES)
	_, err = d.InlineCopy(Read, local, wo, 0, All, 0, 0)
	wantErrno(t, "inline read of a write-only region", err, unix.EACCES)
	_, err = d.InlineCopy(Read, local, none, 0, 100, 0, 0)
	wantErrno(t, "bounded inline read of a region without protection", err, unix.EACCES)
	_, err = d.Copy(wo, 0, rw, 0, All, 0, 0)
	wantErrno(t, "COPY from a write-only region", err, unix.EACCES)
	_, err = d.Copy(rw, 0, ro, 0, 10, 0, 0)
	wantErrno(t, "COPY_BOUNDED into a read-only region", err, unix.EACCES)
	// The allowed directions work on the same regions.
	if _, err := d.InlineCopy(Read, local, ro, 0, All, 0, 0); err != nil {
		t.Errorf("inline read of a read-only region: %v", err)
	}
	if _, err := d.InlineCopy(Write, local, wo, 0, All, 0, 0); err != nil {
		t.Errorf("inline write into a write-only region: %v", err)
	}
	if _, err := d.Copy(ro, 0, wo, 0, All, 0, 0); err != nil {
		t.Errorf("COPY read-only to write-only: %v", err)
	}
	_, err = d.CreateRegion([][]byte{buf}, 4, 0) // PROT_EXEC means nothing here
	wantErrno(t, "CREATE_REGION with PROT_EXEC", err, unix.EINVAL)
}

func TestBadCookiesAreEINVAL(t *testing.T) {
	d := open(t)
	local := [][]byte{make([]byte, 4096)}
	c := region(t, d, [][]byte{make([]byte, 4096)}, ProtRead|ProtWrite, 0)
	for _, bad := range []Cookie{0, c + 1, c ^ 1<<63, ^Cookie(0), 0xdeadbeef} {
		_, err := d.InlineCopy(Read, local, bad, 0, All, 0, 0)
		wantErrno(t, "INLINE_COPY from cookie "+bad.String(), err, unix.EINVAL)
		_, err = d.Copy(bad, 0, c, 0, All, 0, 0)
		wantErrno(t, "COPY from cookie "+bad.String(), err, unix.EINVAL)
		_, err = d.Copy(c, 0, bad, 0, All, 0, 0)
		wantErrno(t, "COPY to cookie "+bad.String(), err, unix.EINVAL)
		wantErrno(t, "DESTROY_REGION "+bad.String(), d.DestroyRegion(bad), unix.EINVAL)
		_, err = d.SyncRecv(local, bad, 0)
		wantErrno(t, "SYNC_RECV from cookie "+bad.String(), err, unix.EINVAL)
	}

	gone, err := d.CreateRegion(local, ProtRead, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.DestroyRegion(gone); err != nil {
		t.Fatal(err)
	}
	_, err = d.InlineCopy(Read, local, gone, 0, All, 0, 0)
	wantErrno(t, "INLINE_COPY from a destroyed region", err, unix.EINVAL)
	wantErrno(t, "DESTROY_REGION twice", d.DestroyRegion(gone), unix.EINVAL)
}

func TestUnknownFlagsAreEINVAL(t *testing.T) {
	d := open(t)
	local := [][]byte{make([]byte, 64)}
	// Bit 8 is FlagInvalidateStatus's (watch.go): 9 is the first unknown.
	_, err := d.CreateRegion(local, ProtRead, 1<<9)
	wantErrno(t, "CREATE_REGION with flag 1<<9", err, unix.EINVAL)
	c := region(t, d, local, ProtRead|ProtWrite, 0)
	_, err = d.InlineCopy(Read, local, c, 0, All, 1<<31, 0)
	wantErrno(t, "INLINE_COPY with flag 1<<31", err, unix.EINVAL)
	_, err = d.InlineCopy(2, local, c, 0, All, 0, 0)
	wantErrno(t, "INLINE_COPY with write=2", err, unix.EINVAL)
}

func TestSingleUseCookieIsConsumed(t *testing.T) {
	d := open(t)
	src := payload(2, 5000)
	dst := newGuarded(5000)
	c, err := d.CreateRegion([][]byte{src}, ProtRead, FlagSingleUse)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := d.InlineCopy(Read, [][]byte{dst.body}, c, 0, All, 0, 0); err != nil || st != StatusSuccess {
		t.Fatalf("first use: %v, %v", st, err)
	}
	dst.check(t, "single-use copy", src)
	_, err = d.InlineCopy(Read, [][]byte{dst.body}, c, 0, All, 0, 0)
	wantErrno(t, "second use of a SINGLEUSE cookie", err, unix.EINVAL)
	wantErrno(t, "DESTROY_REGION of a consumed cookie", d.DestroyRegion(c), unix.EINVAL)

	// Same for COPY, on either side.
	rw := region(t, d, [][]byte{make([]byte, 5000)}, ProtRead|ProtWrite, 0)
	s1, err := d.CreateRegion([][]byte{src}, ProtRead, FlagSingleUse)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Copy(s1, 0, rw, 0, All, 0, 0); err != nil {
		t.Fatalf("COPY from a single-use region: %v", err)
	}
	_, err = d.Copy(s1, 0, rw, 0, All, 0, 0)
	wantErrno(t, "COPY from a consumed single-use region", err, unix.EINVAL)

	// The old API's sends are single-use.
	send, err := d.InitSend([][]byte{src}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := d.SyncRecv([][]byte{make([]byte, 5000)}, send, 0); err != nil || st != StatusSuccess {
		t.Fatalf("SYNC_RECV: %v, %v", st, err)
	}
	_, err = d.SyncRecv([][]byte{make([]byte, 5000)}, send, 0)
	wantErrno(t, "second SYNC_RECV of one INIT_SEND", err, unix.EINVAL)
}

func TestRegionsBelongToTheirDescriptor(t *testing.T) {
	owner, other := open(t), open(t)
	src := payload(3, 3000)
	c := region(t, owner, [][]byte{src}, ProtRead, 0)
	wantErrno(t, "DESTROY_REGION of another descriptor's region", other.DestroyRegion(c), unix.EINVAL)
	// Same uid: the other descriptor may still use it.
	dst := newGuarded(3000)
	if _, err := other.InlineCopy(Read, [][]byte{dst.body}, c, 0, All, 0, 0); err != nil {
		t.Fatalf("copy from another descriptor's region: %v", err)
	}
	dst.check(t, "copy through another descriptor", src)

	// Closing the owner destroys its regions.
	owner2, err := Open()
	if err != nil {
		t.Fatal(err)
	}
	c2, err := owner2.CreateRegion([][]byte{src}, ProtRead, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := owner2.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = other.InlineCopy(Read, [][]byte{dst.body}, c2, 0, All, 0, 0)
	wantErrno(t, "copy from a region of a closed descriptor", err, unix.EINVAL)
}

func TestAsyncCopyNeedsStatusArray(t *testing.T) {
	d := open(t)
	local := [][]byte{make([]byte, 8192)}
	c := region(t, d, [][]byte{payload(4, 8192)}, ProtRead|ProtWrite, 0)
	async := []Flags{FlagMemcpyThread}
	if info, _ := d.Info(); info.Features&FeatureDMA != 0 {
		async = append(async, FlagDMA|FlagAsyncDMAComplete, FlagDMA|FlagDMAThread)
	}
	for _, f := range async {
		_, err := d.InlineCopy(Read, local, c, 0, All, f, 0)
		wantErrno(t, "async inline copy without a status array", err, unix.EINVAL)
		_, err = d.Copy(c, 0, c, 4096, 4096, f, 0)
		wantErrno(t, "async COPY without a status array", err, unix.EINVAL)
	}
	send, err := d.InitSend(local, 0)
	if err != nil {
		t.Fatal(err)
	}
	wantErrno(t, "INIT_ASYNC_RECV without a status array", d.InitAsyncRecv(local, send, 0, 0), unix.EINVAL)

	s := mapStatus(t, d)
	for _, f := range async {
		for _, slot := range []Slot{Slot(s.Len()), Slot(s.Len() + 1), 1<<32 - 1} {
			_, err := d.InlineCopy(Read, local, c, 0, All, f, slot)
			wantErrno(t, "async inline copy with slot "+hex(slot), err, unix.EINVAL)
		}
		st, err := d.InlineCopy(Read, local, c, 0, All, f, Slot(s.Len()-1))
		if err != nil {
			t.Fatalf("async copy into the last slot (flags %#x): %v", f, err)
		}
		wait(t, s, Slot(s.Len()-1), st, "copy into the last slot")
	}
	wantErrno(t, "INIT_ASYNC_RECV with a slot beyond the array",
		d.InitAsyncRecv(local, send, 0, Slot(s.Len())), unix.EINVAL)
}

func TestStatusArrayMapping(t *testing.T) {
	d := open(t)
	s := mapStatus(t, d)
	if s.Len() != unix.Getpagesize() {
		t.Errorf("a 1-slot request mapped %d slots, want one page (%d)", s.Len(), unix.Getpagesize())
	}
	_, err := d.MapStatus(1)
	wantErrno(t, "second status array mapping", err, unix.EBUSY)

	d2 := open(t)
	// More than 2^32 slots.
	_, err = unix.Mmap(d2.fd, 0, 1<<32+4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	wantErrno(t, "status array of 2^32+4096 slots", err, unix.EINVAL)
	// The refused mapping left the descriptor free to map a real one.
	s2, err := d2.MapStatus(3 * 4096)
	if err != nil {
		t.Fatalf("mapping after a refused one: %v", err)
	}
	defer s2.Unmap()
	if s2.Len() != 3*4096 {
		t.Errorf("%d slots, want %d", s2.Len(), 3*4096)
	}
}

// TestCopyLengthRule checks length = min(remote bytes after the offset,
// local bytes, bound) with exact byte counts, offsets past the end
// included.
func TestCopyLengthRule(t *testing.T) {
	d := open(t)
	const n = 3*4096 + 100
	src := payload(5, n)
	c := region(t, d, split(src, 1000, 5000), ProtRead, 0)
	// want is what the rule gives, worked out by hand: min(region bytes
	// left past the offset, local bytes, bound), none past the end.
	cases := []struct {
		off, bound uint64
		local      int
		want       uint64
	}{
		{0, All, n, 12388},
		{0, All, n + 500, 12388}, // local larger: region bytes
		{0, All, 777, 777},       // local smaller: local bytes
		{4097, All, n, 8291},     // offset: what is left
		{4097, 100, n, 100},      // bounded
		{0, 0, n, 0},             // bound 0 copies nothing
		{n - 1, All, 10, 1},      // last byte
		{n, All, 100, 0},         // offset at the end: nothing, success
		{n + 4096, All, 100, 0},  // past the end
		{1<<64 - 1, All, 100, 0}, // offset + length would overflow
		{1<<64 - 1, 1 << 62, 100, 0},
	}
	for _, tc := range cases {
		dst := newGuarded(tc.local)
		st, err := d.InlineCopy(Read, [][]byte{dst.body}, c, tc.off, tc.bound, 0, 0)
		if err != nil || st != StatusSuccess {
			t.Errorf("offset %d bound %d local %d: %v, %v", tc.off, tc.bound, tc.local, st, err)
			continue
		}
		want := tc.want
		var exp []byte
		if want > 0 {
			exp = src[tc.off : tc.off+want]
		}
		dst.check(t, "inline read", exp)
	}

	// COPY: both offsets, both ends.
	dstBuf := newGuarded(2 * 4096)
	dc := region(t, d, [][]byte{dstBuf.body}, ProtWrite, 0)
	for _, tc := range []struct{ soff, doff, bound, want uint64 }{
		{0, 0, All, 2 * 4096},
		{n - 50, 0, All, 50},
		{0, 2*4096 - 10, All, 10},
		{n, 0, All, 0},
		{0, 2 * 4096, All, 0},
		{5, 3, 1000, 1000},
	} {
		for i := range dstBuf.all {
			dstBuf.all[i] = fill
		}
		st, err := d.Copy(c, tc.soff, dc, tc.doff, tc.bound, 0, 0)
		if err != nil || st != StatusSuccess {
			t.Errorf("COPY %+v: %v, %v", tc, st, err)
			continue
		}
		got := guarded{all: dstBuf.all, body: dstBuf.body[tc.doff:]}
		got.check(t, "COPY", src[tc.soff:tc.soff+tc.want])
	}
}
