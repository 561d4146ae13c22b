package knem

import (
	"runtime"
	"strconv"
	"unsafe"

	"github.com/knemesis/knemesis/kmod/knem/internal/uapi"
)

// Status is the outcome of a copy.
type Status uint8

const (
	StatusPending Status = uapi.StatusPending // still running; watch its slot
	StatusSuccess Status = uapi.StatusSuccess
	StatusFailed  Status = uapi.StatusFailed // the copy itself failed
)

func (s Status) String() string {
	switch s {
	case StatusPending:
		return "pending"
	case StatusSuccess:
		return "success"
	case StatusFailed:
		return "failed"
	}
	return "status(" + strconv.Itoa(int(s)) + ")"
}

// Direction of an inline copy, seen from the caller's local buffers.
type Direction uint32

const (
	Read  Direction = 0 // from the remote region into local buffers
	Write Direction = 1 // from local buffers into the remote region
)

// All as a length copies everything: the driver copies min(region bytes
// after the offset, local bytes) with the unbounded command.
const All = ^uint64(0)

// InlineCopy copies between local buffers and the region named by remote,
// starting offset bytes into the region and copying at most length bytes
// (All for no bound). An offset past the end of the region copies nothing
// and succeeds.
//
// With flags asking for offload (FlagMemcpyThread, FlagDMA with
// FlagAsyncDMAComplete, ...) the driver may return StatusPending and write
// the outcome into slot of the status array later; local must then stay
// untouched until the slot leaves StatusPending. slot is ignored for
// synchronous copies.
func (d *Device) InlineCopy(dir Direction, local [][]byte, remote Cookie, offset, length uint64, flags Flags, slot Slot) (Status, error) {
	escape(local)
	var stack [stackIovecs]uapi.ParamIovec
	iov, err := iovecs(&stack, local)
	if err != nil {
		return StatusFailed, &Error{Op: "INLINE_COPY", Err: err}
	}
	var st uint32
	if length == All {
		c := uapi.InlineCopy{
			LocalIovecArray: iovecPtr(iov), LocalIovecNr: uint32(len(iov)),
			Write: uint32(dir), RemoteCookie: uint64(remote), RemoteOffset: offset,
			Flags: uint32(flags), AsyncStatusIndex: uint32(slot),
		}
		err = d.ioctl("INLINE_COPY", uapi.CmdInlineCopy, unsafe.Pointer(&c))
		st = c.CurrentStatus
	} else {
		c := uapi.InlineCopyBounded{
			LocalIovecArray: iovecPtr(iov), LocalIovecNr: uint32(len(iov)),
			Write: uint32(dir), RemoteCookie: uint64(remote), RemoteOffset: offset,
			Length: length, Flags: uint32(flags), AsyncStatusIndex: uint32(slot),
		}
		err = d.ioctl("INLINE_COPY_BOUNDED", uapi.CmdInlineCopyBounded, unsafe.Pointer(&c))
		st = c.CurrentStatus
	}
	keepAlive(local, iov)
	if err != nil {
		return StatusFailed, err
	}
	return Status(st), nil
}

// Copy copies from region src, srcOffset bytes in, to region dst,
// dstOffset bytes in: at most length bytes (All for no bound), no more than
// either region holds after its offset. Offload and slot work as for
// InlineCopy.
func (d *Device) Copy(src Cookie, srcOffset uint64, dst Cookie, dstOffset uint64, length uint64, flags Flags, slot Slot) (Status, error) {
	var st uint32
	var err error
	if length == All {
		c := uapi.Copy{
			SrcCookie: uint64(src), SrcOffset: srcOffset,
			DstCookie: uint64(dst), DstOffset: dstOffset,
			Flags: uint32(flags), AsyncStatusIndex: uint32(slot),
		}
		err = d.ioctl("COPY", uapi.CmdCopy, unsafe.Pointer(&c))
		st = c.CurrentStatus
	} else {
		c := uapi.CopyBounded{
			SrcCookie: uint64(src), SrcOffset: srcOffset,
			DstCookie: uint64(dst), DstOffset: dstOffset, Length: length,
			Flags: uint32(flags), AsyncStatusIndex: uint32(slot),
		}
		err = d.ioctl("COPY_BOUNDED", uapi.CmdCopyBounded, unsafe.Pointer(&c))
		st = c.CurrentStatus
	}
	if err != nil {
		return StatusFailed, err
	}
	return Status(st), nil
}

// InitSend is the old API's send: a read-only, single-use region of bufs.
// Only old clients need it; CreateRegion does the same and more.
func (d *Device) InitSend(bufs [][]byte, flags Flags) (Cookie, error) {
	escape(bufs)
	var stack [stackIovecs]uapi.ParamIovec
	iov, err := iovecs(&stack, bufs)
	if err != nil {
		return 0, &Error{Op: "INIT_SEND", Err: err}
	}
	c := uapi.InitSendParam{SendIovecArray: iovecPtr(iov), SendIovecNr: uint32(len(iov)), Flags: uint32(flags)}
	err = d.ioctl("INIT_SEND", uapi.CmdInitSend, unsafe.Pointer(&c))
	keepAlive(bufs, iov)
	if err != nil {
		return 0, err
	}
	return Cookie(c.SendCookie), nil
}

// SyncRecv is the old API's receive: it copies the whole send named by
// cookie into bufs and returns when done.
func (d *Device) SyncRecv(bufs [][]byte, send Cookie, flags Flags) (Status, error) {
	escape(bufs)
	var stack [stackIovecs]uapi.ParamIovec
	iov, err := iovecs(&stack, bufs)
	if err != nil {
		return StatusFailed, &Error{Op: "SYNC_RECV", Err: err}
	}
	c := uapi.SyncRecvParam{RecvIovecArray: iovecPtr(iov), RecvIovecNr: uint32(len(iov)),
		SendCookie: uint64(send), Flags: uint32(flags)}
	err = d.ioctl("SYNC_RECV", uapi.CmdSyncRecv, unsafe.Pointer(&c))
	keepAlive(bufs, iov)
	if err != nil {
		return StatusFailed, err
	}
	return Status(c.Status), nil
}

// InitAsyncRecv is the old API's asynchronous receive: the outcome of
// copying the send named by cookie into bufs lands in slot.
func (d *Device) InitAsyncRecv(bufs [][]byte, send Cookie, flags Flags, slot Slot) error {
	escape(bufs)
	var stack [stackIovecs]uapi.ParamIovec
	iov, err := iovecs(&stack, bufs)
	if err != nil {
		return &Error{Op: "INIT_ASYNC_RECV", Err: err}
	}
	c := uapi.InitAsyncRecvParam{RecvIovecArray: iovecPtr(iov), RecvIovecNr: uint32(len(iov)),
		StatusIndex: uint32(slot), SendCookie: uint64(send), Flags: uint32(flags)}
	err = d.ioctl("INIT_ASYNC_RECV", uapi.CmdInitAsyncRecv, unsafe.Pointer(&c))
	keepAlive(bufs, iov)
	return err
}

// keepAlive keeps the buffers and the iovec array that the kernel reads
// through integer addresses alive until the ioctl returned.
func keepAlive(bufs [][]byte, iov []uapi.ParamIovec) {
	runtime.KeepAlive(bufs)
	runtime.KeepAlive(iov)
}
