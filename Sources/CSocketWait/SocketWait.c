#define _GNU_SOURCE
#include "CSocketWait.h"

#include <errno.h>
#include <sys/epoll.h>
#include <time.h>

int socket_wait_create(void) { return epoll_create1(EPOLL_CLOEXEC); }

int socket_wait_add(int instance, int descriptor, uint64_t tag) {
    struct epoll_event event = { .events = EPOLLIN, .data.u64 = tag };
    return epoll_ctl(instance, EPOLL_CTL_ADD, descriptor, &event);
}

int socket_wait(int instance, uint64_t *tags, int capacity, int64_t nanoseconds) {
    struct epoll_event events[64];
    if (capacity > 64) capacity = 64;
    struct timespec timeout = { .tv_sec = nanoseconds / 1000000000, .tv_nsec = nanoseconds % 1000000000 };
    // (epoll_pwait2 takes a timeout finer than epoll_wait's milliseconds: a send due in 300 µs must not wait a
    // whole one. A kernel older than 5.11 lacks it: milliseconds then, rounded up.)
    int count = epoll_pwait2(instance, events, capacity, nanoseconds < 0 ? NULL : &timeout, NULL);
    if (count < 0 && errno == ENOSYS) {
        count = epoll_wait(instance, events, capacity, nanoseconds < 0 ? -1 : (int)((nanoseconds + 999999) / 1000000));
    }
    for (int index = 0; index < count; index++) tags[index] = events[index].data.u64;
    return count;
}
