/* Shared memory (memfds), futex waits with deadlines, and the doorbell:
 * what ranks share besides device memory is built on these (world.c). */
#include <errno.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "shm.h"

static size_t page_round(size_t bytes)
{
    long page = sysconf(_SC_PAGESIZE);
    size_t p = page > 0 ? (size_t)page : 4096;
    return bytes == 0 ? p : (bytes + p - 1) / p * p;
}

hn_status_t hn_shm_create(size_t bytes, int *fd, void **base)
{
    size_t len = page_round(bytes);
    void *p;
    int f;
    if (len < bytes || len > (size_t)INT64_MAX)
        return HN_ERR_NOMEM;
    if ((f = memfd_create("hirnode", MFD_CLOEXEC)) < 0) {
        HN_ERROR("memfd_create: %s", strerror(errno));
        return errno == ENOMEM || errno == EMFILE || errno == ENFILE ? HN_ERR_NOMEM : HN_ERR_IO;
    }
    /* a memfd's pages are zero until written, and allocated when touched */
    if (ftruncate(f, (off_t)len) != 0) {
        HN_ERROR("cannot size shared memory of %zu bytes: %s", len, strerror(errno));
        close(f);
        return HN_ERR_NOMEM;
    }
    if ((p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0)) == MAP_FAILED) {
        HN_ERROR("cannot map shared memory of %zu bytes: %s", len, strerror(errno));
        close(f);
        return HN_ERR_NOMEM;
    }
    *fd = f;
    *base = p;
    return HN_OK;
}

hn_status_t hn_shm_map(int fd, size_t bytes, void **base)
{
    size_t len = page_round(bytes);
    struct stat st;
    void *p;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size < (uint64_t)len) {
        HN_ERROR("fd %d is no shared memory of %zu bytes", fd, len);
        return HN_ERR_IO;
    }
    if ((p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
        HN_ERROR("cannot map shared memory of %zu bytes: %s", len, strerror(errno));
        return HN_ERR_IO;
    }
    *base = p;
    return HN_OK;
}

void hn_shm_unmap(void *base, size_t bytes)
{
    if (base != NULL)
        munmap(base, page_round(bytes));
}

/* Not FUTEX_PRIVATE_FLAG: the word may be in memory another process maps. */
int hn_futex_wait(uint32_t *word, uint32_t seen, double timeout_s)
{
    struct timespec ts;
    if (timeout_s < 0)
        timeout_s = 0;
    ts.tv_sec = (time_t)timeout_s;
    ts.tv_nsec = (long)((timeout_s - (double)ts.tv_sec) * 1e9);
    if (syscall(SYS_futex, word, FUTEX_WAIT, seen, &ts, NULL, 0) != 0 && errno == ETIMEDOUT)
        return ETIMEDOUT;
    return 0; /* woken, the word moved on (EAGAIN), or a signal (EINTR) */
}

void hn_futex_wake_all(uint32_t *word) { (void)syscall(SYS_futex, word, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0); }

/* The ringer stores seq, then reads waiters; a waiter stores waiters, then
 * reads seq; both sequentially consistent, so at least one sees the
 * other: either the ringer wakes it, or it does not sleep. */
void hn_doorbell_ring(hn_doorbell *bell)
{
    __atomic_add_fetch(&bell->seq, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&bell->waiters, __ATOMIC_SEQ_CST) != 0)
        hn_futex_wake_all(&bell->seq);
}

uint32_t hn_doorbell_read(hn_doorbell *bell) { return __atomic_load_n(&bell->seq, __ATOMIC_SEQ_CST); }

int hn_doorbell_wait(hn_doorbell *bell, uint32_t seen, double timeout_s)
{
    double end = hn_now() + timeout_s;
    int rc = 0;
    __atomic_add_fetch(&bell->waiters, 1, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(&bell->seq, __ATOMIC_SEQ_CST) == seen) {
        double left = end - hn_now();
        if (left <= 0) {
            rc = ETIMEDOUT;
            break;
        }
        (void)hn_futex_wait(&bell->seq, seen, left);
    }
    __atomic_sub_fetch(&bell->waiters, 1, __ATOMIC_SEQ_CST);
    return rc;
}
