/* Tests of src/world/world.c with real concurrency: rank threads exchanging
 * random data in overlapping teams, barriers under random delays, an
 * abort that wakes waiters, absent and divergent members named, the error
 * slot raced by many threads, and the shared regions' determinism. No
 * assertion on how fast anything is, only on deadlines far away. */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "world/world.h"
#include "../test.h"

#define NR 4 /* ranks (threads) of the concurrent tests */

/* A random delay of up to max_us microseconds from state. */
static void jitter(uint64_t *state, unsigned max_us)
{
    unsigned us = (unsigned)(hn_splitmix64(state) % (max_us + 1));
    if (us > max_us / 2)
        usleep(us);
    else if (us % 3 == 0)
        sched_yield();
}

/* the bytes member `rank` puts into exchange `round` of kind `kind` */
static void member_data(unsigned char *out, size_t bytes, int round, int kind, int rank)
{
    uint64_t st = ((uint64_t)round << 24) ^ ((uint64_t)kind << 16) ^ (uint64_t)rank ^ 0x5eedull;
    for (size_t i = 0; i < bytes; i++)
        out[i] = (unsigned char)hn_splitmix64(&st);
}

static size_t round_bytes(int round, int kind)
{
    uint64_t st = (uint64_t)round * 31 + (uint64_t)kind;
    return (size_t)(hn_splitmix64(&st) % (HN_WORLD_XCHG_BYTES + 1));
}

typedef struct rank_arg {
    hn_world *w;
    int rank, rounds;
    int bad; /* exchanges whose result differed from the reference */
    hn_status_t st;
    char why[512];
} rank_arg;

/* One exchange among `ranks` (sorted) checked against every member's
 * reference data. */
static void one_exchange(rank_arg *a, const int *ranks, int n, int round, int kind, unsigned char *mine,
                         unsigned char *all, unsigned char *want)
{
    size_t bytes = round_bytes(round, kind);
    hn_strbuf why;
    int me = -1;
    hn_status_t st;
    for (int i = 0; i < n; i++)
        if (ranks[i] == a->rank)
            me = i;
    member_data(mine, bytes, round, kind, a->rank);
    memset(all, 0xa5, (size_t)n * HN_WORLD_XCHG_BYTES); /* poison */
    hn_sb_init(&why);
    st = hn_world_xchg(a->w, ranks, n, me, ((uint64_t)round << 8) | (uint64_t)kind, mine, bytes, all, 0, &why);
    if (st != HN_OK) {
        if (a->st == HN_OK) {
            a->st = st;
            snprintf(a->why, sizeof(a->why), "%s", why.data != NULL ? why.data : "");
        }
    } else {
        for (int i = 0; i < n; i++) {
            member_data(want, bytes, round, kind, ranks[i]);
            a->bad += memcmp(all + (size_t)i * bytes, want, bytes) != 0;
        }
    }
    hn_sb_free(&why);
}

/* Every round: the whole world, then the even and the odd ranks (two
 * teams at once), then pairs (r, r ^ 1): the same order on every rank,
 * random sizes, random delays between. */
static void *exchanger(void *p)
{
    rank_arg *a = p;
    unsigned char *mine = malloc(HN_WORLD_XCHG_BYTES), *want = malloc(HN_WORLD_XCHG_BYTES);
    unsigned char *all = malloc((size_t)NR * HN_WORLD_XCHG_BYTES);
    uint64_t st = (uint64_t)a->rank * 977 + 1;
    int world[NR], half[NR / 2], pair[2];
    if (mine == NULL || want == NULL || all == NULL) {
        a->st = HN_ERR_NOMEM;
        goto out;
    }
    for (int i = 0; i < NR; i++)
        world[i] = i;
    for (int i = 0; i < NR / 2; i++)
        half[i] = 2 * i + a->rank % 2;
    pair[0] = a->rank & ~1;
    pair[1] = pair[0] + 1;
    for (int round = 0; round < a->rounds && a->st == HN_OK; round++) {
        jitter(&st, 300);
        one_exchange(a, world, NR, round, 0, mine, all, want);
        jitter(&st, 300);
        one_exchange(a, half, NR / 2, round, 1 + a->rank % 2, mine, all, want);
        jitter(&st, 300);
        one_exchange(a, pair, 2, round, 3 + a->rank / 2, mine, all, want);
    }
out:
    free(mine);
    free(all);
    free(want);
    return NULL;
}

static void test_exchanges(void)
{
    hn_world *w = NULL;
    rank_arg args[NR];
    pthread_t th[NR];
    CU_ASSERT_EQUAL_FATAL(hn_world_create_local(NR, 60.0, 0, &w), HN_OK);
    memset(args, 0, sizeof(args));
    for (int r = 0; r < NR; r++) {
        args[r].w = w;
        args[r].rank = r;
        args[r].rounds = 60;
        CU_ASSERT_EQUAL_FATAL(pthread_create(&th[r], NULL, exchanger, &args[r]), 0);
    }
    for (int r = 0; r < NR; r++) {
        pthread_join(th[r], NULL);
        if (args[r].st != HN_OK)
            fprintf(stderr, "\n  rank %d: %s: %s", r, hn_status_string(args[r].st), args[r].why);
        CU_ASSERT_EQUAL(args[r].st, HN_OK);
        CU_ASSERT_EQUAL(args[r].bad, 0);
    }
    CU_ASSERT_FALSE(hn_world_aborted(w));
    hn_world_destroy(w);
}

/* ---- barriers ---- */

typedef struct barrier_arg {
    hn_world *w;
    int rank, rounds;
    int *arrived; /* [rounds], atomic */
    int early;    /* times a rank left a barrier before every rank came */
    hn_status_t st;
} barrier_arg;

static void *barrier_rank(void *p)
{
    barrier_arg *a = p;
    int all[NR];
    uint64_t st = (uint64_t)a->rank * 131 + 7;
    for (int i = 0; i < NR; i++)
        all[i] = i;
    for (int round = 0; round < a->rounds && a->st == HN_OK; round++) {
        jitter(&st, 2000);
        __atomic_add_fetch(&a->arrived[round], 1, __ATOMIC_ACQ_REL);
        a->st = hn_world_barrier(a->w, all, NR, a->rank, 0xba77000ull + (uint64_t)round, 0, NULL);
        a->early += __atomic_load_n(&a->arrived[round], __ATOMIC_ACQUIRE) != NR;
    }
    return NULL;
}

static void test_barrier(void)
{
    enum { ROUNDS = 40 };
    hn_world *w = NULL;
    barrier_arg args[NR];
    pthread_t th[NR];
    int arrived[ROUNDS] = {0};
    CU_ASSERT_EQUAL_FATAL(hn_world_create_local(NR, 60.0, 0, &w), HN_OK);
    memset(args, 0, sizeof(args));
    for (int r = 0; r < NR; r++) {
        args[r].w = w;
        args[r].rank = r;
        args[r].rounds = ROUNDS;
        args[r].arrived = arrived;
        CU_ASSERT_EQUAL_FATAL(pthread_create(&th[r], NULL, barrier_rank, &args[r]), 0);
    }
    for (int r = 0; r < NR; r++) {
        pthread_join(th[r], NULL);
        CU_ASSERT_EQUAL(args[r].st, HN_OK);
        CU_ASSERT_EQUAL(args[r].early, 0);
    }
    for (int i = 0; i < ROUNDS; i++)
        CU_ASSERT_EQUAL(arrived[i], NR);
    hn_world_destroy(w);
}

/* ---- abort, absence, divergence ---- */

typedef struct wait_arg {
    hn_world *w;
    const int *ranks;
    int n, me;
    uint64_t tag;
    size_t bytes;
    unsigned flags;
    hn_status_t st;
    double took;
    char why[512];
} wait_arg;

static void *waiter(void *p)
{
    wait_arg *a = p;
    unsigned char mine[64], all[NR * 64];
    hn_strbuf why;
    double t0 = hn_now();
    memset(mine, a->me, sizeof(mine));
    hn_sb_init(&why);
    a->st = hn_world_xchg(a->w, a->ranks, a->n, a->me, a->tag, mine, a->bytes, all, a->flags, &why);
    a->took = hn_now() - t0;
    snprintf(a->why, sizeof(a->why), "%s", why.data != NULL ? why.data : "");
    hn_sb_free(&why);
    return NULL;
}

/* Starts members [from, to) of an exchange among ranks on threads. */
static void start(wait_arg *args, pthread_t *th, hn_world *w, const int *ranks, int n, int from, int to,
                  uint64_t tag, unsigned flags)
{
    for (int i = from; i < to; i++) {
        memset(&args[i], 0, sizeof(args[i]));
        args[i].w = w;
        args[i].ranks = ranks;
        args[i].n = n;
        args[i].me = i;
        args[i].tag = tag;
        args[i].bytes = 64;
        args[i].flags = flags;
        CU_ASSERT_EQUAL_FATAL(pthread_create(&th[i], NULL, waiter, &args[i]), 0);
    }
}

static void test_abort_wakes_waiters(void)
{
    static const int all[NR] = {0, 1, 2, 3};
    hn_world *w = NULL;
    wait_arg args[NR];
    pthread_t th[NR];
    CU_ASSERT_EQUAL_FATAL(hn_world_create_local(NR, 60.0, 0, &w), HN_OK);
    /* ranks 0..2 wait for rank 3, which never comes; an abort ends it */
    start(args, th, w, all, NR, 0, NR - 1, 0xab, 0);
    usleep(50000);
    hn_world_abort(w);
    for (int i = 0; i < NR - 1; i++) {
        pthread_join(th[i], NULL);
        CU_ASSERT_EQUAL(args[i].st, HN_ERR_ABORTED);
        CU_ASSERT_TRUE(args[i].took < 30.0); /* woken, far before the deadline */
        CU_ASSERT_PTR_NOT_NULL(strstr(args[i].why, "exchange 0xab among {0 1 2 3}"));
    }
    /* while aborted, only the exchanges of recovery go through */
    start(args, th, w, all, NR, 0, NR, 0xac, HN_WORLD_EVEN_ABORTED);
    for (int i = 0; i < NR; i++) {
        pthread_join(th[i], NULL);
        if (args[i].st != HN_OK)
            fprintf(stderr, "\n  rank %d: %s: %s", i, hn_status_string(args[i].st), args[i].why);
        CU_ASSERT_EQUAL(args[i].st, HN_OK);
    }
    hn_world_error_clear(w);
    CU_ASSERT_FALSE(hn_world_aborted(w));
    start(args, th, w, all, NR, 0, NR, 0xad, 0);
    for (int i = 0; i < NR; i++) {
        pthread_join(th[i], NULL);
        CU_ASSERT_EQUAL(args[i].st, HN_OK);
    }
    hn_world_destroy(w);
}

static void test_absent_and_divergent(void)
{
    static const int all[3] = {0, 1, 2}, pair[2] = {0, 1};
    hn_world *w = NULL;
    wait_arg args[3];
    pthread_t th[3];
    CU_ASSERT_EQUAL_FATAL(hn_world_create_local(3, 0.5, 0, &w), HN_OK);
    /* rank 2 never comes: named at the deadline by both others */
    start(args, th, w, all, 3, 0, 2, 0x10, 0);
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
        CU_ASSERT_EQUAL(args[i].st, HN_ERR_TIMEOUT);
        CU_ASSERT_TRUE(args[i].took >= 0.45);
        CU_ASSERT_PTR_NOT_NULL(strstr(args[i].why, "rank 2 never came"));
    }
    hn_world_destroy(w);
    /* ranks 0 and 1 in different exchanges that include each other: a
     * divergence, named by at least one (the other may see only that its
     * peer gave up, and time out) */
    CU_ASSERT_EQUAL_FATAL(hn_world_create_local(3, 2.0, 0, &w), HN_OK);
    start(args, th, w, pair, 2, 0, 1, 0x20, 0);
    start(args, th, w, pair, 2, 1, 2, 0x21, 0);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    CU_ASSERT_TRUE(args[0].st == HN_ERR_MISMATCH || args[1].st == HN_ERR_MISMATCH);
    for (int i = 0; i < 2; i++) {
        CU_ASSERT_NOT_EQUAL(args[i].st, HN_OK);
        if (args[i].st == HN_ERR_MISMATCH)
            CU_ASSERT_PTR_NOT_NULL(strstr(args[i].why, i == 0 ? "rank 1 is in exchange 0x21" : "rank 0 is in exchange 0x20"));
    }
    /* the two agree again under a new tag */
    start(args, th, w, pair, 2, 0, 2, 0x30, 0);
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
        CU_ASSERT_EQUAL(args[i].st, HN_OK);
    }
    /* one tag, other sizes */
    {
        wait_arg b[2];
        memset(b, 0, sizeof(b));
        for (int i = 0; i < 2; i++) {
            b[i].w = w;
            b[i].ranks = pair;
            b[i].n = 2;
            b[i].me = i;
            b[i].tag = 0x31;
            b[i].bytes = i == 0 ? 64 : 32;
            CU_ASSERT_EQUAL_FATAL(pthread_create(&th[i], NULL, waiter, &b[i]), 0);
        }
        for (int i = 0; i < 2; i++)
            pthread_join(th[i], NULL);
        CU_ASSERT_TRUE(b[0].st == HN_ERR_MISMATCH || b[1].st == HN_ERR_MISMATCH);
        CU_ASSERT_NOT_EQUAL(b[0].st, HN_OK);
        CU_ASSERT_NOT_EQUAL(b[1].st, HN_OK);
    }
    /* bad arguments */
    CU_ASSERT_EQUAL(hn_world_barrier(w, pair, 2, 2, 1, 0, NULL), HN_ERR_INVALID);
    CU_ASSERT_EQUAL(hn_world_barrier(w, (const int[]){0, 0}, 2, 0, 1, 0, NULL), HN_ERR_INVALID);
    CU_ASSERT_EQUAL(hn_world_barrier(w, (const int[]){0, 3}, 2, 0, 1, 0, NULL), HN_ERR_INVALID);
    CU_ASSERT_EQUAL(hn_world_xchg(w, pair, 2, 0, 1, all, HN_WORLD_XCHG_BYTES + 1, (void *)all, 0, NULL),
                    HN_ERR_INVALID);
    CU_ASSERT_EQUAL(hn_world_create_local(0, 1.0, 0, &w), HN_ERR_INVALID);
    CU_ASSERT_EQUAL(hn_world_create_local(HN_WORLD_MAX_RANKS + 1, 1.0, 0, &w), HN_ERR_INVALID);
    hn_world_destroy(w);
}

/* ---- the error slot ---- */

#define POSTERS 12

typedef struct post_arg {
    hn_world *w;
    pthread_barrier_t *go;
    int i;
    hn_status_t st;
    int won;
} post_arg;

static void *poster(void *p)
{
    post_arg *a = p;
    char text[64];
    snprintf(text, sizeof(text), "poster %d failed with %s", a->i, hn_status_string(a->st));
    pthread_barrier_wait(a->go);
    a->won = hn_world_error_post(a->w, a->st, a->i, 100 + a->i, text);
    return NULL;
}

static void test_error_slot(void)
{
    hn_world *w = NULL;
    pthread_barrier_t go;
    post_arg args[POSTERS];
    pthread_t th[POSTERS];
    hn_world_error e;
    CU_ASSERT_EQUAL_FATAL(hn_world_create_local(2, 10.0, 0, &w), HN_OK);
    CU_ASSERT_EQUAL(hn_world_error_get(w, &e), HN_OK);
    CU_ASSERT_EQUAL(e.status, HN_OK);
    for (int round = 0; round < 30; round++) {
        /* a mix of echoes and failures (round 0: echoes only), all at once */
        int failures = 0, winners = 0, winner = -1;
        uint64_t st = (uint64_t)round + 11;
        pthread_barrier_init(&go, NULL, POSTERS);
        for (int i = 0; i < POSTERS; i++) {
            args[i].w = w;
            args[i].go = &go;
            args[i].i = i;
            args[i].st = round > 0 && hn_splitmix64(&st) % 3 == 0 ? (i % 2 ? HN_ERR_RUNTIME : HN_ERR_TIMEOUT)
                                                                  : HN_ERR_ABORTED;
            failures += args[i].st != HN_ERR_ABORTED;
            CU_ASSERT_EQUAL_FATAL(pthread_create(&th[i], NULL, poster, &args[i]), 0);
        }
        for (int i = 0; i < POSTERS; i++)
            pthread_join(th[i], NULL);
        pthread_barrier_destroy(&go);
        CU_ASSERT_FALSE(hn_world_aborted(w)); /* the posters' callers abort */
        hn_world_abort(w);
        CU_ASSERT_TRUE(hn_world_aborted(w));
        CU_ASSERT_EQUAL(hn_world_error_get(w, &e), HN_OK);
        /* exactly one failure won when there were failures: the one get returns */
        for (int i = 0; i < POSTERS; i++)
            if (args[i].won && (failures == 0 || args[i].st != HN_ERR_ABORTED)) {
                winners++;
                winner = i;
            }
        CU_ASSERT_EQUAL(winners, 1);
        if (winner >= 0) {
            char want[64];
            snprintf(want, sizeof(want), "poster %d failed with %s", winner, hn_status_string(args[winner].st));
            CU_ASSERT_EQUAL(e.status, args[winner].st);
            CU_ASSERT_EQUAL(e.rank, winner);
            CU_ASSERT_EQUAL(e.instr, 100 + winner);
            CU_ASSERT_STRING_EQUAL(e.text, want);
        }
        CU_ASSERT_EQUAL(e.status == HN_ERR_ABORTED, failures == 0);
        hn_world_error_clear(w);
        CU_ASSERT_FALSE(hn_world_aborted(w));
        CU_ASSERT_EQUAL(hn_world_error_get(w, &e), HN_OK);
        CU_ASSERT_EQUAL(e.status, HN_OK);
    }
    /* in order: an echo first, then a failure, which beats it; then a
     * second failure loses; a long text is cut */
    CU_ASSERT_EQUAL(hn_world_error_post(w, HN_ERR_ABORTED, 1, -1, "aborted"), 1);
    CU_ASSERT_EQUAL(hn_world_error_post(w, HN_ERR_DEVICE, 0, 3, "the device failed"), 1);
    CU_ASSERT_EQUAL(hn_world_error_post(w, HN_ERR_RUNTIME, 1, 4, "later"), 0);
    CU_ASSERT_EQUAL(hn_world_error_post(w, HN_ERR_ABORTED, 1, -1, "aborted again"), 0);
    CU_ASSERT_EQUAL(hn_world_error_get(w, &e), HN_OK);
    CU_ASSERT_EQUAL(e.status, HN_ERR_DEVICE);
    CU_ASSERT_STRING_EQUAL(e.text, "the device failed");
    hn_world_error_clear(w);
    {
        char *longtext = malloc(3000);
        CU_ASSERT_PTR_NOT_NULL_FATAL(longtext);
        memset(longtext, 'x', 2999);
        longtext[2999] = '\0';
        CU_ASSERT_EQUAL(hn_world_error_post(w, HN_ERR_RUNTIME, 0, 0, longtext), 1);
        CU_ASSERT_EQUAL(hn_world_error_get(w, &e), HN_OK);
        CU_ASSERT_EQUAL(strlen(e.text), HN_WORLD_ERROR_TEXT - 1);
        free(longtext);
    }
    hn_world_destroy(w);
}

/* ---- shared regions ---- */

static void test_shared_regions(void)
{
    enum { CALLS = 200 };
    hn_world *a = NULL, *b = NULL;
    void *pa[CALLS] = {0}, *pb[CALLS] = {0};
    uint64_t st = 42;
    size_t region = (size_t)16 << 20;
    void *p, *q;
    CU_ASSERT_EQUAL_FATAL(hn_world_create_local(2, 1.0, region, &a), HN_OK);
    CU_ASSERT_EQUAL_FATAL(hn_world_create_local(2, 1.0, region, &b), HN_OK);
    /* one random sequence of allocations and frees, made in both worlds */
    for (int i = 0; i < CALLS; i++) {
        uint64_t r = hn_splitmix64(&st);
        int victim = (int)(r % (uint64_t)(i + 1));
        size_t bytes = 1 + (size_t)(r >> 40) % 60000;
        if (r % 4 == 0 && pa[victim] != NULL) {
            hn_world_shared_free(a, pa[victim]);
            hn_world_shared_free(b, pb[victim]);
            pa[victim] = pb[victim] = NULL;
            continue;
        }
        CU_ASSERT_EQUAL_FATAL(hn_world_shared(a, r, bytes, &pa[i]), HN_OK);
        CU_ASSERT_EQUAL_FATAL(hn_world_shared(b, r, bytes, &pb[i]), HN_OK);
        CU_ASSERT_EQUAL((uintptr_t)pa[i] % 64, 0);
        CU_ASSERT_EQUAL(hn_world_shared_offset(a, pa[i]), hn_world_shared_offset(b, pb[i]));
        /* zeroed when handed out, whatever was there before */
        for (size_t k = 0; k < bytes; k++)
            if (((unsigned char *)pa[i])[k] != 0) {
                CU_FAIL("a shared region handed out not zeroed");
                break;
            }
        memset(pa[i], 0x5a, bytes);
        memset(pb[i], 0x5a, bytes);
    }
    CU_ASSERT_EQUAL(hn_world_shared_hash(a), hn_world_shared_hash(b));
    /* regions do not overlap: each still holds its pattern, writes stay inside */
    for (int i = 0; i < CALLS; i++)
        if (pa[i] != NULL)
            CU_ASSERT_EQUAL(((unsigned char *)pa[i])[0], 0x5a);
    /* a different call changes the hash; too much is refused */
    CU_ASSERT_EQUAL(hn_world_shared(a, 1, 64, &p), HN_OK);
    CU_ASSERT_EQUAL(hn_world_shared(b, 2, 64, &q), HN_OK);
    CU_ASSERT_NOT_EQUAL(hn_world_shared_hash(a), hn_world_shared_hash(b));
    CU_ASSERT_EQUAL(hn_world_shared(a, 3, region + 1, &p), HN_ERR_NOMEM);
    hn_world_destroy(a);
    hn_world_destroy(b);
    /* the whole region, then nothing more; freed, it is whole again */
    CU_ASSERT_EQUAL_FATAL(hn_world_create_local(1, 1.0, 1 << 16, &a), HN_OK);
    CU_ASSERT_EQUAL(hn_world_shared(a, 1, 1 << 16, &p), HN_OK);
    CU_ASSERT_EQUAL(hn_world_shared(a, 2, 1, &q), HN_ERR_NOMEM);
    hn_world_shared_free(a, p);
    CU_ASSERT_EQUAL(hn_world_shared(a, 3, 1 << 16, &q), HN_OK);
    CU_ASSERT_PTR_EQUAL(p, q);
    hn_world_destroy(a);
}

void hn_suite_world(void)
{
    static CU_TestInfo tests[] = {
        {"rank threads exchange random data in overlapping teams", test_exchanges},
        {"a barrier under random delays lets nobody out early", test_barrier},
        {"an abort wakes the waiters; recovery's exchanges go through", test_abort_wakes_waiters},
        {"an absent rank and divergent exchanges are named", test_absent_and_divergent},
        {"the error slot raced by many threads: one first error", test_error_slot},
        {"shared regions: the same calls give the same offsets", test_shared_regions},
        CU_TEST_INFO_NULL,
    };
    hn_test_add_suite("world/world", tests);
}
