/* Tests of src/base/shm.c: a memfd mapped twice is one memory, futex waits
 * and the doorbell wake a sleeper and time out without one. */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "base/shm.h"
#include "../test.h"

static void test_shared_mapping(void)
{
    int fd = -1;
    void *a = NULL, *b = NULL;
    uint64_t st = 7;
    unsigned char *pa, *pb;
    CU_ASSERT_EQUAL_FATAL(hn_shm_create(100000, &fd, &a), HN_OK);
    pa = a;
    for (int i = 0; i < 100000; i++)
        CU_ASSERT_EQUAL_FATAL(pa[i], 0); /* zeroed */
    CU_ASSERT_EQUAL_FATAL(hn_shm_map(fd, 100000, &b), HN_OK);
    pb = b;
    CU_ASSERT_PTR_NOT_EQUAL(a, b);
    for (int i = 0; i < 100000; i++)
        pa[i] = (unsigned char)hn_splitmix64(&st);
    CU_ASSERT_EQUAL(memcmp(pa, pb, 100000), 0); /* one memory, two addresses */
    pb[99999] ^= 0xff;
    CU_ASSERT_EQUAL(pa[99999], pb[99999]);
    /* more than the file holds, or no file */
    hn_log_level_t level = hn_log_level();
    hn_log_set_level(HN_LOG_OFF);
    CU_ASSERT_EQUAL(hn_shm_map(fd, 1 << 20, &b), HN_ERR_IO);
    CU_ASSERT_EQUAL(hn_shm_map(-1, 4096, &b), HN_ERR_IO);
    hn_log_set_level(level);
    hn_shm_unmap(pb, 100000);
    hn_shm_unmap(pa, 100000);
    close(fd);
}

typedef struct bell_arg {
    hn_doorbell *bell;
    uint32_t seen;
    int flag; /* set (atomic) by the ringer before it rings */
    int rc, saw_flag;
    double waited;
} bell_arg;

static void *bell_waiter(void *p)
{
    bell_arg *a = p;
    double t0 = hn_now();
    /* as a user waits: the condition, then the bell */
    while (!__atomic_load_n(&a->flag, __ATOMIC_ACQUIRE) && a->rc == 0) {
        uint32_t seen = hn_doorbell_read(a->bell);
        if (__atomic_load_n(&a->flag, __ATOMIC_ACQUIRE))
            break;
        a->rc = hn_doorbell_wait(a->bell, seen, 30.0);
    }
    a->saw_flag = __atomic_load_n(&a->flag, __ATOMIC_ACQUIRE);
    a->waited = hn_now() - t0;
    return NULL;
}

static void test_doorbell(void)
{
    hn_doorbell bell;
    bell_arg args[4];
    pthread_t th[4];
    double t0;
    memset(&bell, 0, sizeof(bell));
    /* nobody rings: a timeout, not before it is due */
    t0 = hn_now();
    CU_ASSERT_EQUAL(hn_doorbell_wait(&bell, hn_doorbell_read(&bell), 0.05), ETIMEDOUT);
    CU_ASSERT_TRUE(hn_now() - t0 >= 0.045);
    CU_ASSERT_EQUAL(bell.waiters, 0);
    /* a bell rung since `seen` returns at once */
    {
        uint32_t seen = hn_doorbell_read(&bell);
        hn_doorbell_ring(&bell);
        CU_ASSERT_EQUAL(hn_doorbell_wait(&bell, seen, 30.0), 0);
    }
    /* sleepers woken by one ring; many rounds, the ring at random moments */
    for (int round = 0; round < 20; round++) {
        int flag = 0;
        memset(args, 0, sizeof(args));
        for (int i = 0; i < 4; i++) {
            args[i].bell = &bell;
            CU_ASSERT_EQUAL_FATAL(pthread_create(&th[i], NULL, bell_waiter, &args[i]), 0);
        }
        usleep((useconds_t)(round % 5) * 1000);
        for (int i = 0; i < 4; i++)
            __atomic_store_n(&args[i].flag, 1, __ATOMIC_RELEASE);
        hn_doorbell_ring(&bell);
        for (int i = 0; i < 4; i++) {
            pthread_join(th[i], NULL);
            CU_ASSERT_EQUAL(args[i].rc, 0);
            CU_ASSERT_TRUE(args[i].saw_flag);
            CU_ASSERT_TRUE(args[i].waited < 20.0); /* woken, not timed out */
            flag |= args[i].rc;
        }
        CU_ASSERT_EQUAL(flag, 0);
        CU_ASSERT_EQUAL(__atomic_load_n(&bell.waiters, __ATOMIC_SEQ_CST), 0);
    }
}

static void test_futex(void)
{
    uint32_t word = 5;
    double t0 = hn_now();
    CU_ASSERT_EQUAL(hn_futex_wait(&word, 4, 10.0), 0); /* not the value: returns at once */
    CU_ASSERT_TRUE(hn_now() - t0 < 5.0);
    t0 = hn_now();
    CU_ASSERT_EQUAL(hn_futex_wait(&word, 5, 0.02), ETIMEDOUT);
    CU_ASSERT_TRUE(hn_now() - t0 >= 0.015);
    hn_futex_wake_all(&word); /* nobody waits: nothing happens */
}

void hn_suite_shm(void)
{
    static CU_TestInfo tests[] = {
        {"a memfd mapped twice is one memory", test_shared_mapping},
        {"the doorbell wakes sleepers and times out without a ring", test_doorbell},
        {"futex waits", test_futex},
        CU_TEST_INFO_NULL,
    };
    hn_test_add_suite("base/shm", tests);
}
