/* CPU emulation device backend: each device is a set of host allocations,
 * each stream a worker thread draining a FIFO of closures. Issuing returns
 * before the work runs, events and cross-device waits are real, and an
 * optional random delay before each closure shakes out missing waits. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "arena.h"
#include "device.h"
#include "repoint.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

typedef enum {
    CL_FN,
    CL_WAIT,
    CL_COPY,
    CL_WRITE_FLAG,
    CL_WAIT_FLAG,
    CL_TIMER,
    CL_ADD
} closure_kind;

typedef struct closure {
    closure_kind kind;
    hn_host_fn fn;
    void *arg;
    size_t arg_bytes; /* > 0: arg is that many bytes of plain data, ours (hn_host_launch_job) */
    void (*release)(void *);
    hn_origin origin;
    hn_dstream *wait_stream;
    uint64_t wait_ticket;
    void *dst;
    const void *src;
    size_t n;
    uint32_t value;     /* flags */
    const uint32_t *ep; /* flags relative to ep[0] (graphs; ep[1]: abort), or NULL */
    struct closure *next;
} closure;

typedef struct host_ctx {
    int ndev;      /* devices 0 .. ndev - 1; the first `first` are other processes' */
    int first;
    hn_arena *arenas; /* [ndev] (process mode), or NULL */
    size_t capacity; /* bytes of each emulated device */
    size_t *used;    /* per device: bytes allocated */
    int *lost;       /* per device: its "context" is lost (an injected trap) */
    double delay_us;
    uint64_t seed;
    const hn_fault_sink *sink;
    pthread_mutex_t mu;
    uint64_t nstreams;
    /* flag writes wake flag waiters through the sink's bell (the world's,
     * which waiters in other processes see too), or this one without */
    hn_doorbell own_bell;
} host_ctx;

struct hn_dstream {
    host_ctx *ctx;
    int dev;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    closure *head, *tail;
    uint64_t issued, completed;
    int stop;
    uint64_t rng;
    hn_dgraph *capture; /* the graph its work goes into, or NULL (under mu) */
    int cap_idx;        /* its stream index in that graph */
};

struct hn_devent {
    pthread_mutex_t mu;
    hn_dstream *s;
    uint64_t ticket;
    hn_dgraph *cap; /* recorded by captured work of this graph (issuing thread only) */
    int cap_idx;    /* its event index in that graph */
};

/* A graph: the work issued while capturing, in issue order, each piece on
 * a stream index (0: the stream the capture began on) and events by index.
 * A launch issues it again in that order: index 0 onto the launch stream,
 * the others onto streams of the graph's own, events onto events of its
 * own, so the launch has the captured streams' concurrency and order. */
typedef enum { G_WORK, G_RECORD, G_WAIT } gop_kind;

typedef struct gop {
    gop_kind kind;
    int stream, event;
    closure *cl; /* G_WORK; G_WAIT: its origin only */
} gop;

struct hn_dgraph {
    host_ctx *c;
    int dev;
    hn_dstream **streams; /* captured: the streams; instantiated: [0] NULL, the graph's own */
    int nstreams;
    hn_devent **events; /* captured: the events; instantiated: the graph's own */
    int nevents;
    gop *ops;
    int nops, cap;
    hn_status_t bad; /* the first error of the capture */
    hn_repoint rp;   /* instantiated: what graph_repoint moves */
    /* what the graph keeps alive for an embedder's launches captured in it
     * (native_capture_keep): released when it goes */
    struct keep {
        void (*release)(void *arg);
        void *arg;
    } *keeps;
    int nkeeps;
};

/* the monotonic clock when the stream's worker reached the marker, in
 * nanoseconds; -1 until then (atomic) */
struct hn_dtimer {
    int64_t ns;
};

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int host_device_count(void) { return 1024; }

/* Half the machine's memory, shared by the emulated devices, at least
 * 64 MiB each. */
static size_t default_capacity(int ndev)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    size_t half = pages > 0 && page > 0 ? (size_t)pages / 2 * (size_t)page : (size_t)1 << 32;
    size_t each = half / (size_t)(ndev > 0 ? ndev : 1);
    return each < ((size_t)64 << 20) ? (size_t)64 << 20 : each;
}

static hn_status_t host_init(const hn_device_setup *setup, void **out)
{
    host_ctx *c = hn_calloc(1, sizeof(*c));
    if (c == NULL)
        return HN_ERR_NOMEM;
    c->first = setup->first;
    c->ndev = setup->first + setup->ndev;
    c->used = hn_calloc((size_t)c->ndev, sizeof(size_t));
    c->lost = hn_calloc((size_t)c->ndev, sizeof(int));
    if (setup->arena != NULL)
        c->arenas = hn_calloc((size_t)c->ndev, sizeof(hn_arena));
    if (c->used == NULL || c->lost == NULL || (setup->arena != NULL && c->arenas == NULL)) {
        hn_free(c->used);
        hn_free(c->lost);
        hn_free(c->arenas);
        hn_free(c);
        return HN_ERR_NOMEM;
    }
    c->capacity = setup->host_mem_bytes > 0 ? setup->host_mem_bytes : default_capacity(setup->ndev);
    if (c->arenas != NULL) {
        c->capacity = setup->arena_bytes;
        for (int i = 0; i < setup->ndev; i++)
            hn_arena_init(&c->arenas[setup->first + i], setup->arena[i], setup->arena_bytes);
    }
    c->delay_us = setup->host_delay_us;
    c->seed = setup->seed;
    c->sink = setup->sink;
    pthread_mutex_init(&c->mu, NULL);
    *out = c;
    return HN_OK;
}

static void host_fini(void *ctx)
{
    host_ctx *c = ctx;
    if (c == NULL)
        return;
    pthread_mutex_destroy(&c->mu);
    for (int d = c->first; c->arenas != NULL && d < c->ndev; d++)
        hn_arena_fini(&c->arenas[d]);
    hn_free(c->arenas);
    hn_free(c->used);
    hn_free(c->lost);
    hn_free(c);
}

static hn_status_t host_thread_init(void *ctx, int dev)
{
    (void)ctx;
    (void)dev;
    return HN_OK;
}

static void host_thread_fini(void *ctx, int dev)
{
    (void)ctx;
    (void)dev;
}

/* Every block starts with a header of 256 bytes (keeping cudaMalloc's
 * alignment) that remembers its size for the device's budget and how it
 * was mapped. */
#define BLOCK_HEADER 256
#define BLOCK_MAP_MIN ((size_t)1 << 20) /* larger blocks: mmap, populated */

typedef struct block_header {
    size_t rounded, total;
    int mapped;
} block_header;

enum { BLOCK_HEAP, BLOCK_MAPPED, BLOCK_ARENA };

/* p's block back to a; its whole pages back to the system (in every
 * process that maps them: the memory is shared) */
static void arena_give(hn_arena *a, char *p)
{
    size_t off = (size_t)((unsigned char *)p - a->base), page = 4096, bytes;
    hn_arena_give(a, p, &bytes);
    size_t lo = (off + page - 1) / page * page, hi = (off + bytes) / page * page;
    if (bytes > 0 && hi > lo)
        (void)madvise(a->base + lo, hi - lo, MADV_REMOVE);
}

static hn_status_t host_mem_alloc(void *ctx, int dev, size_t bytes, void **ptr)
{
    host_ctx *c = ctx;
    block_header h;
    size_t used;
    char *p;
    if (bytes > SIZE_MAX / 2 || dev < 0 || dev >= c->ndev) {
        HN_ERROR("host device %d: cannot allocate %zu bytes", dev, bytes);
        return HN_ERR_NOMEM;
    }
    /* whole 256-byte units, like cudaMalloc, and one spare unit past the end */
    h.rounded = (bytes + 255) / 256 * 256 + 256;
    h.total = h.rounded + BLOCK_HEADER;
    h.mapped = c->arenas != NULL ? BLOCK_ARENA : h.rounded >= BLOCK_MAP_MIN ? BLOCK_MAPPED : BLOCK_HEAP;
    used = __atomic_add_fetch(&c->used[dev], h.rounded, __ATOMIC_RELAXED);
    if (used > c->capacity) {
        __atomic_sub_fetch(&c->used[dev], h.rounded, __ATOMIC_RELAXED);
        /* the caller reports it, or gives cached buffers back and retries */
        HN_INFO("host device %d: out of memory: %zu bytes asked, %zu of %zu free (HIRNODE_HOST_MEM_MIB)",
                 dev, bytes, c->capacity - (used - h.rounded), c->capacity);
        return HN_ERR_NOMEM;
    }
    /* backed now, like device memory (the kernel populates large blocks at
     * once, far faster than page faults): a fresh buffer's first touch, and
     * under TSan its shadow's, belongs to the allocation between runs, not
     * to the first run's communication deadlines */
    if (h.mapped == BLOCK_ARENA) {
        p = dev >= c->first ? hn_arena_take(&c->arenas[dev], h.total) : NULL;
    } else if (h.mapped == BLOCK_MAPPED) {
        p = mmap(NULL, h.total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
        if (p == MAP_FAILED)
            p = NULL;
    } else {
        p = aligned_alloc(256, h.total);
    }
    if (p == NULL) {
        __atomic_sub_fetch(&c->used[dev], h.rounded, __ATOMIC_RELAXED);
        HN_ERROR("host device %d: cannot allocate %zu bytes", dev, bytes);
        return HN_ERR_NOMEM;
    }
    memcpy(p, &h, sizeof(h));
    memset(p + BLOCK_HEADER, 0, h.rounded);
    *ptr = p + BLOCK_HEADER;
    return HN_OK;
}

static void host_mem_free(void *ctx, int dev, void *ptr)
{
    host_ctx *c = ctx;
    char *p;
    block_header h;
    if (ptr == NULL)
        return;
    p = (char *)ptr - BLOCK_HEADER;
    memcpy(&h, p, sizeof(h));
    __atomic_sub_fetch(&c->used[dev], h.rounded, __ATOMIC_RELAXED);
    if (h.mapped == BLOCK_ARENA)
        arena_give(&c->arenas[dev], p);
    else if (h.mapped == BLOCK_MAPPED)
        munmap(p, h.total);
    else
        free(p);
}

/* Like DMA into device memory, aligned words are stored whole: a stream may
 * be waiting on a flag among them (the p2p communicator's abort raises
 * flags this way while streams wait on them). */
static hn_status_t host_copy_sync(void *ctx, int dev, void *dst, const void *src, size_t n)
{
    (void)ctx;
    (void)dev;
    if ((uintptr_t)dst % 4 == 0 && (uintptr_t)src % 4 == 0 && n % 4 == 0) {
        uint32_t *d = dst;
        const uint32_t *s = src;
        for (size_t i = 0; i < n / 4; i++)
            __atomic_store_n(&d[i], s[i], __ATOMIC_RELAXED);
    } else {
        memcpy(dst, src, n);
    }
    return HN_OK;
}

static void sleep_us(double us)
{
    struct timespec ts;
    if (us <= 0)
        return;
    ts.tv_sec = (time_t)(us / 1e6);
    ts.tv_nsec = (long)((us - (double)ts.tv_sec * 1e6) * 1e3);
    nanosleep(&ts, NULL);
}

static void deadline_in(struct timespec *ts, double s)
{
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_nsec += (long)(s * 1e9);
    ts->tv_sec += ts->tv_nsec / 1000000000L;
    ts->tv_nsec %= 1000000000L;
}

/* A wait on a GPU stream has no deadline of its own (the host's stream
 * sync has one); here a worker must not wait forever, but it gives up
 * later than the host-side waits of the same run, which know whom they
 * wait for and can name the rank that never came. */
static double device_wait_deadline(const closure *cl)
{
    double t = cl->origin.sink ? cl->origin.sink->timeout_s : 60.0;
    return t + (t / 2 > 1 ? t / 2 : 1);
}

/* A worker waits for another stream to reach a ticket (an event). */
static void run_wait(closure *cl)
{
    hn_dstream *src = cl->wait_stream;
    double start = hn_now();
    double timeout = device_wait_deadline(cl);
    pthread_mutex_lock(&src->mu);
    while (src->completed < cl->wait_ticket) {
        struct timespec ts;
        if (hn_origin_aborted(&cl->origin))
            break;
        if (hn_now() - start > timeout) {
            pthread_mutex_unlock(&src->mu);
            hn_origin_fail(&cl->origin, HN_ERR_TIMEOUT,
                           "stream wait timed out after %.0f s (device %d waits on device %d)",
                           timeout, cl->origin.rank, src->dev);
            return;
        }
        deadline_in(&ts, 0.05);
        pthread_cond_timedwait(&src->cv_done, &src->mu, &ts);
    }
    pthread_mutex_unlock(&src->mu);
}

/* the value a flag closure writes or waits for: relative ones add the
 * graph's epoch as it is when they run */
static uint32_t flag_value(const closure *cl)
{
    return cl->ep == NULL ? cl->value : cl->value + __atomic_load_n(&cl->ep[0], __ATOMIC_ACQUIRE);
}

/* The bell a flag closure's waiters sleep on: the world's, where the sink
 * names one, else the context's own. */
static hn_doorbell *flag_bell(host_ctx *c, const closure *cl)
{
    const hn_fault_sink *sk = cl->origin.sink != NULL ? cl->origin.sink : c->sink;
    return sk != NULL && sk->bell != NULL ? sk->bell : &c->own_bell;
}

static void run_write_flag(host_ctx *c, closure *cl)
{
    __atomic_store_n((uint32_t *)cl->dst, flag_value(cl), __ATOMIC_RELEASE);
    hn_doorbell_ring(flag_bell(c, cl));
}

/* Sleeps on the bell in slices, so that the abort word (a plain store
 * elsewhere) is seen within one. */
static void run_wait_flag(host_ctx *c, closure *cl)
{
    double start = hn_now();
    /* the run's deadline itself: a flag is what a peer's part signals, so
     * its wait is the one that knows what never came (an event wait after
     * it only echoes) */
    double timeout = cl->origin.sink ? cl->origin.sink->timeout_s : 60.0;
    uint32_t want = flag_value(cl);
    hn_doorbell *bell = flag_bell(c, cl);
    for (;;) {
        uint32_t seen = hn_doorbell_read(bell);
        if ((int32_t)(__atomic_load_n((const uint32_t *)cl->src, __ATOMIC_ACQUIRE) - want) >= 0)
            return;
        if (hn_origin_aborted(&cl->origin) || (cl->ep != NULL && __atomic_load_n(&cl->ep[1], __ATOMIC_ACQUIRE)))
            return;
        if (hn_now() - start > timeout) {
            hn_origin_fail(&cl->origin, HN_ERR_TIMEOUT,
                           "a peer never signalled: flag wait timed out after %.0f s (waiting for %u, "
                           "flag is %u)", timeout, want, __atomic_load_n((const uint32_t *)cl->src,
                                                                             __ATOMIC_ACQUIRE));
            return;
        }
        (void)hn_doorbell_wait(bell, seen, 0.05);
    }
}

static hn_status_t graph_fail(hn_dgraph *g, hn_status_t st, const char *what);

/* Work a stream holds queued at most before its issuer waits for room, as
 * a GPU's launch queue does: a loop of millions of instructions issued
 * faster than they run otherwise queued them all (3 GB for 2.4 million
 * trips of a 4-instruction loop on 2 ranks). A stream's own worker, or
 * another's, never waits: work that issues work must not wait on itself. */
#define HOST_QUEUE_MAX 65536
static __thread int is_worker;

static void *worker(void *arg)
{
    hn_dstream *s = arg;
    is_worker = 1;
    for (;;) {
        closure *cl;
        pthread_mutex_lock(&s->mu);
        while (s->head == NULL && !s->stop)
            pthread_cond_wait(&s->cv_work, &s->mu);
        if (s->head == NULL) {
            pthread_mutex_unlock(&s->mu);
            break;
        }
        cl = s->head;
        s->head = cl->next;
        if (s->head == NULL)
            s->tail = NULL;
        pthread_mutex_unlock(&s->mu);

        if (s->ctx->delay_us > 0)
            sleep_us((double)(hn_splitmix64(&s->rng) % 1000) / 1000.0 * s->ctx->delay_us);
        /* after a failure anywhere, queued work is dropped, not run */
        if (!hn_origin_aborted(&cl->origin)) {
            switch (cl->kind) {
            case CL_FN: cl->fn(cl->arg, &cl->origin); break;
            case CL_WAIT: run_wait(cl); break;
            case CL_COPY: memmove(cl->dst, cl->src, cl->n); break;
            case CL_WRITE_FLAG: run_write_flag(s->ctx, cl); break;
            case CL_WAIT_FLAG: run_wait_flag(s->ctx, cl); break;
            case CL_TIMER: __atomic_store_n(&((hn_dtimer *)cl->dst)->ns, now_ns(), __ATOMIC_RELEASE); break;
            case CL_ADD: __atomic_add_fetch((uint32_t *)cl->dst, cl->value, __ATOMIC_ACQ_REL); break;
            }
        }
        if (cl->release != NULL)
            cl->release(cl->arg);
        hn_free(cl);

        pthread_mutex_lock(&s->mu);
        s->completed++;
        pthread_cond_broadcast(&s->cv_done);
        pthread_mutex_unlock(&s->mu);
    }
    return NULL;
}

static hn_status_t host_stream_create(void *ctx, int dev, hn_dstream **out)
{
    host_ctx *c = ctx;
    hn_dstream *s = hn_calloc(1, sizeof(*s));
    if (s == NULL)
        return HN_ERR_NOMEM;
    s->ctx = c;
    s->dev = dev;
    pthread_mutex_lock(&c->mu);
    s->rng = c->seed ^ (0x1234567ull * ++c->nstreams);
    pthread_mutex_unlock(&c->mu);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv_work, NULL);
    pthread_cond_init(&s->cv_done, NULL);
    if (pthread_create(&s->thread, NULL, worker, s) != 0) {
        pthread_mutex_destroy(&s->mu);
        pthread_cond_destroy(&s->cv_work);
        pthread_cond_destroy(&s->cv_done);
        hn_free(s);
        HN_ERROR("host device %d: cannot start a stream worker", dev);
        return HN_ERR_DEVICE;
    }
    *out = s;
    return HN_OK;
}

static void host_stream_destroy(hn_dstream *s)
{
    if (s == NULL)
        return;
    pthread_mutex_lock(&s->mu);
    s->stop = 1;
    pthread_cond_signal(&s->cv_work);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv_work);
    pthread_cond_destroy(&s->cv_done);
    hn_free(s);
}

static hn_status_t host_stream_query(hn_dstream *s)
{
    int busy;
    pthread_mutex_lock(&s->mu);
    busy = s->completed < s->issued;
    pthread_mutex_unlock(&s->mu);
    return busy ? HN_ERR_BUSY : HN_OK;
}

static void *host_stream_native(hn_dstream *s) { return s; }

/* an embedder's host stream is one of this backend's streams already */
static hn_status_t host_stream_adopt(void *ctx, int dev, void *native, hn_dstream *like, hn_dstream **out)
{
    hn_dstream *s = native;
    (void)like;
    if (s == NULL || s->ctx != ctx || s->dev != dev) {
        HN_ERROR("host device %d: the stream given is not one of this backend's streams of that device", dev);
        return HN_ERR_INVALID;
    }
    *out = s;
    return HN_OK;
}

static void host_stream_release(hn_dstream *s) { (void)s; }

static hn_status_t host_stream_sync(hn_dstream *s)
{
    uint64_t target;
    pthread_mutex_lock(&s->mu);
    if (s->capture != NULL) { /* like CUDA: a capturing stream cannot be waited for */
        hn_dgraph *g = s->capture;
        pthread_mutex_unlock(&s->mu);
        return graph_fail(g, HN_ERR_INVALID, "a stream being captured was synchronized");
    }
    target = s->issued;
    while (s->completed < target)
        pthread_cond_wait(&s->cv_done, &s->mu);
    pthread_mutex_unlock(&s->mu);
    return HN_OK;
}

/* Appends an operation to a graph being captured; on failure the closure
 * is released and the capture fails at its end. */
static hn_status_t graph_append(hn_dgraph *g, gop_kind kind, int stream, int event, closure *cl)
{
    if (g->nops == g->cap) {
        int cap = g->cap ? g->cap * 2 : 64;
        gop *ops = hn_realloc(g->ops, (size_t)cap * sizeof(gop));
        if (ops == NULL) {
            if (cl != NULL && cl->release != NULL)
                cl->release(cl->arg);
            hn_free(cl);
            if (g->bad == HN_OK)
                g->bad = HN_ERR_NOMEM;
            return HN_ERR_NOMEM;
        }
        g->ops = ops;
        g->cap = cap;
    }
    g->ops[g->nops].kind = kind;
    g->ops[g->nops].stream = stream;
    g->ops[g->nops].event = event;
    g->ops[g->nops].cl = cl;
    g->nops++;
    return HN_OK;
}

static hn_status_t enqueue(hn_dstream *s, closure *cl)
{
    pthread_mutex_lock(&s->mu);
    while (!is_worker && s->capture == NULL && !s->stop && s->issued - s->completed >= HOST_QUEUE_MAX)
        pthread_cond_wait(&s->cv_done, &s->mu);
    if (s->capture != NULL) { /* captured, not run */
        hn_dgraph *g = s->capture;
        int idx = s->cap_idx;
        pthread_mutex_unlock(&s->mu);
        return graph_append(g, G_WORK, idx, -1, cl);
    }
    if (s->tail != NULL)
        s->tail->next = cl;
    else
        s->head = cl;
    s->tail = cl;
    s->issued++;
    pthread_cond_signal(&s->cv_work);
    pthread_mutex_unlock(&s->mu);
    return HN_OK;
}

static closure *new_closure(closure_kind kind, const hn_origin *o)
{
    closure *cl = hn_calloc(1, sizeof(*cl));
    if (cl == NULL)
        return NULL;
    cl->kind = kind;
    if (o != NULL)
        cl->origin = *o;
    return cl;
}

static hn_status_t host_event_create(void *ctx, int dev, hn_devent **out)
{
    hn_devent *e = hn_calloc(1, sizeof(*e));
    (void)ctx;
    (void)dev;
    if (e == NULL)
        return HN_ERR_NOMEM;
    pthread_mutex_init(&e->mu, NULL);
    *out = e;
    return HN_OK;
}

static void host_event_destroy(hn_devent *e)
{
    if (e == NULL)
        return;
    pthread_mutex_destroy(&e->mu);
    hn_free(e);
}

/* index of x in a graph's list, added if new; -1 if out of memory */
static int graph_index(void ***list, int *n, void *x)
{
    void **l;
    for (int i = 0; i < *n; i++)
        if ((*list)[i] == x)
            return i;
    if ((l = hn_realloc(*list, (size_t)(*n + 1) * sizeof(void *))) == NULL)
        return -1;
    l[*n] = x;
    *list = l;
    return (*n)++;
}

static hn_dgraph *capturing(hn_dstream *s, int *idx)
{
    hn_dgraph *g;
    pthread_mutex_lock(&s->mu);
    g = s->capture;
    *idx = s->cap_idx;
    pthread_mutex_unlock(&s->mu);
    return g;
}

static hn_status_t graph_fail(hn_dgraph *g, hn_status_t st, const char *what)
{
    if (g->bad == HN_OK) {
        HN_ERROR("host device %d: capture: %s", g->dev, what);
        g->bad = st;
    }
    return st;
}

static hn_status_t host_event_record(hn_devent *e, hn_dstream *s)
{
    int sidx, eidx;
    hn_dgraph *g = capturing(s, &sidx);
    if (g != NULL) {
        if ((eidx = graph_index((void ***)&g->events, &g->nevents, e)) < 0)
            return graph_fail(g, HN_ERR_NOMEM, "out of memory");
        e->cap = g;
        e->cap_idx = eidx;
        return graph_append(g, G_RECORD, sidx, eidx, NULL);
    }
    e->cap = NULL;
    pthread_mutex_lock(&s->mu);
    pthread_mutex_lock(&e->mu);
    e->s = s;
    e->ticket = s->issued;
    pthread_mutex_unlock(&e->mu);
    pthread_mutex_unlock(&s->mu);
    return HN_OK;
}

static int host_stream_capturing(hn_dstream *s)
{
    int idx;
    return capturing(s, &idx) != NULL;
}

/* An embedder's stream on this backend is the stream itself: a capture an
 * embedder began on it with capture_begin (the tests' stand-in for
 * torch.cuda.graph) */
static int host_native_capturing(void *native) { return native != NULL && host_stream_capturing(native); }

static hn_status_t host_native_capture_keep(void *native, void (*release)(void *arg), void *arg)
{
    int idx;
    hn_dgraph *g = native != NULL ? capturing(native, &idx) : NULL;
    struct keep *k;
    if (g == NULL || release == NULL)
        return HN_ERR_INVALID;
    if ((k = hn_realloc(g->keeps, (size_t)(g->nkeeps + 1) * sizeof(*k))) == NULL)
        return HN_ERR_NOMEM;
    g->keeps = k;
    g->keeps[g->nkeeps++] = (struct keep){release, arg};
    return HN_OK;
}

static hn_status_t host_event_query(hn_devent *e)
{
    hn_dstream *src;
    uint64_t ticket;
    int busy;
    pthread_mutex_lock(&e->mu);
    src = e->cap == NULL ? e->s : NULL; /* recorded in a capture: nothing ran */
    ticket = e->ticket;
    pthread_mutex_unlock(&e->mu);
    if (src == NULL)
        return HN_OK;
    pthread_mutex_lock(&src->mu);
    busy = src->completed < ticket;
    pthread_mutex_unlock(&src->mu);
    return busy ? HN_ERR_BUSY : HN_OK;
}

static hn_status_t host_stream_wait_event(hn_dstream *s, hn_devent *e, const hn_origin *o)
{
    closure *cl;
    hn_dstream *src;
    uint64_t ticket;
    int sidx;
    hn_dgraph *g = capturing(s, &sidx);
    if (e->cap != NULL) { /* recorded in a capture: s joins it */
        if (g == NULL) {
            pthread_mutex_lock(&s->mu);
            sidx = graph_index((void ***)&e->cap->streams, &e->cap->nstreams, s);
            if (sidx >= 0) {
                s->capture = e->cap;
                s->cap_idx = sidx;
            }
            pthread_mutex_unlock(&s->mu);
            if (sidx < 0)
                return graph_fail(e->cap, HN_ERR_NOMEM, "out of memory");
            g = e->cap;
        } else if (g != e->cap) {
            return graph_fail(g, HN_ERR_INVALID, "a wait on an event of another capture");
        }
        if ((cl = new_closure(CL_WAIT, o)) == NULL)
            return graph_fail(g, HN_ERR_NOMEM, "out of memory");
        return graph_append(g, G_WAIT, sidx, e->cap_idx, cl);
    }
    if (g != NULL)
        return graph_fail(g, HN_ERR_INVALID, "a captured wait on an event recorded outside the capture");
    pthread_mutex_lock(&e->mu);
    src = e->s;
    ticket = e->ticket;
    pthread_mutex_unlock(&e->mu);
    if (src == NULL) /* never recorded: like CUDA, nothing to wait for */
        return HN_OK;
    if ((cl = new_closure(CL_WAIT, o)) == NULL)
        return HN_ERR_NOMEM;
    cl->wait_stream = src;
    cl->wait_ticket = ticket;
    return enqueue(s, cl);
}

static hn_status_t host_memcpy_async(void *dst, const void *src, size_t n, hn_dstream *s,
                                     const hn_origin *o)
{
    closure *cl = new_closure(CL_COPY, o);
    if (cl == NULL)
        return HN_ERR_NOMEM;
    cl->dst = dst;
    cl->src = src;
    cl->n = n;
    return enqueue(s, cl);
}

/* A flag closure: absolute (base NULL) or relative to base[0] (graphs) */
static hn_status_t flag_closure(closure_kind kind, hn_dstream *s, const uint32_t *addr, uint32_t value,
                                const uint32_t *base, const hn_origin *o)
{
    closure *cl = new_closure(kind, o);
    if (cl == NULL)
        return HN_ERR_NOMEM;
    if (kind == CL_WRITE_FLAG)
        cl->dst = (uint32_t *)addr;
    else
        cl->src = addr;
    cl->value = value;
    cl->ep = base;
    return enqueue(s, cl);
}

static hn_status_t host_write_flag(hn_dstream *s, uint32_t *addr, uint32_t value, const hn_origin *o)
{
    return flag_closure(CL_WRITE_FLAG, s, addr, value, NULL, o);
}

static hn_status_t host_wait_flag(hn_dstream *s, const uint32_t *addr, uint32_t value, const hn_origin *o)
{
    return flag_closure(CL_WAIT_FLAG, s, addr, value, NULL, o);
}

static hn_status_t host_write_flag_rel(hn_dstream *s, uint32_t *addr, uint32_t value, const uint32_t *base,
                                       const hn_origin *o)
{
    return flag_closure(CL_WRITE_FLAG, s, addr, value, base, o);
}

static hn_status_t host_wait_flag_rel(hn_dstream *s, const uint32_t *addr, uint32_t value, const uint32_t *base,
                                      const hn_origin *o)
{
    return flag_closure(CL_WAIT_FLAG, s, addr, value, base, o);
}

static hn_status_t host_add_u32(hn_dstream *s, uint32_t *addr, uint32_t value, const hn_origin *o)
{
    closure *cl = new_closure(CL_ADD, o);
    if (cl == NULL)
        return HN_ERR_NOMEM;
    cl->dst = addr;
    cl->value = value;
    return enqueue(s, cl);
}

/* ---- graphs ---- */

static hn_status_t host_capture_begin(hn_dstream *s)
{
    hn_dgraph *g;
    int idx;
    if (capturing(s, &idx) != NULL) {
        HN_ERROR("host device %d: the stream is being captured already", s->dev);
        return HN_ERR_INVALID;
    }
    if ((g = hn_calloc(1, sizeof(*g))) == NULL)
        return HN_ERR_NOMEM;
    g->c = s->ctx;
    g->dev = s->dev;
    if (graph_index((void ***)&g->streams, &g->nstreams, s) < 0) {
        hn_free(g);
        return HN_ERR_NOMEM;
    }
    pthread_mutex_lock(&s->mu);
    s->capture = g;
    s->cap_idx = 0;
    pthread_mutex_unlock(&s->mu);
    return HN_OK;
}

/* The work a capture recorded, freed; an instantiated graph's own streams
 * and events go first (host_graph_destroy), a capture's are the captured
 * ones, not its own. */
static void captured_free(hn_dgraph *g)
{
    for (int i = 0; i < g->nkeeps; i++)
        g->keeps[i].release(g->keeps[i].arg);
    hn_free(g->keeps);
    for (int i = 0; i < g->nops; i++)
        if (g->ops[i].cl != NULL) {
            if (g->ops[i].cl->release != NULL)
                g->ops[i].cl->release(g->ops[i].cl->arg);
            hn_free(g->ops[i].cl);
        }
    hn_free(g->streams);
    hn_free(g->events);
    hn_free(g->ops);
    hn_free(g);
}

static void host_graph_destroy(hn_dgraph *g)
{
    if (g == NULL)
        return;
    hn_repoint_free(&g->rp);
    for (int k = 1; k < g->nstreams; k++)
        host_stream_destroy(g->streams[k]); /* drains it first */
    for (int i = 0; i < g->nevents; i++)
        host_event_destroy(g->events[i]);
    captured_free(g);
}

/* The capture ends on the stream it began on; every other stream of it
 * must have been joined back: its last operation an event record that a
 * later operation waits for (CUDA's rule, which keeps a launch whole).
 * The recorded work, not yet instantiated; NULL with the error. */
static hn_dgraph *capture_finish(hn_dstream *s, hn_status_t *st)
{
    int idx;
    hn_dgraph *g = capturing(s, &idx);
    if (g == NULL || idx != 0) {
        HN_ERROR("host device %d: capture_end on a stream that did not begin a capture", s->dev);
        *st = HN_ERR_INVALID;
        return NULL;
    }
    for (int k = 0; k < g->nstreams; k++) {
        pthread_mutex_lock(&g->streams[k]->mu);
        g->streams[k]->capture = NULL;
        pthread_mutex_unlock(&g->streams[k]->mu);
    }
    for (int i = 0; i < g->nevents; i++)
        g->events[i]->cap = NULL;
    for (int k = 1; k < g->nstreams && g->bad == HN_OK; k++) {
        int last = -1, joined = 0;
        for (int i = 0; i < g->nops; i++)
            if (g->ops[i].stream == k)
                last = i;
        for (int i = last + 1; i < g->nops && last >= 0 && g->ops[last].kind == G_RECORD; i++)
            joined |= g->ops[i].kind == G_WAIT && g->ops[i].event == g->ops[last].event;
        if (!joined)
            graph_fail(g, HN_ERR_INVALID, "a stream of the capture was not joined back into its origin");
    }
    if ((*st = g->bad) != HN_OK) {
        captured_free(g);
        return NULL;
    }
    return g;
}

static hn_status_t host_capture_end(hn_dstream *s, hn_dgraph **out)
{
    hn_status_t st;
    hn_dgraph *g = capture_finish(s, &st);
    *out = NULL;
    if (g == NULL)
        return st;
    /* instantiate: streams and events of its own */
    g->streams[0] = NULL;
    for (int k = 1; k < g->nstreams; k++)
        g->streams[k] = NULL;
    for (int i = 0; i < g->nevents; i++)
        g->events[i] = NULL;
    for (int k = 1; k < g->nstreams && g->bad == HN_OK; k++)
        if ((st = host_stream_create(g->c, g->dev, &g->streams[k])) != HN_OK)
            g->bad = st;
    for (int i = 0; i < g->nevents && g->bad == HN_OK; i++)
        if ((st = host_event_create(g->c, g->dev, &g->events[i])) != HN_OK)
            g->bad = st;
    if ((st = g->bad) != HN_OK) {
        host_graph_destroy(g);
        return st;
    }
    *out = g;
    return HN_OK;
}

/* ---- rebinding in place: an image of every operation (repoint.h) ---- */

/* the words of an operation's image; an argument of plain data follows */
enum { IM_KIND, IM_STREAM, IM_EVENT, IM_CL, IM_CL_KIND, IM_FN, IM_RELEASE, IM_DST, IM_SRC, IM_N, IM_VALUE, IM_EP,
       IM_WAIT, IM_ARG_BYTES, IM_ARG, IM_HEAD };

static uint64_t word_of_fn(const void *fnp, size_t n)
{
    uint64_t w = 0;
    memcpy(&w, fnp, n < sizeof(w) ? n : sizeof(w));
    return w;
}

static int images_of(const hn_dgraph *g, hn_images *im)
{
    uint64_t *buf = NULL;
    size_t cap = 0;
    int rc = 0;
    for (int i = 0; i < g->nops && rc == 0; i++) {
        const gop *op = &g->ops[i];
        const closure *cl = op->cl;
        size_t need = IM_HEAD * sizeof(uint64_t) + (cl != NULL ? cl->arg_bytes : 0);
        if (need > cap) {
            uint64_t *p = hn_realloc(buf, need);
            if (p == NULL) {
                rc = -1;
                break;
            }
            buf = p;
            cap = need;
        }
        memset(buf, 0, IM_HEAD * sizeof(uint64_t));
        buf[IM_KIND] = (uint64_t)op->kind;
        buf[IM_STREAM] = (uint64_t)op->stream;
        buf[IM_EVENT] = (uint64_t)(int64_t)op->event;
        if (cl != NULL) {
            buf[IM_CL] = 1;
            buf[IM_CL_KIND] = (uint64_t)cl->kind;
            buf[IM_FN] = word_of_fn(&cl->fn, sizeof(cl->fn));
            buf[IM_RELEASE] = word_of_fn(&cl->release, sizeof(cl->release));
            buf[IM_DST] = (uintptr_t)cl->dst;
            buf[IM_SRC] = (uintptr_t)cl->src;
            buf[IM_N] = cl->n;
            buf[IM_VALUE] = cl->value;
            buf[IM_EP] = (uintptr_t)cl->ep;
            buf[IM_WAIT] = (uintptr_t)cl->wait_stream;
            buf[IM_ARG_BYTES] = cl->arg_bytes;
            buf[IM_ARG] = cl->arg_bytes > 0 ? 0 : (uintptr_t)cl->arg; /* opaque: learns nothing */
            if (cl->arg_bytes > 0)
                memcpy(buf + IM_HEAD, cl->arg, cl->arg_bytes);
        }
        rc = hn_images_add(im, buf, need);
    }
    hn_free(buf);
    return rc;
}

/* Whether every pointer learned lies where graph_repoint can write it. */
static int slots_writable(const hn_dgraph *g)
{
    for (int i = 0; i < g->rp.nslots; i++) {
        const hn_slot *sl = &g->rp.slots[i];
        size_t k = sl->word - g->rp.cur.at[sl->node];
        const closure *cl = g->ops[sl->node].cl;
        if (cl == NULL || !(k == IM_DST || k == IM_SRC || (k >= IM_HEAD && cl->arg_bytes > 0)))
            return 0;
    }
    return 1;
}

/* g's operations now the new capture's: learns from their images against
 * the ones before (taken first from g's old operations, when g has none). */
static void learn(hn_dgraph *g, const hn_moved *m, int nm)
{
    hn_images next = {0};
    const char *why = NULL;
    int rc = images_of(g, &next);
    if (rc == 0)
        rc = hn_repoint_learn(&g->rp, &next, m, nm, &why);
    hn_images_free(&next);
    if (rc == 1 && !slots_writable(g)) {
        rc = 0;
        why = "a pointer lies where the operation cannot take another";
    }
    if (rc != 1) {
        int at = g->rp.bad_node;
        HN_INFO("host device %d: a rebind cannot move this graph's pointers in place: %s (operation %d of %d, "
                "kind %d, word %d)", g->dev, why != NULL ? why : "out of memory", at, g->nops,
                at >= 0 && at < g->nops && g->ops[at].cl != NULL ? (int)g->ops[at].cl->kind : -1, g->rp.bad_word);
        hn_repoint_free(&g->rp); /* images too: the next learning reads the graph again */
    }
}

/* Like cudaGraphExecUpdate: the same operations on the same stream and
 * event indices, each piece of work of the same kind and function; then
 * g takes the new work's closures (their arguments: the new buffers) and
 * the old ones are released with the capture. */
static hn_status_t host_capture_update(hn_dstream *s, hn_dgraph *g, const hn_moved *m, int nm)
{
    hn_status_t st;
    hn_dgraph *ng = capture_finish(s, &st);
    int same;
    if (ng == NULL)
        return st;
    same = ng->dev == g->dev && ng->nops == g->nops && ng->nstreams == g->nstreams && ng->nevents == g->nevents;
    for (int i = 0; i < g->nops && same; i++) {
        const gop *a = &g->ops[i], *b = &ng->ops[i];
        same = a->kind == b->kind && a->stream == b->stream && a->event == b->event &&
               (a->cl == NULL) == (b->cl == NULL);
        if (same && a->kind == G_WORK)
            same = a->cl->kind == b->cl->kind && a->cl->fn == b->cl->fn && a->cl->release == b->cl->release;
    }
    if (!same) {
        HN_INFO("host device %d: the new capture's structure differs from the graph's (%d operations, %d "
                "before): not updated", g->dev, ng->nops, g->nops);
        captured_free(ng);
        return HN_ERR_UNSUPPORTED;
    }
    if (m == NULL)
        hn_repoint_free(&g->rp);
    else if (g->rp.cur.n == 0 && images_of(g, &g->rp.cur) != 0)
        hn_images_free(&g->rp.cur);
    for (int i = 0; i < g->nops; i++) {
        closure *cl = g->ops[i].cl;
        g->ops[i].cl = ng->ops[i].cl;
        ng->ops[i].cl = cl;
    }
    captured_free(ng);
    if (m != NULL)
        learn(g, m, nm);
    return HN_OK;
}

static hn_status_t host_graph_repoint(hn_dgraph *g, const hn_moved *m, int nm, int check)
{
    unsigned char *changed = NULL;
    const char *why = "nothing learned";
    if (!check && (changed = hn_calloc((size_t)g->nops + 1, 1)) == NULL)
        return HN_ERR_NOMEM;
    if (g->rp.cur.n != g->nops || hn_repoint_move(&g->rp, m, nm, changed, &why) != 1) {
        HN_DEBUG("host device %d: a rebind captures again: %s", g->dev, why);
        hn_free(changed);
        return HN_ERR_UNSUPPORTED;
    }
    for (int i = 0; i < g->nops && changed != NULL; i++) {
        const uint64_t *w = g->rp.cur.w + g->rp.cur.at[i];
        closure *cl = g->ops[i].cl;
        if (!changed[i])
            continue;
        cl->dst = (void *)(uintptr_t)w[IM_DST];
        cl->src = (const void *)(uintptr_t)w[IM_SRC];
        if (cl->arg_bytes > 0)
            memcpy(cl->arg, w + IM_HEAD, cl->arg_bytes);
    }
    hn_free(changed);
    return HN_OK;
}

static hn_status_t host_graph_launch(hn_dgraph *g, hn_dstream *s)
{
    hn_status_t st = HN_OK;
    int idx;
    if (s->dev != g->dev || capturing(s, &idx) != NULL) {
        HN_ERROR("host device %d: a graph of device %d is launched on a stream of device %d%s", s->dev, g->dev,
                 s->dev, s->dev == g->dev ? " that is being captured" : "");
        return HN_ERR_INVALID;
    }
    for (int i = 0; i < g->nops && st == HN_OK; i++) {
        const gop *op = &g->ops[i];
        hn_dstream *on = op->stream == 0 ? s : g->streams[op->stream];
        closure *cl;
        switch (op->kind) {
        case G_RECORD: st = host_event_record(g->events[op->event], on); break;
        case G_WAIT: st = host_stream_wait_event(on, g->events[op->event], &op->cl->origin); break;
        case G_WORK:
            if ((cl = hn_malloc(sizeof(*cl))) == NULL) {
                st = HN_ERR_NOMEM;
                break;
            }
            *cl = *op->cl;
            cl->release = NULL; /* the graph keeps the argument */
            cl->next = NULL;
            st = enqueue(on, cl);
            break;
        }
    }
    return st;
}

static hn_status_t host_launch(hn_dstream *s, hn_host_fn fn, void *arg, void (*release)(void *),
                               const hn_origin *o)
{
    closure *cl = new_closure(CL_FN, o);
    if (cl == NULL) {
        if (release != NULL)
            release(arg);
        return HN_ERR_NOMEM;
    }
    cl->fn = fn;
    cl->arg = arg;
    cl->release = release;
    return enqueue(s, cl);
}

hn_status_t hn_host_launch_job(hn_dstream *s, hn_host_fn fn, const void *arg, size_t nbytes, const hn_origin *o)
{
    closure *cl = new_closure(CL_FN, o);
    void *copy = hn_malloc(nbytes > 0 ? nbytes : 1);
    if (cl == NULL || copy == NULL) {
        hn_free(cl);
        hn_free(copy);
        return HN_ERR_NOMEM;
    }
    memcpy(copy, arg, nbytes);
    cl->fn = fn;
    cl->arg = copy;
    cl->arg_bytes = nbytes;
    cl->release = hn_free;
    return enqueue(s, cl);
}

static void host_recover(void *ctx) { (void)ctx; }

static hn_status_t host_health(void *ctx, int dev, char *why, size_t n)
{
    host_ctx *c = ctx;
    if (dev < 0 || dev >= c->ndev || !__atomic_load_n(&c->lost[dev], __ATOMIC_ACQUIRE))
        return HN_OK;
    snprintf(why, n, "device %d trapped (an injected fault): its context is lost", dev);
    return HN_ERR_DEVICE_LOST;
}

static hn_status_t host_mem_info(void *ctx, int dev, size_t *free_bytes, size_t *total_bytes)
{
    host_ctx *c = ctx;
    size_t used = dev >= 0 && dev < c->ndev ? __atomic_load_n(&c->used[dev], __ATOMIC_RELAXED) : 0;
    *total_bytes = c->capacity;
    *free_bytes = used < c->capacity ? c->capacity - used : 0;
    return HN_OK;
}

typedef struct injected {
    host_ctx *c;
    int dev, sticky;
} injected;

static hn_status_t run_injected(void *arg, const hn_origin *o)
{
    injected *j = arg;
    if (j->sticky) {
        /* like a trapping kernel: the device is gone for every later call */
        __atomic_store_n(&j->c->lost[j->dev], 1, __ATOMIC_RELEASE);
        hn_origin_fail(o, HN_ERR_DEVICE_LOST, "device %d trapped (injected): its context is lost", j->dev);
        return HN_ERR_DEVICE_LOST;
    }
    hn_origin_fail(o, HN_ERR_DEVICE, "an asynchronous device error (injected)");
    return HN_ERR_DEVICE;
}

static hn_status_t host_inject_fault(hn_dstream *s, int sticky, const hn_origin *o)
{
    injected *j = hn_malloc(sizeof(*j));
    if (j == NULL)
        return HN_ERR_NOMEM;
    j->c = s->ctx;
    j->dev = s->dev;
    j->sticky = sticky;
    return host_launch(s, run_injected, j, hn_free, o);
}

static hn_status_t host_timer_create(void *ctx, int dev, hn_dtimer **out)
{
    hn_dtimer *t = hn_calloc(1, sizeof(*t));
    (void)ctx;
    (void)dev;
    if (t == NULL)
        return HN_ERR_NOMEM;
    t->ns = -1;
    *out = t;
    return HN_OK;
}

static void host_timer_destroy(hn_dtimer *t) { hn_free(t); }

/* the marker is a closure of its own: its time is when the worker gets to it */
static hn_status_t host_timer_record(hn_dtimer *t, hn_dstream *s, const hn_origin *o)
{
    closure *cl = new_closure(CL_TIMER, o);
    if (cl == NULL)
        return HN_ERR_NOMEM;
    __atomic_store_n(&t->ns, (int64_t)-1, __ATOMIC_RELAXED);
    cl->dst = t;
    return enqueue(s, cl);
}

static hn_status_t host_timer_elapsed(const hn_dtimer *from, const hn_dtimer *to, double *seconds)
{
    int64_t a = __atomic_load_n(&from->ns, __ATOMIC_ACQUIRE), b = __atomic_load_n(&to->ns, __ATOMIC_ACQUIRE);
    if (a < 0 || b < 0)
        return HN_ERR_RUNTIME;
    *seconds = (double)(b - a) * 1e-9;
    return HN_OK;
}

static hn_status_t host_timer_host_ns(const hn_dtimer *t, int64_t *ns)
{
    int64_t v = __atomic_load_n(&t->ns, __ATOMIC_ACQUIRE);
    if (v < 0)
        return HN_ERR_RUNTIME;
    *ns = v;
    return HN_OK;
}

/* ---- memory shared across processes: memfds, mapped at one address ---- */

static void *share_reserve(int ord, void *at, size_t bytes)
{
    int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | (at != NULL ? MAP_FIXED_NOREPLACE : 0);
    void *p = mmap(at, bytes, PROT_NONE, flags, -1, 0);
    (void)ord;
    if (p == MAP_FAILED)
        return NULL;
    if (at != NULL && p != at) { /* a kernel that takes the flag as a hint */
        munmap(p, bytes);
        return NULL;
    }
    return p;
}

static void share_unreserve(int ord, void *p, size_t bytes)
{
    (void)ord;
    munmap(p, bytes);
}

static int share_make(int ord, size_t bytes, uint64_t *handle)
{
    int fd = memfd_create("hirnode-device", MFD_CLOEXEC);
    (void)ord;
    *handle = 0;
    if (fd >= 0 && ftruncate(fd, (off_t)bytes) != 0) { /* sparse: backed where written */
        close(fd);
        fd = -1;
    }
    return fd;
}

static void share_unmake(int ord, uint64_t handle)
{
    (void)ord;
    (void)handle; /* the memfd goes with its last mapping */
}

static hn_status_t share_map(int ord, int fd, void *p, size_t bytes)
{
    (void)ord;
    return mmap(p, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) == MAP_FAILED ? HN_ERR_NOMEM
                                                                                                : HN_OK;
}

static void share_unmap(int ord, void *p, size_t bytes)
{
    (void)ord;
    /* back to a reservation: unreserve ends it */
    (void)mmap(p, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
}

/* each device's capacity, as in one process of `world` devices */
static size_t share_default_bytes(int world, size_t host_mem_bytes)
{
    return host_mem_bytes > 0 ? host_mem_bytes : default_capacity(world);
}

/* no caller memory across processes: a process's heap is its own */
static const hn_share_ops host_share = {share_reserve, share_unreserve,     share_make, share_unmake,
                                        share_map,     share_unmap,         share_default_bytes,
                                        NULL,          NULL,                NULL,       NULL};

const hn_device_ops hn_device_host = {
    .name = "host",
    .comm = "host",
    .kind = HN_DEVICE_KIND_HOST,
    .emulated = 1,
    .default_via_auto = 0,
    .visible_env = NULL,
    .device_count = host_device_count,
    .init = host_init,
    .fini = host_fini,
    .thread_init = host_thread_init,
    .thread_fini = host_thread_fini,
    .mem_alloc = host_mem_alloc,
    .mem_free = host_mem_free,
    .copy_to_device = host_copy_sync,
    .copy_to_host = host_copy_sync,
    .stream_create = host_stream_create,
    .stream_destroy = host_stream_destroy,
    .stream_sync = host_stream_sync,
    .stream_query = host_stream_query,
    .stream_native = host_stream_native,
    .stream_adopt = host_stream_adopt,
    .stream_release = host_stream_release,
    .event_create = host_event_create,
    .event_destroy = host_event_destroy,
    .event_record = host_event_record,
    .event_query = host_event_query,
    .stream_capturing = host_stream_capturing,
    .native_capturing = host_native_capturing,
    .native_capture_keep = host_native_capture_keep,
    .stream_wait_event = host_stream_wait_event,
    .memcpy_async = host_memcpy_async,
    .stream_write_flag = host_write_flag,
    .stream_wait_flag = host_wait_flag,
    .stream_write_flag_rel = host_write_flag_rel,
    .stream_wait_flag_rel = host_wait_flag_rel,
    .stream_add_u32 = host_add_u32,
    .capture_begin = host_capture_begin,
    .capture_end = host_capture_end,
    .graph_launch = host_graph_launch,
    .graph_destroy = host_graph_destroy,
    .capture_update = host_capture_update,
    .graph_repoint = host_graph_repoint,
    .launch_host = host_launch,
    .recover = host_recover,
    .health = host_health,
    .mem_info = host_mem_info,
    .inject_fault = host_inject_fault,
    .timer_create = host_timer_create,
    .timer_destroy = host_timer_destroy,
    .timer_record = host_timer_record,
    .timer_elapsed = host_timer_elapsed,
    .timer_host_ns = host_timer_host_ns,
    .share = &host_share,
};
