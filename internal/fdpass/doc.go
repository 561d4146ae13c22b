// Package fdpass hands the memory a job's ranks share from the rank that
// made it to the others, as a file descriptor over a unix socket
// (SCM_RIGHTS), so that the memory needs no name any other process could
// open, and so that every rank maps a memfd whose size nobody can change.
//
// The contract:
//
//   - [NewSealed] makes a memfd of a given size, allocated and sealed with
//     F_SEAL_SHRINK|F_SEAL_GROW|F_SEAL_SEAL: no process holding it, the
//     job's own ranks included, can shrink it (which would kill every rank
//     touching the lost pages with SIGBUS) or grow it.
//   - [Listen] serves descriptors by name on a SOCK_SEQPACKET socket in a
//     directory of its own, made 0700 by this process's euid (an existing
//     one is refused with [ErrDirNotPrivate] unless it is exactly that).
//     A client whose SO_PEERCRED uid is not this euid is answered with a
//     refusal and no descriptor. [Server.Close] stops serving, waits for
//     every goroutine it started, and removes the socket and the directory.
//   - [Fetch] asks the server at a directory for one object. It checks the
//     directory as Listen does, the server's SO_PEERCRED uid, that the reply
//     carries exactly one descriptor, and that the descriptor is a sealed
//     memfd of this euid with no access for others, of the size asked for:
//     only then does the caller get it.
//
// Requests and replies are one packet each, of bounded size. Every error
// is an [*Error] naming the object, the socket, the peer's pid and uid when
// known, and what is wrong; errors.Is tells its kind.
//
// The directory's name is the caller's: derived from the job's key, so
// that another user can neither guess it nor make it first.
package fdpass
