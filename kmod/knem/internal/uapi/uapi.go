// Package uapi mirrors kmod/knem/uapi/knem_io.h, the KNEM 0xd ABI, in Go.
//
// Each struct here has the name of its C counterpart without the
// "knem_cmd_" prefix, in CamelCase, and the same fields in the same order.
// The header stays the one source of truth: package uapi/cheader compiles it
// with cgo and its test compares every size, offset, ioctl number and
// constant with this file. Nothing here uses cgo, so the bindings build with
// CGO_ENABLED=0 (the QEMU guests run static binaries).
package uapi

import "unsafe"

// Version is the ABI version GET_INFO reports; clients refuse any other.
const Version = 0xd

// Status values of a copy, in current_status and in the status array.
const (
	StatusPending = 0
	StatusSuccess = 1
	StatusFailed  = 2
)

// FeatureDMA is set in Info.Features when a DMA_MEMCPY channel is usable.
const FeatureDMA = 1 << 0

// FeatureAttach is set when the driver has CmdAttachRegion (a knemesis
// extension; ABI 0xd is unchanged).
const FeatureAttach = 1 << 1

// FeatureInvalidate is set when CmdCreateRegion takes FlagInvalidateStatus
// (a knemesis extension; ABI 0xd is unchanged).
const FeatureInvalidate = 1 << 2

// Flags of region creation and of copies.
const (
	FlagDMA              = 1 << 0
	FlagAsyncDMAComplete = 1 << 1
	FlagDMAThread        = 1 << 2
	FlagMemcpyThread     = 1 << 3
	FlagPinLocal         = 1 << 4
	FlagSingleUse        = 1 << 5
	FlagNotifyFD         = 1 << 6
	FlagAnyUserAccess    = 1 << 7
	// FlagInvalidateStatus: CREATE_REGION only (FeatureInvalidate).
	FlagInvalidateStatus = 1 << 8
)

// Flags of BIND_OFFLOAD.
const (
	BindFlagCustom          = 1 << 0
	BindFlagCurrent         = 1 << 1
	BindFlagCurrentReversed = 1 << 2
)

// Cookie is knem_cookie_t.
type Cookie = uint64

// Info is struct knem_cmd_info.
type Info struct {
	Abi          uint32
	Features     uint32
	IgnoredFlags uint32
	ForcedFlags  uint32
}

// BindOffload is struct knem_cmd_bind_offload.
type BindOffload struct {
	Flags   uint32
	MaskLen uint32
	MaskPtr unsafe.Pointer
}

// User pointers that the driver follows (the iovec arrays, the CPU mask)
// are pointer-typed fields, as in x/sys/unix's Msghdr: a caller's iovec
// array often lives in its goroutine's stack, and a stack that grows
// between filling the struct and the ioctl moves it. The runtime updates a
// pointer field to the new place; a uint64 would keep the old address, and
// the driver would read freed stack as iovecs and copy to wherever they
// point. Buffer addresses (ParamIovec.Base) stay uint64: the bindings keep
// those buffers in the heap (region.go, escape), which does not move.
//
// ParamIovec is struct knem_cmd_param_iovec.
type ParamIovec struct {
	Base uint64
	Len  uint64
}

// CreateRegion is struct knem_cmd_create_region.
type CreateRegion struct {
	IovecArray       *ParamIovec
	IovecNr          uint32
	Flags            uint32
	Protection       uint32
	InvalidateStatus uint32
	Cookie           Cookie
}

// CopyBounded is struct knem_cmd_copy_bounded.
type CopyBounded struct {
	SrcCookie        Cookie
	SrcOffset        uint64
	DstCookie        Cookie
	DstOffset        uint64
	Length           uint64
	Flags            uint32
	CurrentStatus    uint32
	AsyncStatusIndex uint32
	Pad              uint32
}

// Copy is struct knem_cmd_copy.
type Copy struct {
	SrcCookie        Cookie
	SrcOffset        uint64
	DstCookie        Cookie
	DstOffset        uint64
	Flags            uint32
	CurrentStatus    uint32
	AsyncStatusIndex uint32
	Pad              uint32
}

// InlineCopyBounded is struct knem_cmd_inline_copy_bounded.
type InlineCopyBounded struct {
	LocalIovecArray  *ParamIovec
	LocalIovecNr     uint32
	Write            uint32
	RemoteCookie     Cookie
	RemoteOffset     uint64
	Length           uint64
	Flags            uint32
	CurrentStatus    uint32
	AsyncStatusIndex uint32
	Pad              uint32
}

// InlineCopy is struct knem_cmd_inline_copy.
type InlineCopy struct {
	LocalIovecArray  *ParamIovec
	LocalIovecNr     uint32
	Write            uint32
	RemoteCookie     Cookie
	RemoteOffset     uint64
	Flags            uint32
	CurrentStatus    uint32
	AsyncStatusIndex uint32
	Pad              uint32
}

// InitSendParam is struct knem_cmd_init_send_param (old API).
type InitSendParam struct {
	SendIovecArray *ParamIovec
	SendIovecNr    uint32
	Flags          uint32
	SendCookie     Cookie
}

// InitAsyncRecvParam is struct knem_cmd_init_async_recv_param (old API).
type InitAsyncRecvParam struct {
	RecvIovecArray *ParamIovec
	RecvIovecNr    uint32
	StatusIndex    uint32
	SendCookie     Cookie
	Flags          uint32
	Pad            uint32
}

// SyncRecvParam is struct knem_cmd_sync_recv_param (old API).
type SyncRecvParam struct {
	RecvIovecArray *ParamIovec
	RecvIovecNr    uint32
	Status         uint32
	SendCookie     Cookie
	Flags          uint32
	Pad            uint32
}

// AttachRegion is struct knem_cmd_attach_region (FeatureAttach).
type AttachRegion struct {
	Cookie     Cookie
	Protection uint32
	Flags      uint32
	Offset     uint64
	MapLength  uint64
	DataOffset uint64
	DataLength uint64
}

// The asm-generic ioctl encoding (x86-64 and arm64 share it): direction in
// bits 30-31, argument size in bits 16-29, 'K' in bits 8-15, number below.
const (
	iocWrite = 1 << 30
	iocRead  = 2 << 30
	magic    = 'K' << 8
)

// The ioctl numbers, with the header's direction bits (reversed with
// respect to the data flow, as every KNEM client expects).
const (
	CmdGetInfo           = iocWrite | magic | 0x10 | unsafe.Sizeof(Info{})<<16
	CmdBindOffload       = iocRead | magic | 0x11 | unsafe.Sizeof(BindOffload{})<<16
	CmdInitSend          = iocRead | iocWrite | magic | 0x20 | unsafe.Sizeof(InitSendParam{})<<16
	CmdCreateRegion      = iocRead | iocWrite | magic | 0x21 | unsafe.Sizeof(CreateRegion{})<<16
	CmdDestroyRegion     = iocRead | magic | 0x22 | unsafe.Sizeof(Cookie(0))<<16
	CmdInitAsyncRecv     = iocRead | magic | 0x30 | unsafe.Sizeof(InitAsyncRecvParam{})<<16
	CmdSyncRecv          = iocRead | magic | 0x31 | unsafe.Sizeof(SyncRecvParam{})<<16
	CmdCopy              = iocRead | magic | 0x32 | unsafe.Sizeof(Copy{})<<16
	CmdInlineCopy        = iocRead | magic | 0x33 | unsafe.Sizeof(InlineCopy{})<<16
	CmdCopyBounded       = iocRead | magic | 0x34 | unsafe.Sizeof(CopyBounded{})<<16
	CmdInlineCopyBounded = iocRead | magic | 0x35 | unsafe.Sizeof(InlineCopyBounded{})<<16
	CmdAttachRegion      = iocRead | iocWrite | magic | 0x40 | unsafe.Sizeof(AttachRegion{})<<16
	CmdDetachRegion      = iocWrite | magic | 0x41 | unsafe.Sizeof(uint64(0))<<16
)
