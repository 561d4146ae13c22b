// SPDX-License-Identifier: GPL-2.0
/*
 * Compile-time check of knem_io.h against the KNEM 0xd ABI table
 * (shared/docs/knem-abi.md): ioctl numbers, sizes and field offsets on
 * x86-64.  Nothing needs to run: a mismatch is a build failure naming the
 * field, so the check also guards the Go bindings that read this header.
 */
#include <stddef.h>
#include "knem_io.h"

#define ABI_SIZE(type, n) \
	_Static_assert(sizeof(type) == (n), "sizeof " #type " != " #n)
#define ABI_AT(type, field, off) \
	_Static_assert(offsetof(type, field) == (off), \
		       #type "." #field " not at " #off)
#define ABI_IOCTL(cmd, val) \
	_Static_assert((unsigned int)(cmd) == (val), #cmd " != " #val)

ABI_IOCTL(KNEM_CMD_GET_INFO, 0x40104B10u);
ABI_IOCTL(KNEM_CMD_BIND_OFFLOAD, 0x80104B11u);
ABI_IOCTL(KNEM_CMD_INIT_SEND, 0xC0184B20u);
ABI_IOCTL(KNEM_CMD_CREATE_REGION, 0xC0204B21u);
ABI_IOCTL(KNEM_CMD_DESTROY_REGION, 0x80084B22u);
ABI_IOCTL(KNEM_CMD_INIT_ASYNC_RECV, 0x80204B30u);
ABI_IOCTL(KNEM_CMD_SYNC_RECV, 0x80204B31u);
ABI_IOCTL(KNEM_CMD_COPY, 0x80304B32u);
ABI_IOCTL(KNEM_CMD_INLINE_COPY, 0x80304B33u);
ABI_IOCTL(KNEM_CMD_COPY_BOUNDED, 0x80384B34u);
ABI_IOCTL(KNEM_CMD_INLINE_COPY_BOUNDED, 0x80384B35u);
/* knemesis extension, behind KNEM_FEATURE_ATTACH */
ABI_IOCTL(KNEM_CMD_ATTACH_REGION, 0xC0304B40u);
ABI_IOCTL(KNEM_CMD_DETACH_REGION, 0x40084B41u);

_Static_assert(KNEM_ABI_VERSION == 0xd, "ABI version");
_Static_assert(sizeof(knem_cookie_t) == 8, "cookie is u64");
_Static_assert(sizeof(knem_status_t) == 1, "status is u8");
_Static_assert(KNEM_STATUS_PENDING == 0 && KNEM_STATUS_SUCCESS == 1 &&
	       KNEM_STATUS_FAILED == 2, "status values");
_Static_assert(KNEM_FEATURE_DMA == 1, "feature DMA");
_Static_assert(KNEM_FEATURE_ATTACH == 2, "feature ATTACH");
_Static_assert(KNEM_FEATURE_INVALIDATE == 4, "feature INVALIDATE");
_Static_assert(KNEM_FLAG_INVALIDATE_STATUS == 256, "flag INVALIDATE_STATUS");
_Static_assert(KNEM_FLAG_DMA == 1 && KNEM_FLAG_ASYNCDMACOMPLETE == 2 &&
	       KNEM_FLAG_DMATHREAD == 4 && KNEM_FLAG_MEMCPYTHREAD == 8 &&
	       KNEM_FLAG_PINLOCAL == 16 && KNEM_FLAG_SINGLEUSE == 32 &&
	       KNEM_FLAG_NOTIFY_FD == 64 && KNEM_FLAG_ANY_USER_ACCESS == 128,
	       "copy/create flags");
_Static_assert(KNEM_BIND_FLAG_CUSTOM == 1 && KNEM_BIND_FLAG_CURRENT == 2 &&
	       KNEM_BIND_FLAG_CURRENT_REVERSED == 4, "bind flags");

ABI_SIZE(struct knem_cmd_info, 16);
ABI_AT(struct knem_cmd_info, abi, 0);
ABI_AT(struct knem_cmd_info, features, 4);
ABI_AT(struct knem_cmd_info, ignored_flags, 8);
ABI_AT(struct knem_cmd_info, forced_flags, 12);

ABI_SIZE(struct knem_cmd_bind_offload, 16);
ABI_AT(struct knem_cmd_bind_offload, flags, 0);
ABI_AT(struct knem_cmd_bind_offload, mask_len, 4);
ABI_AT(struct knem_cmd_bind_offload, mask_ptr, 8);

ABI_SIZE(struct knem_cmd_param_iovec, 16);
ABI_AT(struct knem_cmd_param_iovec, base, 0);
ABI_AT(struct knem_cmd_param_iovec, len, 8);

ABI_SIZE(struct knem_cmd_create_region, 32);
ABI_AT(struct knem_cmd_create_region, iovec_array, 0);
ABI_AT(struct knem_cmd_create_region, iovec_nr, 8);
ABI_AT(struct knem_cmd_create_region, flags, 12);
ABI_AT(struct knem_cmd_create_region, protection, 16);
ABI_AT(struct knem_cmd_create_region, invalidate_status, 20);
ABI_AT(struct knem_cmd_create_region, cookie, 24);

ABI_SIZE(struct knem_cmd_copy_bounded, 56);
ABI_AT(struct knem_cmd_copy_bounded, src_cookie, 0);
ABI_AT(struct knem_cmd_copy_bounded, src_offset, 8);
ABI_AT(struct knem_cmd_copy_bounded, dst_cookie, 16);
ABI_AT(struct knem_cmd_copy_bounded, dst_offset, 24);
ABI_AT(struct knem_cmd_copy_bounded, length, 32);
ABI_AT(struct knem_cmd_copy_bounded, flags, 40);
ABI_AT(struct knem_cmd_copy_bounded, current_status, 44);
ABI_AT(struct knem_cmd_copy_bounded, async_status_index, 48);
ABI_AT(struct knem_cmd_copy_bounded, pad, 52);

ABI_SIZE(struct knem_cmd_copy, 48);
ABI_AT(struct knem_cmd_copy, src_cookie, 0);
ABI_AT(struct knem_cmd_copy, src_offset, 8);
ABI_AT(struct knem_cmd_copy, dst_cookie, 16);
ABI_AT(struct knem_cmd_copy, dst_offset, 24);
ABI_AT(struct knem_cmd_copy, flags, 32);
ABI_AT(struct knem_cmd_copy, current_status, 36);
ABI_AT(struct knem_cmd_copy, async_status_index, 40);
ABI_AT(struct knem_cmd_copy, pad, 44);

ABI_SIZE(struct knem_cmd_inline_copy_bounded, 56);
ABI_AT(struct knem_cmd_inline_copy_bounded, local_iovec_array, 0);
ABI_AT(struct knem_cmd_inline_copy_bounded, local_iovec_nr, 8);
ABI_AT(struct knem_cmd_inline_copy_bounded, write, 12);
ABI_AT(struct knem_cmd_inline_copy_bounded, remote_cookie, 16);
ABI_AT(struct knem_cmd_inline_copy_bounded, remote_offset, 24);
ABI_AT(struct knem_cmd_inline_copy_bounded, length, 32);
ABI_AT(struct knem_cmd_inline_copy_bounded, flags, 40);
ABI_AT(struct knem_cmd_inline_copy_bounded, current_status, 44);
ABI_AT(struct knem_cmd_inline_copy_bounded, async_status_index, 48);
ABI_AT(struct knem_cmd_inline_copy_bounded, pad, 52);

ABI_SIZE(struct knem_cmd_inline_copy, 48);
ABI_AT(struct knem_cmd_inline_copy, local_iovec_array, 0);
ABI_AT(struct knem_cmd_inline_copy, local_iovec_nr, 8);
ABI_AT(struct knem_cmd_inline_copy, write, 12);
ABI_AT(struct knem_cmd_inline_copy, remote_cookie, 16);
ABI_AT(struct knem_cmd_inline_copy, remote_offset, 24);
ABI_AT(struct knem_cmd_inline_copy, flags, 32);
ABI_AT(struct knem_cmd_inline_copy, current_status, 36);
ABI_AT(struct knem_cmd_inline_copy, async_status_index, 40);
ABI_AT(struct knem_cmd_inline_copy, pad, 44);

ABI_SIZE(struct knem_cmd_init_send_param, 24);
ABI_AT(struct knem_cmd_init_send_param, send_iovec_array, 0);
ABI_AT(struct knem_cmd_init_send_param, send_iovec_nr, 8);
ABI_AT(struct knem_cmd_init_send_param, flags, 12);
ABI_AT(struct knem_cmd_init_send_param, send_cookie, 16);

ABI_SIZE(struct knem_cmd_init_async_recv_param, 32);
ABI_AT(struct knem_cmd_init_async_recv_param, recv_iovec_array, 0);
ABI_AT(struct knem_cmd_init_async_recv_param, recv_iovec_nr, 8);
ABI_AT(struct knem_cmd_init_async_recv_param, status_index, 12);
ABI_AT(struct knem_cmd_init_async_recv_param, send_cookie, 16);
ABI_AT(struct knem_cmd_init_async_recv_param, flags, 24);
ABI_AT(struct knem_cmd_init_async_recv_param, pad, 28);

ABI_SIZE(struct knem_cmd_sync_recv_param, 32);
ABI_AT(struct knem_cmd_sync_recv_param, recv_iovec_array, 0);
ABI_AT(struct knem_cmd_sync_recv_param, recv_iovec_nr, 8);
ABI_AT(struct knem_cmd_sync_recv_param, status, 12);
ABI_AT(struct knem_cmd_sync_recv_param, send_cookie, 16);
ABI_AT(struct knem_cmd_sync_recv_param, flags, 24);
ABI_AT(struct knem_cmd_sync_recv_param, pad, 28);

ABI_SIZE(struct knem_cmd_attach_region, 48);
ABI_AT(struct knem_cmd_attach_region, cookie, 0);
ABI_AT(struct knem_cmd_attach_region, protection, 8);
ABI_AT(struct knem_cmd_attach_region, flags, 12);
ABI_AT(struct knem_cmd_attach_region, offset, 16);
ABI_AT(struct knem_cmd_attach_region, map_length, 24);
ABI_AT(struct knem_cmd_attach_region, data_offset, 32);
ABI_AT(struct knem_cmd_attach_region, data_length, 40);

int main(void)
{
	return 0;
}
