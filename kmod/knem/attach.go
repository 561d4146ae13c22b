package knem

import (
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/knemesis/knemesis/kmod/knem/internal/uapi"
)

// FeatureAttach says that Attach works: the driver maps regions into the
// caller's address space (a knemesis extension to KNEM ABI 0xd).
const FeatureAttach Features = uapi.FeatureAttach

// Attachment is a region mapped into this process: Bytes is the region's
// memory itself, read (and, when attached with ProtWrite, written) with
// plain loads and stores, without a system call per message.
//
// The mapping keeps the region's pages until Close, even after the region
// is destroyed or its creator exits: it never points to freed memory. It
// then shows the pages as the creator left them.
type Attachment struct {
	d      *Device
	mem    []byte // the whole page-aligned mapping
	data   []byte // the region's bytes within mem
	offset uint64 // the attachment's mmap offset, for DETACH_REGION
}

// Attach maps the region c with protection prot (ProtRead, optionally with
// ProtWrite). The driver checks c as it checks a copy: EINVAL for an
// unknown or single-use cookie (or a region whose buffers do not join page
// to page), EPERM for another user's region without FlagAnyUserAccess,
// EACCES when the region does not allow prot.
func (d *Device) Attach(c Cookie, prot Protection) (*Attachment, error) {
	ar := uapi.AttachRegion{Cookie: uapi.Cookie(c), Protection: uint32(prot)}
	if err := d.ioctl("ATTACH_REGION", uapi.CmdAttachRegion, unsafe.Pointer(&ar)); err != nil {
		return nil, err
	}
	mem, err := unix.Mmap(d.fd, int64(ar.Offset), int(ar.MapLength), int(prot), unix.MAP_SHARED)
	if err != nil {
		d.detach(ar.Offset)
		return nil, &Error{Op: "mmap attachment", Err: err}
	}
	data := mem[ar.DataOffset : ar.DataOffset+ar.DataLength]
	return &Attachment{d: d, mem: mem, data: data, offset: ar.Offset}, nil
}

func (d *Device) detach(offset uint64) error {
	return d.ioctl("DETACH_REGION", uapi.CmdDetachRegion, unsafe.Pointer(&offset))
}

// Bytes is the region's memory. It is valid until Close.
func (a *Attachment) Bytes() []byte { return a.data }

// Close unmaps the region and forgets the attachment; the region's pages
// are unpinned once no mapping and no copy holds them.
func (a *Attachment) Close() error {
	if a.mem == nil {
		return &Error{Op: "close attachment", Err: unix.EBADF}
	}
	err := unix.Munmap(a.mem)
	a.mem, a.data = nil, nil
	if err != nil {
		return &Error{Op: "munmap attachment", Err: err}
	}
	return a.d.detach(a.offset)
}
