package nemesis

import (
	"crypto/subtle"
	"errors"
	"fmt"

	"github.com/knemesis/knemesis/jobkey"
)

// ErrJobKey: a rank's job key is not the one of the segment it found.
var ErrJobKey = errors.New("nemesis: job key differs")

// A job is known by its key (package jobkey), not by the name passed to
// Join: with a key, the segment's name carries key.Name, which nobody
// outside the job can guess, so another user can neither join nor squat
// it. Without one (ranks started by hand, or in one process), the name is
// the job's, which another user could guess: shmfile then still keeps
// them out (exclusive creation, owner and mode checked at every open),
// and the worst they can do is make Join fail with shmfile.ErrNotPrivate.
// The creator then draws a key and keeps it in the segment's header, so
// that the names of every other object of the job (rings, windows) still
// derive from a secret.

// keyOf returns the job's key given to this rank: Options.JobKey, else the
// launcher's (jobkey.Env); the zero Key when there is none.
func keyOf(o *Options) (jobkey.Key, error) {
	if !o.JobKey.IsZero() {
		return o.JobKey, nil
	}
	k, err := jobkey.FromEnv()
	if errors.Is(err, jobkey.ErrNoKey) {
		return jobkey.Key{}, nil
	}
	if err != nil {
		return jobkey.Key{}, fmt.Errorf("nemesis: %w", err)
	}
	return k, nil
}

// creatorKey is the key the segment's creator writes in its header: the
// job's, or a new one when the job has none.
func creatorKey(given jobkey.Key) (jobkey.Key, error) {
	if !given.IsZero() {
		return given, nil
	}
	k, err := jobkey.New()
	if err != nil {
		return jobkey.Key{}, fmt.Errorf("nemesis: drawing the job's key: %w", err)
	}
	return k, nil
}

// joinKey checks the key of the segment a rank joined against the one it
// was given, and returns the job's key.
func (s *segment) joinKey(given jobkey.Key, rank int) (jobkey.Key, error) {
	k := s.hdr.key
	if k.IsZero() {
		return jobkey.Key{}, errorf(ErrLayout, "%s holds no job key", s.path)
	}
	if !given.IsZero() && subtle.ConstantTimeCompare(k[:], given[:]) != 1 {
		return jobkey.Key{}, errorf(ErrJobKey, "rank %d was given %v, the segment %s was made with %v: the ranks were not started by one launcher", rank, given, s.path, k)
	}
	return k, nil
}

// segmentName is the name of this node's segment: the job's, then the
// part derived from its key when it has one, then the node's number when
// the job spans nodes (several simulated nodes may share one /dev/shm).
func segmentName(job string, key jobkey.Key, o *Options, node int) string {
	name := job
	if !key.IsZero() {
		name += "-" + key.Name("nemesis/segment")
	}
	if o.Net != nil {
		name += fmt.Sprintf(".node%d", node)
	}
	return name
}

// JobKey returns the job's key: the one the rank was given, or the one
// the segment's creator drew for a job given none. Every rank of the job
// holds the same; the names of the job's other shared objects derive from
// it (attach hands it to lmt, rma names its windows with it).
func (ep *Endpoint) JobKey() jobkey.Key { return ep.key }
