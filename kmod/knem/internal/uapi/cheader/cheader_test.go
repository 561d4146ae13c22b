//go:build cgo

package cheader

import (
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/knemesis/knemesis/kmod/knem/internal/uapi"
)

// goTypes maps each C struct to its Go mirror.
var goTypes = map[string]reflect.Type{
	"knem_cmd_info":                  reflect.TypeFor[uapi.Info](),
	"knem_cmd_bind_offload":          reflect.TypeFor[uapi.BindOffload](),
	"knem_cmd_param_iovec":           reflect.TypeFor[uapi.ParamIovec](),
	"knem_cmd_create_region":         reflect.TypeFor[uapi.CreateRegion](),
	"knem_cmd_copy_bounded":          reflect.TypeFor[uapi.CopyBounded](),
	"knem_cmd_copy":                  reflect.TypeFor[uapi.Copy](),
	"knem_cmd_inline_copy_bounded":   reflect.TypeFor[uapi.InlineCopyBounded](),
	"knem_cmd_inline_copy":           reflect.TypeFor[uapi.InlineCopy](),
	"knem_cmd_init_send_param":       reflect.TypeFor[uapi.InitSendParam](),
	"knem_cmd_init_async_recv_param": reflect.TypeFor[uapi.InitAsyncRecvParam](),
	"knem_cmd_sync_recv_param":       reflect.TypeFor[uapi.SyncRecvParam](),
	"knem_cmd_attach_region":         reflect.TypeFor[uapi.AttachRegion](),
}

// camel turns a C member name into the Go field name: ignored_flags →
// IgnoredFlags.
func camel(s string) string {
	var b strings.Builder
	for _, w := range strings.Split(s, "_") {
		b.WriteString(strings.ToUpper(w[:1]) + w[1:])
	}
	return b.String()
}

func TestStructLayouts(t *testing.T) {
	sizes := Sizes()
	seen := map[string]int{}
	for _, f := range Fields() {
		gt, ok := goTypes[f.Type]
		if !ok {
			t.Errorf("struct %s has no Go mirror", f.Type)
			continue
		}
		seen[f.Type]++
		gf, ok := gt.FieldByName(camel(f.Name))
		if !ok {
			t.Errorf("%s.%s: no field %s in uapi.%s", f.Type, f.Name, camel(f.Name), gt.Name())
			continue
		}
		if gf.Offset != f.Offset || gf.Type.Size() != f.Size {
			t.Errorf("%s.%s: C offset %d size %d, Go uapi.%s.%s offset %d size %d",
				f.Type, f.Name, f.Offset, f.Size, gt.Name(), gf.Name, gf.Offset, gf.Type.Size())
		}
	}
	for ct, gt := range goTypes {
		if sizes[ct] != gt.Size() {
			t.Errorf("sizeof(struct %s) = %d, uapi.%s is %d bytes", ct, sizes[ct], gt.Name(), gt.Size())
		}
		if seen[ct] != gt.NumField() {
			t.Errorf("struct %s: %d members checked, uapi.%s has %d fields", ct, seen[ct], gt.Name(), gt.NumField())
		}
	}
	if got := unsafe.Sizeof(uapi.Cookie(0)); got != sizes["knem_cookie_t"] {
		t.Errorf("cookie: Go %d bytes, C %d", got, sizes["knem_cookie_t"])
	}
	if sizes["knem_status_t"] != 1 || sizes["knem_notify_index_t"] != 4 {
		t.Errorf("status %d bytes, notify index %d bytes; the bindings assume 1 and 4",
			sizes["knem_status_t"], sizes["knem_notify_index_t"])
	}
}

func TestIoctlNumbers(t *testing.T) {
	names := []string{"GET_INFO", "BIND_OFFLOAD", "INIT_SEND", "CREATE_REGION",
		"DESTROY_REGION", "INIT_ASYNC_RECV", "SYNC_RECV", "COPY", "INLINE_COPY",
		"COPY_BOUNDED", "INLINE_COPY_BOUNDED", "ATTACH_REGION", "DETACH_REGION"}
	goCmds := []uintptr{uapi.CmdGetInfo, uapi.CmdBindOffload, uapi.CmdInitSend,
		uapi.CmdCreateRegion, uapi.CmdDestroyRegion, uapi.CmdInitAsyncRecv,
		uapi.CmdSyncRecv, uapi.CmdCopy, uapi.CmdInlineCopy, uapi.CmdCopyBounded,
		uapi.CmdInlineCopyBounded, uapi.CmdAttachRegion, uapi.CmdDetachRegion}
	c := Ioctls()
	if len(c) != len(goCmds) {
		t.Fatalf("header lists %d ioctls, uapi %d", len(c), len(goCmds))
	}
	for i := range c {
		if c[i] != goCmds[i] {
			t.Errorf("KNEM_CMD_%s: header %#x, uapi %#x", names[i], c[i], goCmds[i])
		}
	}
	// The documented x86-64 values, so that a header edit cannot move both
	// (the last two are the knemesis attach extension).
	want := []uintptr{0x40104B10, 0x80104B11, 0xC0184B20, 0xC0204B21, 0x80084B22,
		0x80204B30, 0x80204B31, 0x80304B32, 0x80304B33, 0x80384B34, 0x80384B35,
		0xC0304B40, 0x40084B41}
	for i := range want {
		if goCmds[i] != want[i] {
			t.Errorf("KNEM_CMD_%s = %#x, KNEM ABI 0xd says %#x", names[i], goCmds[i], want[i])
		}
	}
}

func TestConstants(t *testing.T) {
	goConst := map[string]uint64{
		"KNEM_ABI_VERSION":                uapi.Version,
		"KNEM_STATUS_PENDING":             uapi.StatusPending,
		"KNEM_STATUS_SUCCESS":             uapi.StatusSuccess,
		"KNEM_STATUS_FAILED":              uapi.StatusFailed,
		"KNEM_FEATURE_DMA":                uapi.FeatureDMA,
		"KNEM_FEATURE_ATTACH":             uapi.FeatureAttach,
		"KNEM_FEATURE_INVALIDATE":         uapi.FeatureInvalidate,
		"KNEM_FLAG_INVALIDATE_STATUS":     uapi.FlagInvalidateStatus,
		"KNEM_FLAG_DMA":                   uapi.FlagDMA,
		"KNEM_FLAG_ASYNCDMACOMPLETE":      uapi.FlagAsyncDMAComplete,
		"KNEM_FLAG_DMATHREAD":             uapi.FlagDMAThread,
		"KNEM_FLAG_MEMCPYTHREAD":          uapi.FlagMemcpyThread,
		"KNEM_FLAG_PINLOCAL":              uapi.FlagPinLocal,
		"KNEM_FLAG_SINGLEUSE":             uapi.FlagSingleUse,
		"KNEM_FLAG_NOTIFY_FD":             uapi.FlagNotifyFD,
		"KNEM_FLAG_ANY_USER_ACCESS":       uapi.FlagAnyUserAccess,
		"KNEM_BIND_FLAG_CUSTOM":           uapi.BindFlagCustom,
		"KNEM_BIND_FLAG_CURRENT":          uapi.BindFlagCurrent,
		"KNEM_BIND_FLAG_CURRENT_REVERSED": uapi.BindFlagCurrentReversed,
	}
	for name, c := range Constants {
		g, ok := goConst[name]
		if !ok {
			t.Errorf("%s has no uapi constant", name)
		} else if g != c {
			t.Errorf("%s: header %#x, uapi %#x", name, c, g)
		}
	}
	if len(goConst) != len(Constants) {
		t.Errorf("uapi has %d constants, the check reads %d from the header", len(goConst), len(Constants))
	}
}
