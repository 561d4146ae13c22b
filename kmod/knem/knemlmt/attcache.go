package knemlmt

import (
	"errors"

	"github.com/knemesis/knemesis/kmod/knem"
)

// attachCacheLen bounds the receiver's cache of attachments.
const attachCacheLen = 32

// attachCache is the receiver's half of the registration cache: regions
// that the sender keeps across messages (regionCache) are mapped into
// this process once (knem.Device.Attach) and later messages from them are
// copied with memcpy from the mapping: one user-space copy, no system
// call, no page walk (XPMEM-style).
//
// Entries are keyed by cookie: cookies are random, never 0 and never
// reused while a region lives, and the sender sends a cookie again only
// while its region still shows the sender's buffer (regionCache), so an
// attachment found by cookie always maps the right pages. A cookie is
// attached at its second sighting: the first message of a buffer is copied
// by the driver (INLINE_COPY), which costs what an attach costs, and a
// buffer sent once is never mapped. An attachment of a region the sender
// has since destroyed keeps its pages until it is evicted, least recently
// used first, or the Engine closes.
type attachCache struct {
	dev     *knem.Device
	ents    [attachCacheLen]cachedAttachment
	clock   uint64
	attachs int // attachments made, for the tests
}

type cachedAttachment struct {
	cookie knem.Cookie // 0: empty
	att    *knem.Attachment
	// The driver refused to attach the cookie (a list whose buffers do
	// not join page to page, or a region destroyed meanwhile): its
	// messages are copied by the driver without asking again.
	refused bool
	used    uint64
}

// get returns the attachment of cookie c, attaching it at its second
// sighting; nil: copy with the driver. syscalls counts what it cost.
func (a *attachCache) get(c knem.Cookie) (att *knem.Attachment, syscalls int) {
	a.clock++
	victim := &a.ents[0]
	for i := range a.ents {
		e := &a.ents[i]
		if e.cookie == c {
			e.used = a.clock
			if e.att == nil && !e.refused {
				e.att, syscalls = a.attach(c)
				e.refused = e.att == nil
			}
			return e.att, syscalls
		}
		if e.used < victim.used {
			victim = e
		}
	}
	syscalls = a.evict(victim)
	victim.cookie, victim.used = c, a.clock
	return nil, syscalls
}

// attach maps c (ATTACH_REGION and mmap); nil when the driver refuses, as
// for a region destroyed meanwhile: the driver's copy then reports it.
func (a *attachCache) attach(c knem.Cookie) (*knem.Attachment, int) {
	att, err := a.dev.Attach(c, knem.ProtRead)
	if err != nil {
		return nil, 1
	}
	a.attachs++
	return att, 2
}

func (a *attachCache) evict(e *cachedAttachment) (syscalls int) {
	if e.att != nil {
		_ = e.att.Close()
		syscalls = 2
	}
	*e = cachedAttachment{}
	return syscalls
}

// close unmaps every attachment.
func (a *attachCache) close() error {
	var errs []error
	for i := range a.ents {
		if e := &a.ents[i]; e.att != nil {
			errs = append(errs, e.att.Close())
		}
		a.ents[i] = cachedAttachment{}
	}
	return errors.Join(errs...)
}

// mapped is how many attachments the cache holds.
func (a *attachCache) mapped() int {
	n := 0
	for i := range a.ents {
		if a.ents[i].att != nil {
			n++
		}
	}
	return n
}
