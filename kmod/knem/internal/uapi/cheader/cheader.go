//go:build cgo

// Package cheader reads the ABI facts out of kmod/knem/uapi/knem_io.h with
// the C compiler, so that its test can hold package uapi to the header.
// Nothing but that test imports it: the bindings stay free of cgo.
package cheader

/*
#cgo CFLAGS: -I${SRCDIR}/../../../uapi
#include <stddef.h>
#include "knem_io.h"

struct field {
	const char *type, *name;
	size_t offset, size;
};

#define F(t, f) { #t, #f, offsetof(struct t, f), sizeof(((struct t *)0)->f) }

static const struct field fields[] = {
	F(knem_cmd_info, abi), F(knem_cmd_info, features),
	F(knem_cmd_info, ignored_flags), F(knem_cmd_info, forced_flags),

	F(knem_cmd_bind_offload, flags), F(knem_cmd_bind_offload, mask_len),
	F(knem_cmd_bind_offload, mask_ptr),

	F(knem_cmd_param_iovec, base), F(knem_cmd_param_iovec, len),

	F(knem_cmd_create_region, iovec_array), F(knem_cmd_create_region, iovec_nr),
	F(knem_cmd_create_region, flags), F(knem_cmd_create_region, protection),
	F(knem_cmd_create_region, invalidate_status), F(knem_cmd_create_region, cookie),

	F(knem_cmd_copy_bounded, src_cookie), F(knem_cmd_copy_bounded, src_offset),
	F(knem_cmd_copy_bounded, dst_cookie), F(knem_cmd_copy_bounded, dst_offset),
	F(knem_cmd_copy_bounded, length), F(knem_cmd_copy_bounded, flags),
	F(knem_cmd_copy_bounded, current_status),
	F(knem_cmd_copy_bounded, async_status_index), F(knem_cmd_copy_bounded, pad),

	F(knem_cmd_copy, src_cookie), F(knem_cmd_copy, src_offset),
	F(knem_cmd_copy, dst_cookie), F(knem_cmd_copy, dst_offset),
	F(knem_cmd_copy, flags), F(knem_cmd_copy, current_status),
	F(knem_cmd_copy, async_status_index), F(knem_cmd_copy, pad),

	F(knem_cmd_inline_copy_bounded, local_iovec_array),
	F(knem_cmd_inline_copy_bounded, local_iovec_nr),
	F(knem_cmd_inline_copy_bounded, write),
	F(knem_cmd_inline_copy_bounded, remote_cookie),
	F(knem_cmd_inline_copy_bounded, remote_offset),
	F(knem_cmd_inline_copy_bounded, length),
	F(knem_cmd_inline_copy_bounded, flags),
	F(knem_cmd_inline_copy_bounded, current_status),
	F(knem_cmd_inline_copy_bounded, async_status_index),
	F(knem_cmd_inline_copy_bounded, pad),

	F(knem_cmd_inline_copy, local_iovec_array),
	F(knem_cmd_inline_copy, local_iovec_nr), F(knem_cmd_inline_copy, write),
	F(knem_cmd_inline_copy, remote_cookie), F(knem_cmd_inline_copy, remote_offset),
	F(knem_cmd_inline_copy, flags), F(knem_cmd_inline_copy, current_status),
	F(knem_cmd_inline_copy, async_status_index), F(knem_cmd_inline_copy, pad),

	F(knem_cmd_attach_region, cookie), F(knem_cmd_attach_region, protection),
	F(knem_cmd_attach_region, flags), F(knem_cmd_attach_region, offset),
	F(knem_cmd_attach_region, map_length),
	F(knem_cmd_attach_region, data_offset),
	F(knem_cmd_attach_region, data_length),

	F(knem_cmd_init_send_param, send_iovec_array),
	F(knem_cmd_init_send_param, send_iovec_nr),
	F(knem_cmd_init_send_param, flags), F(knem_cmd_init_send_param, send_cookie),

	F(knem_cmd_init_async_recv_param, recv_iovec_array),
	F(knem_cmd_init_async_recv_param, recv_iovec_nr),
	F(knem_cmd_init_async_recv_param, status_index),
	F(knem_cmd_init_async_recv_param, send_cookie),
	F(knem_cmd_init_async_recv_param, flags),
	F(knem_cmd_init_async_recv_param, pad),

	F(knem_cmd_sync_recv_param, recv_iovec_array),
	F(knem_cmd_sync_recv_param, recv_iovec_nr),
	F(knem_cmd_sync_recv_param, status),
	F(knem_cmd_sync_recv_param, send_cookie),
	F(knem_cmd_sync_recv_param, flags), F(knem_cmd_sync_recv_param, pad),
};

#define S(t) { #t, sizeof(struct t) }

static const struct size {
	const char *type;
	size_t size;
} sizes[] = {
	S(knem_cmd_info), S(knem_cmd_bind_offload), S(knem_cmd_param_iovec),
	S(knem_cmd_create_region), S(knem_cmd_copy_bounded), S(knem_cmd_copy),
	S(knem_cmd_inline_copy_bounded), S(knem_cmd_inline_copy),
	S(knem_cmd_init_send_param), S(knem_cmd_init_async_recv_param),
	S(knem_cmd_sync_recv_param), S(knem_cmd_attach_region),
	{ "knem_cookie_t", sizeof(knem_cookie_t) },
	{ "knem_status_t", sizeof(knem_status_t) },
	{ "knem_notify_index_t", sizeof(knem_notify_index_t) },
};

static const unsigned long ioctls[] = {
	KNEM_CMD_GET_INFO, KNEM_CMD_BIND_OFFLOAD, KNEM_CMD_INIT_SEND,
	KNEM_CMD_CREATE_REGION, KNEM_CMD_DESTROY_REGION,
	KNEM_CMD_INIT_ASYNC_RECV, KNEM_CMD_SYNC_RECV, KNEM_CMD_COPY,
	KNEM_CMD_INLINE_COPY, KNEM_CMD_COPY_BOUNDED,
	KNEM_CMD_INLINE_COPY_BOUNDED, KNEM_CMD_ATTACH_REGION,
	KNEM_CMD_DETACH_REGION,
};

// Go cannot take the address of static C data; these can.
static const struct field *field_at(int i) { return &fields[i]; }
static int field_count(void) { return sizeof(fields) / sizeof(fields[0]); }
static const struct size *size_at(int i) { return &sizes[i]; }
static int size_count(void) { return sizeof(sizes) / sizeof(sizes[0]); }
static unsigned long ioctl_at(int i) { return ioctls[i]; }
static int ioctl_count(void) { return sizeof(ioctls) / sizeof(ioctls[0]); }
*/
import "C"

// Field is one member of an ABI struct as the C compiler lays it out.
type Field struct {
	Type, Name   string // C struct (without "struct ") and member names
	Offset, Size uintptr
}

// Fields lists every member of every ABI struct.
func Fields() []Field {
	out := make([]Field, C.field_count())
	for i := range out {
		f := C.field_at(C.int(i))
		out[i] = Field{C.GoString(f._type), C.GoString(f.name), uintptr(f.offset), uintptr(f.size)}
	}
	return out
}

// Sizes maps each ABI type name to its C size.
func Sizes() map[string]uintptr {
	out := make(map[string]uintptr)
	for i := range int(C.size_count()) {
		s := C.size_at(C.int(i))
		out[C.GoString(s._type)] = uintptr(s.size)
	}
	return out
}

// Ioctls are the header's command numbers, in the order of uapi's Cmd
// constants: GET_INFO, BIND_OFFLOAD, INIT_SEND, CREATE_REGION,
// DESTROY_REGION, INIT_ASYNC_RECV, SYNC_RECV, COPY, INLINE_COPY,
// COPY_BOUNDED, INLINE_COPY_BOUNDED, ATTACH_REGION, DETACH_REGION.
func Ioctls() []uintptr {
	out := make([]uintptr, C.ioctl_count())
	for i := range out {
		out[i] = uintptr(C.ioctl_at(C.int(i)))
	}
	return out
}

// Constants maps the header's macro names to their values.
var Constants = map[string]uint64{
	"KNEM_ABI_VERSION":                C.KNEM_ABI_VERSION,
	"KNEM_STATUS_PENDING":             C.KNEM_STATUS_PENDING,
	"KNEM_STATUS_SUCCESS":             C.KNEM_STATUS_SUCCESS,
	"KNEM_STATUS_FAILED":              C.KNEM_STATUS_FAILED,
	"KNEM_FEATURE_DMA":                C.KNEM_FEATURE_DMA,
	"KNEM_FEATURE_ATTACH":             C.KNEM_FEATURE_ATTACH,
	"KNEM_FEATURE_INVALIDATE":         C.KNEM_FEATURE_INVALIDATE,
	"KNEM_FLAG_INVALIDATE_STATUS":     C.KNEM_FLAG_INVALIDATE_STATUS,
	"KNEM_FLAG_DMA":                   C.KNEM_FLAG_DMA,
	"KNEM_FLAG_ASYNCDMACOMPLETE":      C.KNEM_FLAG_ASYNCDMACOMPLETE,
	"KNEM_FLAG_DMATHREAD":             C.KNEM_FLAG_DMATHREAD,
	"KNEM_FLAG_MEMCPYTHREAD":          C.KNEM_FLAG_MEMCPYTHREAD,
	"KNEM_FLAG_PINLOCAL":              C.KNEM_FLAG_PINLOCAL,
	"KNEM_FLAG_SINGLEUSE":             C.KNEM_FLAG_SINGLEUSE,
	"KNEM_FLAG_NOTIFY_FD":             C.KNEM_FLAG_NOTIFY_FD,
	"KNEM_FLAG_ANY_USER_ACCESS":       C.KNEM_FLAG_ANY_USER_ACCESS,
	"KNEM_BIND_FLAG_CUSTOM":           C.KNEM_BIND_FLAG_CUSTOM,
	"KNEM_BIND_FLAG_CURRENT":          C.KNEM_BIND_FLAG_CURRENT,
	"KNEM_BIND_FLAG_CURRENT_REVERSED": C.KNEM_BIND_FLAG_CURRENT_REVERSED,
}
