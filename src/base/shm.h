/* Memory that processes can share (memfds) and the one way to wait on it:
 * futex words with deadlines, and a doorbell built on them. Nothing here
 * is a process-shared mutex or condition variable: a process that dies
 * in the middle of an update leaves no lock held, so every structure
 * shared through these is atomics plus waits that time out. */
#ifndef HN_SHM_H
#define HN_SHM_H

#include <stddef.h>
#include <stdint.h>

#include "util.h"

/* A new shared mapping of `bytes` (zeroed, rounded up to whole pages):
 * an anonymous memfd (close-on-exec), its size set, mapped shared. *fd
 * and *base receive it; HN_ERR_NOMEM (or HN_ERR_IO) and nothing to undo
 * on failure. Unmap with hn_shm_unmap, close fd when no other process
 * needs it any more (the memory lives until the last mapping and the last
 * fd are gone). */
hn_status_t hn_shm_create(size_t bytes, int *fd, void **base);
/* The memfd fd (from hn_shm_create here or in another process) mapped
 * again, shared: its `bytes` first bytes at *base. HN_ERR_IO when fd is
 * not a file of at least `bytes` bytes or cannot be mapped. */
hn_status_t hn_shm_map(int fd, size_t bytes, void **base);
void hn_shm_unmap(void *base, size_t bytes);

/* Futex waits on a 32-bit word that may be shared between processes.
 * wait sleeps while *word == seen, at most timeout_s (a spurious return
 * is possible: callers re-check their condition): 0 when woken or the
 * word differs, ETIMEDOUT past the timeout. wake_all wakes every waiter
 * on word. Any thread; the word must be 4-byte aligned. */
int hn_futex_wait(uint32_t *word, uint32_t seen, double timeout_s);
void hn_futex_wake_all(uint32_t *word);

/* A doorbell: a counter that is rung (incremented) by whoever changed
 * something others may wait for, and a count of sleepers, so that a ring
 * makes a syscall only when someone sleeps. A waiter reads the bell,
 * checks its condition, and waits for the bell to move on from what it
 * read. Lives in memory shared by every ringer and waiter (heap or
 * hn_shm); zeroed is a fresh bell. Any thread. */
typedef struct hn_doorbell {
    uint32_t seq;     /* rings so far */
    uint32_t waiters; /* threads asleep on seq (or about to be) */
} hn_doorbell;

void hn_doorbell_ring(hn_doorbell *bell);
uint32_t hn_doorbell_read(hn_doorbell *bell);
/* Sleeps until the bell has rung since `seen` (a value of
 * hn_doorbell_read), at most timeout_s: 0 when it has, ETIMEDOUT when
 * not. The caller re-checks its condition either way. */
int hn_doorbell_wait(hn_doorbell *bell, uint32_t seen, double timeout_s);

#endif
