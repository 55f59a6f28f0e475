#ifndef C_SOCKET_WAIT_H
#define C_SOCKET_WAIT_H

// Waiting on many sockets at once, for the bench's load generator: epoll, which Swift's Glibc module does not
// declare. (poll on every wake-up looked at each of a thread's sockets: a third of the generator's time.)

#include <stdint.h>

/// A new epoll instance (close it with close(2)); -1 and errno on failure.
int socket_wait_create(void);

/// Watches `descriptor` for something to read; its events carry `tag`. 0, or -1 and errno.
int socket_wait_add(int instance, int descriptor, uint64_t tag);

/// Waits at most `nanoseconds` (a negative wait: no limit) for watched sockets with something to read, and writes
/// the tags of at most `capacity` of them; how many (0: the time passed), or -1 and errno.
int socket_wait(int instance, uint64_t *tags, int capacity, int64_t nanoseconds);

#endif
