/* Tests of src/device/device_host.c: asynchrony, stream order, events and
 * cross-device waits, random delays. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device/device.h"
#include "../test.h"

static const hn_device_ops *D = &hn_device_host;

typedef struct gate {
    int open;
    int ran;
    int *log;
    int *nlog;
    int value;
    pthread_mutex_t *mu;
} gate;

static hn_status_t wait_gate(void *arg, const hn_origin *o)
{
    gate *g = arg;
    (void)o;
    while (!__atomic_load_n(&g->open, __ATOMIC_ACQUIRE))
        usleep(100);
    __atomic_store_n(&g->ran, 1, __ATOMIC_RELEASE);
    return HN_OK;
}

static hn_status_t append(void *arg, const hn_origin *o)
{
    gate *g = arg;
    (void)o;
    pthread_mutex_lock(g->mu);
    g->log[(*g->nlog)++] = g->value;
    pthread_mutex_unlock(g->mu);
    return HN_OK;
}

static void *ctx_new(double delay)
{
    void *ctx = NULL;
    hn_device_setup ds = {4, delay, 7, NULL, 0, NULL, 0, NULL, 0};
    CU_ASSERT_EQUAL(D->init(&ds, &ctx), HN_OK);
    return ctx;
}

static void test_asynchronous(void)
{
    void *ctx = ctx_new(0);
    hn_dstream *s;
    gate g = {0};
    CU_ASSERT_EQUAL_FATAL(D->stream_create(ctx, 0, &s), HN_OK);
    /* issuing returns before the work runs */
    CU_ASSERT_EQUAL(D->launch_host(s, wait_gate, &g, NULL, NULL), HN_OK);
    usleep(10000);
    CU_ASSERT_EQUAL(__atomic_load_n(&g.ran, __ATOMIC_ACQUIRE), 0);
    __atomic_store_n(&g.open, 1, __ATOMIC_RELEASE);
    CU_ASSERT_EQUAL(D->stream_sync(s), HN_OK);
    CU_ASSERT_EQUAL(g.ran, 1);
    D->stream_destroy(s);
    D->fini(ctx);
}

static void test_fifo_order(void)
{
    void *ctx = ctx_new(20);
    hn_dstream *s;
    int log[64], nlog = 0;
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    gate g[64];
    CU_ASSERT_EQUAL_FATAL(D->stream_create(ctx, 0, &s), HN_OK);
    for (int i = 0; i < 64; i++) {
        g[i] = (gate){.log = log, .nlog = &nlog, .value = i, .mu = &mu};
        D->launch_host(s, append, &g[i], NULL, NULL);
    }
    D->stream_sync(s);
    CU_ASSERT_EQUAL(nlog, 64);
    for (int i = 0; i < 64; i++)
        CU_ASSERT_EQUAL(log[i], i);
    D->stream_destroy(s);
    D->fini(ctx);
}

/* Stream b on device 1 waits for an event recorded on stream a of device
 * 0 after a gate; b's work must not run before the gate opens. */
static void test_cross_device_wait(void)
{
    void *ctx = ctx_new(0);
    hn_dstream *a, *b;
    hn_devent *e;
    gate g = {0};
    int log[4], nlog = 0;
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    gate after = {.log = log, .nlog = &nlog, .value = 1, .mu = &mu};
    gate mark = {.log = log, .nlog = &nlog, .value = 0, .mu = &mu};
    CU_ASSERT_EQUAL_FATAL(D->stream_create(ctx, 0, &a), HN_OK);
    CU_ASSERT_EQUAL_FATAL(D->stream_create(ctx, 1, &b), HN_OK);
    CU_ASSERT_EQUAL_FATAL(D->event_create(ctx, 0, &e), HN_OK);
    D->launch_host(a, wait_gate, &g, NULL, NULL);
    D->launch_host(a, append, &mark, NULL, NULL);
    D->event_record(e, a);
    /* re-recording after the wait does not change the earlier wait */
    D->stream_wait_event(b, e, NULL);
    D->launch_host(b, append, &after, NULL, NULL);
    D->event_record(e, b);
    usleep(20000);
    CU_ASSERT_EQUAL(nlog, 0);
    __atomic_store_n(&g.open, 1, __ATOMIC_RELEASE);
    D->stream_sync(b);
    CU_ASSERT_EQUAL(nlog, 2);
    CU_ASSERT_EQUAL(log[0], 0);
    CU_ASSERT_EQUAL(log[1], 1);
    D->event_destroy(e);
    D->stream_destroy(a);
    D->stream_destroy(b);
    D->fini(ctx);
}

/* An event never recorded: waiting on it waits for nothing (like CUDA). */
static void test_unrecorded_event(void)
{
    void *ctx = ctx_new(0);
    hn_dstream *s;
    hn_devent *e;
    CU_ASSERT_EQUAL_FATAL(D->stream_create(ctx, 0, &s), HN_OK);
    CU_ASSERT_EQUAL_FATAL(D->event_create(ctx, 0, &e), HN_OK);
    CU_ASSERT_EQUAL(D->stream_wait_event(s, e, NULL), HN_OK);
    CU_ASSERT_EQUAL(D->stream_sync(s), HN_OK);
    D->event_destroy(e);
    D->stream_destroy(s);
    D->fini(ctx);
}

/* Copies run in stream order behind other work. */
static void test_memcpy_order(void)
{
    void *ctx = ctx_new(50);
    hn_dstream *s;
    void *a, *b;
    float src[256], out[256];
    CU_ASSERT_EQUAL_FATAL(D->stream_create(ctx, 0, &s), HN_OK);
    CU_ASSERT_EQUAL_FATAL(D->mem_alloc(ctx, 0, sizeof(src), &a), HN_OK);
    CU_ASSERT_EQUAL_FATAL(D->mem_alloc(ctx, 1, sizeof(src), &b), HN_OK);
    for (int round = 0; round < 8; round++) {
        for (int i = 0; i < 256; i++)
            src[i] = (float)(i * 3 + round);
        D->copy_to_device(ctx, 0, a, src, sizeof(src));
        D->memcpy_async(b, a, sizeof(src), s, NULL);
        D->memcpy_async(a, b, 4, s, NULL); /* a later copy must see the first */
        D->stream_sync(s);
        D->copy_to_host(ctx, 1, out, b, sizeof(out));
        CU_ASSERT_EQUAL(memcmp(out, src, sizeof(out)), 0);
    }
    D->mem_free(ctx, 0, a);
    D->mem_free(ctx, 1, b);
    D->stream_destroy(s);
    D->fini(ctx);
}

static hn_status_t sleep_2ms(void *arg, const hn_origin *o)
{
    (void)arg;
    (void)o;
    usleep(2000);
    return HN_OK;
}

/* Timing markers: a marker's time is when its stream gets to it, not when
 * it is issued; across streams they follow the waits between them. */
static void test_timers(void)
{
    void *ctx = ctx_new(50);
    hn_dstream *s, *s2;
    hn_devent *e;
    hn_dtimer *t[4];
    gate g = {0};
    double sec = 0;
    CU_ASSERT_EQUAL_FATAL(D->stream_create(ctx, 0, &s), HN_OK);
    CU_ASSERT_EQUAL_FATAL(D->stream_create(ctx, 0, &s2), HN_OK);
    CU_ASSERT_EQUAL_FATAL(D->event_create(ctx, 0, &e), HN_OK);
    for (int i = 0; i < 4; i++)
        CU_ASSERT_EQUAL_FATAL(D->timer_create(ctx, 0, &t[i]), HN_OK);
    /* never recorded: no time */
    CU_ASSERT_EQUAL(D->timer_elapsed(t[0], t[1], &sec), HN_ERR_RUNTIME);
    /* behind a closure that has not run, a marker is not reached yet */
    CU_ASSERT_EQUAL(D->timer_record(t[0], s, NULL), HN_OK);
    CU_ASSERT_EQUAL(D->launch_host(s, wait_gate, &g, NULL, NULL), HN_OK);
    CU_ASSERT_EQUAL(D->timer_record(t[1], s, NULL), HN_OK);
    CU_ASSERT_EQUAL(D->timer_elapsed(t[0], t[1], &sec), HN_ERR_RUNTIME);
    __atomic_store_n(&g.open, 1, __ATOMIC_RELEASE);
    CU_ASSERT_EQUAL(D->stream_sync(s), HN_OK);
    CU_ASSERT_EQUAL(D->timer_elapsed(t[0], t[1], &sec), HN_OK);
    CU_ASSERT(sec >= 0);
    /* markers around 2 ms of work measure at least that; one on another
     * stream after a wait for it comes after */
    for (int round = 0; round < 4; round++) {
        CU_ASSERT_EQUAL(D->timer_record(t[0], s, NULL), HN_OK);
        CU_ASSERT_EQUAL(D->launch_host(s, sleep_2ms, NULL, NULL, NULL), HN_OK);
        CU_ASSERT_EQUAL(D->timer_record(t[1], s, NULL), HN_OK);
        CU_ASSERT_EQUAL(D->event_record(e, s), HN_OK);
        CU_ASSERT_EQUAL(D->timer_record(t[2], s2, NULL), HN_OK);
        CU_ASSERT_EQUAL(D->stream_wait_event(s2, e, NULL), HN_OK);
        CU_ASSERT_EQUAL(D->timer_record(t[3], s2, NULL), HN_OK);
        CU_ASSERT_EQUAL(D->stream_sync(s), HN_OK);
        CU_ASSERT_EQUAL(D->stream_sync(s2), HN_OK);
        CU_ASSERT_EQUAL(D->timer_elapsed(t[0], t[1], &sec), HN_OK);
        CU_ASSERT(sec >= 2e-3);
        CU_ASSERT_EQUAL(D->timer_elapsed(t[1], t[0], &sec), HN_OK);
        CU_ASSERT(sec <= -2e-3);
        CU_ASSERT_EQUAL(D->timer_elapsed(t[1], t[3], &sec), HN_OK);
        CU_ASSERT(sec >= 0);
    }
    /* after a failure of its run, a marker is dropped like other work */
    {
        hn_test_faults f;
        hn_origin o;
        hn_test_faults_init(&f, 5);
        o = (hn_origin){&f.sink, 0, 0, NULL, NULL};
        __atomic_store_n(&f.abort, 1, __ATOMIC_RELEASE);
        CU_ASSERT_EQUAL(D->timer_record(t[0], s, NULL), HN_OK);
        CU_ASSERT_EQUAL(D->timer_record(t[1], s, &o), HN_OK);
        CU_ASSERT_EQUAL(D->stream_sync(s), HN_OK);
        CU_ASSERT_EQUAL(D->timer_elapsed(t[0], t[1], &sec), HN_ERR_RUNTIME);
        hn_test_faults_fini(&f);
    }
    for (int i = 0; i < 4; i++)
        D->timer_destroy(t[i]);
    D->event_destroy(e);
    D->stream_destroy(s);
    D->stream_destroy(s2);
    D->fini(ctx);
}

/* A capture: work issued on s and on a stream forked from it by an event
 * (and joined back) is recorded, not run; every launch of the graph runs
 * it again in order, with the fork's concurrency; its relative flag and
 * epoch move from launch to launch. */
typedef struct counter {
    int *v;
    int step;
} counter;

static hn_status_t bump(void *arg, const hn_origin *o)
{
    counter *c = arg;
    (void)o;
    __atomic_add_fetch(c->v, c->step, __ATOMIC_ACQ_REL);
    return HN_OK;
}

/* On s: a bumps, then side (joined by fork) bumps b and writes a flag of
 * mem relative to mem[0], s waits for side (join) and that flag, and
 * raises mem[0] by 10 */
static void fork_join_work(hn_dstream *s, hn_dstream *side, hn_devent *fork, hn_devent *join, uint32_t *mem,
                           counter *a, counter *b)
{
    CU_ASSERT_EQUAL(D->launch_host(s, bump, a, NULL, NULL), HN_OK);
    CU_ASSERT_EQUAL(D->event_record(fork, s), HN_OK);
    CU_ASSERT_EQUAL(D->stream_wait_event(side, fork, NULL), HN_OK); /* side joins */
    CU_ASSERT_EQUAL(D->launch_host(side, bump, b, NULL, NULL), HN_OK);
    CU_ASSERT_EQUAL(D->stream_write_flag_rel(side, &mem[2], 5, mem, NULL), HN_OK);
    CU_ASSERT_EQUAL(D->event_record(join, side), HN_OK);
    CU_ASSERT_EQUAL(D->stream_wait_event(s, join, NULL), HN_OK);
    CU_ASSERT_EQUAL(D->stream_wait_flag_rel(s, &mem[2], 5, mem, NULL), HN_OK);
    CU_ASSERT_EQUAL(D->stream_add_u32(s, &mem[0], 10, NULL), HN_OK);
}

static void test_capture_launch(void)
{
    void *ctx = ctx_new(30);
    hn_dstream *s, *side, *other;
    hn_devent *fork, *join;
    hn_dgraph *g = NULL;
    uint32_t *mem; /* [0] epoch, [1] abort, [2] a flag */
    int v = 0;
    counter a = {&v, 1}, b = {&v, 100};
    char *said;
    CU_ASSERT_EQUAL_FATAL(D->stream_create(ctx, 0, &s), HN_OK);
    CU_ASSERT_EQUAL_FATAL(D->stream_create(ctx, 0, &side), HN_OK);
    CU_ASSERT_EQUAL_FATAL(D->stream_create(ctx, 0, &other), HN_OK);
    CU_ASSERT_EQUAL_FATAL(D->event_create(ctx, 0, &fork), HN_OK);
    CU_ASSERT_EQUAL_FATAL(D->event_create(ctx, 0, &join), HN_OK);
    CU_ASSERT_EQUAL_FATAL(D->mem_alloc(ctx, 0, 16, (void **)&mem), HN_OK);
    hn_test_capture_begin(); /* the errors below are expected: their text is checked */
    CU_ASSERT_EQUAL(D->capture_begin(s), HN_OK);
    CU_ASSERT_EQUAL(D->capture_begin(s), HN_ERR_INVALID); /* once */
    fork_join_work(s, side, fork, join, mem, &a, &b);
    CU_ASSERT_EQUAL(D->stream_sync(s), HN_ERR_INVALID); /* not while capturing */
    /* that failed the capture: a fresh one */
    CU_ASSERT_EQUAL(D->capture_end(s, &g), HN_ERR_INVALID);
    CU_ASSERT_PTR_NULL(g);
    said = hn_test_capture_end();
    CU_ASSERT_PTR_NOT_NULL(strstr(said, "host device 0: the stream is being captured already"));
    CU_ASSERT_PTR_NOT_NULL(strstr(said, "capture: a stream being captured was synchronized"));
    free(said);
    CU_ASSERT_EQUAL(D->capture_begin(s), HN_OK);
    fork_join_work(s, side, fork, join, mem, &a, &b);
    CU_ASSERT_EQUAL(D->capture_end(s, &g), HN_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    usleep(20000);
    CU_ASSERT_EQUAL(__atomic_load_n(&v, __ATOMIC_ACQUIRE), 0); /* nothing ran */
    for (int k = 0; k < 3; k++)
        CU_ASSERT_EQUAL(D->graph_launch(g, other), HN_OK); /* on any stream of the device */
    CU_ASSERT_EQUAL(D->stream_sync(other), HN_OK);
    CU_ASSERT_EQUAL(v, 303);
    CU_ASSERT_EQUAL(mem[0], 30);     /* the epoch, raised by each launch */
    CU_ASSERT_EQUAL(mem[2], 5 + 20); /* the last launch's flag: 5 + its epoch */
    /* the streams are free again: eager work runs */
    CU_ASSERT_EQUAL(D->launch_host(side, bump, &a, NULL, NULL), HN_OK);
    CU_ASSERT_EQUAL(D->stream_sync(side), HN_OK);
    CU_ASSERT_EQUAL(v, 304);
    D->graph_destroy(g);

    /* a stream left unjoined, a wait on an event recorded outside */
    CU_ASSERT_EQUAL(D->event_record(join, other), HN_OK);
    hn_test_capture_begin();
    CU_ASSERT_EQUAL(D->capture_begin(s), HN_OK);
    CU_ASSERT_EQUAL(D->stream_wait_event(s, join, NULL), HN_ERR_INVALID);
    CU_ASSERT_EQUAL(D->capture_end(s, &g), HN_ERR_INVALID);
    CU_ASSERT_EQUAL(D->capture_begin(s), HN_OK);
    CU_ASSERT_EQUAL(D->event_record(fork, s), HN_OK);
    CU_ASSERT_EQUAL(D->stream_wait_event(side, fork, NULL), HN_OK);
    CU_ASSERT_EQUAL(D->launch_host(side, bump, &a, NULL, NULL), HN_OK);
    CU_ASSERT_EQUAL(D->capture_end(s, &g), HN_ERR_INVALID);
    CU_ASSERT_PTR_NULL(g);
    CU_ASSERT_EQUAL(D->capture_end(side, &g), HN_ERR_INVALID); /* not capturing any more */
    said = hn_test_capture_end();
    CU_ASSERT_PTR_NOT_NULL(strstr(said, "capture: a captured wait on an event recorded outside the capture"));
    CU_ASSERT_PTR_NOT_NULL(strstr(said, "capture: a stream of the capture was not joined back into its origin"));
    CU_ASSERT_PTR_NOT_NULL(strstr(said, "capture_end on a stream that did not begin a capture"));
    free(said);
    CU_ASSERT_EQUAL(v, 304);
    D->mem_free(ctx, 0, mem);
    D->event_destroy(fork);
    D->event_destroy(join);
    D->stream_destroy(s);
    D->stream_destroy(side);
    D->stream_destroy(other);
    D->fini(ctx);
}

/* A graph updated in place with a capture of the same work on other
 * arguments (capture_update): its launches run the new arguments; a
 * capture of other work, or a failed one, leaves it as it was. */
static void test_capture_update(void)
{
    void *ctx = ctx_new(30);
    hn_dstream *s, *side, *other;
    hn_devent *fork, *join;
    hn_dgraph *g = NULL;
    uint32_t *mem; /* [0] epoch, [1] abort, [2] a flag */
    int v = 0, w = 0;
    counter a = {&v, 1}, b = {&v, 100}, c = {&w, 1000}, d = {&w, 10000};
    char *said;
    CU_ASSERT_EQUAL_FATAL(D->stream_create(ctx, 0, &s), HN_OK);
    CU_ASSERT_EQUAL_FATAL(D->stream_create(ctx, 0, &side), HN_OK);
    CU_ASSERT_EQUAL_FATAL(D->stream_create(ctx, 0, &other), HN_OK);
    CU_ASSERT_EQUAL_FATAL(D->event_create(ctx, 0, &fork), HN_OK);
    CU_ASSERT_EQUAL_FATAL(D->event_create(ctx, 0, &join), HN_OK);
    CU_ASSERT_EQUAL_FATAL(D->mem_alloc(ctx, 0, 16, (void **)&mem), HN_OK);
    CU_ASSERT_EQUAL(D->capture_begin(s), HN_OK);
    fork_join_work(s, side, fork, join, mem, &a, &b);
    CU_ASSERT_EQUAL(D->capture_end(s, &g), HN_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT_EQUAL(D->graph_launch(g, other), HN_OK);
    CU_ASSERT_EQUAL(D->stream_sync(other), HN_OK);
    CU_ASSERT_EQUAL(v, 101);
    /* the same work on other arguments: the graph takes them */
    CU_ASSERT_EQUAL(D->capture_begin(s), HN_OK);
    fork_join_work(s, side, fork, join, mem, &c, &d);
    CU_ASSERT_EQUAL(D->capture_update(s, g, NULL, 0), HN_OK);
    usleep(20000);
    CU_ASSERT_EQUAL(__atomic_load_n(&w, __ATOMIC_ACQUIRE), 0); /* nothing ran */
    for (int k = 0; k < 2; k++)
        CU_ASSERT_EQUAL(D->graph_launch(g, other), HN_OK);
    CU_ASSERT_EQUAL(D->stream_sync(other), HN_OK);
    CU_ASSERT_EQUAL(v, 101);
    CU_ASSERT_EQUAL(w, 22000);
    CU_ASSERT_EQUAL(mem[0], 30); /* the epoch went on: the update kept its relative work */
    /* other work: refused, the graph unchanged */
    CU_ASSERT_EQUAL(D->capture_begin(s), HN_OK);
    CU_ASSERT_EQUAL(D->launch_host(s, bump, &a, NULL, NULL), HN_OK);
    CU_ASSERT_EQUAL(D->capture_update(s, g, NULL, 0), HN_ERR_UNSUPPORTED);
    /* a failed capture: its error, the graph unchanged */
    hn_test_capture_begin();
    CU_ASSERT_EQUAL(D->capture_begin(s), HN_OK);
    fork_join_work(s, side, fork, join, mem, &a, &b);
    CU_ASSERT_EQUAL(D->stream_sync(s), HN_ERR_INVALID);
    CU_ASSERT_EQUAL(D->capture_update(s, g, NULL, 0), HN_ERR_INVALID);
    CU_ASSERT_EQUAL(D->capture_update(s, g, NULL, 0), HN_ERR_INVALID); /* not capturing */
    said = hn_test_capture_end();
    CU_ASSERT_PTR_NOT_NULL(strstr(said, "capture: a stream being captured was synchronized"));
    CU_ASSERT_PTR_NOT_NULL(strstr(said, "on a stream that did not begin a capture"));
    free(said);
    CU_ASSERT_EQUAL(D->graph_launch(g, s), HN_OK);
    CU_ASSERT_EQUAL(D->stream_sync(s), HN_OK);
    CU_ASSERT_EQUAL(v, 101);
    CU_ASSERT_EQUAL(w, 33000);
    D->graph_destroy(g);
    D->mem_free(ctx, 0, mem);
    D->event_destroy(fork);
    D->event_destroy(join);
    D->stream_destroy(s);
    D->stream_destroy(side);
    D->stream_destroy(other);
    D->fini(ctx);
}

void hn_suite_device_host(void)
{
    static CU_TestInfo tests[] = {
        {"issuing is asynchronous", test_asynchronous},
        {"a stream runs in issue order (with delays)", test_fifo_order},
        {"events and cross-device waits", test_cross_device_wait},
        {"waiting on an unrecorded event", test_unrecorded_event},
        {"copies in stream order", test_memcpy_order},
        {"timing markers", test_timers},
        {"capture and launches of a graph", test_capture_launch},
        {"a graph updated in place by a capture of the same work", test_capture_update},
        CU_TEST_INFO_NULL,
    };
    hn_test_add_suite("device/device_host", tests);
}
