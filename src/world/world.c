/* The world's shared state (world.h): the abort word, the error slot, the
 * exchange board and the shared regions' heap. The block and the board
 * are written as if other processes mapped them: only atomics and the
 * doorbell, and every wait bounded by the world's timeout. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "net.h"
#include "world.h"

/* ---- layout ---- */

#define WORLD_MAGIC 0x686e776cu /* "hnwl" */
#define WORLD_VERSION 1u
#define ALIGN 64
#define MASK_WORDS (HN_WORLD_MAX_RANKS / 64)
/* rounds of a wait that only yield before it sleeps on the doorbell */
#define YIELDS 64
/* the longest sleep of a wait between two looks at the abort word */
#define SLICE_S 0.05

enum { ECHO, FAILURE, LEVELS }; /* the error slot's levels: an "aborted" echo, a real failure */

typedef struct error_part {
    uint32_t claim; /* 0 free, 1 taken by a post */
    uint32_t ready; /* 1 once the taker wrote what follows */
    int32_t status, rank, instr;
    char text[HN_WORLD_ERROR_TEXT];
} error_part;

/* what every rank maps (here: this process's heap) */
typedef struct world_block {
    uint32_t magic, version, n;
    int abort;        /* hn_fault_sink.abort_flag points here */
    uint64_t dead[MASK_WORDS]; /* rank r's process is gone: bit r */
    hn_doorbell bell; /* rung by every change below */
    error_part err[LEVELS];
} world_block;

/* One rank's slot of the exchange board. gen counts the exchanges it
 * entered; read, left and failed hold the gen of the last one whose data
 * it copied out, that it left, that it gave up. In an exchange: left <
 * gen. tag, mask and bytes describe the exchange it is in; peers read them
 * while it may change them (when the exchange is not theirs), so they are
 * atomics under a sequence lock (tseq: odd while the owner changes them
 * and gen), read as one picture with gen. data is moved in atomic words:
 * a member that gave an exchange up may start the next one while a peer
 * still copies, and the peer then finds the copy torn by gen (below). */
typedef struct board_slot {
    uint32_t gen, read, left, failed, tseq, pad0;
    uint64_t tag;
    uint64_t bytes;
    uint64_t mask[MASK_WORDS];
    char pad[ALIGN - (6 * 4 + 2 * 8 + MASK_WORDS * 8) % ALIGN];
    uint64_t data[HN_WORLD_XCHG_BYTES / 8];
} board_slot;

static void slot_put(board_slot *s, const void *src, size_t bytes)
{
    for (size_t i = 0; i * 8 < bytes; i++) {
        uint64_t v = 0;
        memcpy(&v, (const unsigned char *)src + i * 8, HN_MIN((size_t)8, bytes - i * 8));
        __atomic_store_n(&s->data[i], v, __ATOMIC_RELAXED);
    }
}

static void slot_get(const board_slot *s, void *dst, size_t bytes)
{
    for (size_t i = 0; i * 8 < bytes; i++) {
        uint64_t v = __atomic_load_n(&s->data[i], __ATOMIC_RELAXED);
        memcpy((unsigned char *)dst + i * 8, &v, HN_MIN((size_t)8, bytes - i * 8));
    }
}

typedef struct region {
    size_t off, bytes;
    uint64_t key;
} region;

struct hn_world {
    world_block *b;
    board_slot *board; /* [n] */
    int n;
    double timeout_s;
    /* this process's own: seen[p * n + q], the gen of q at the last
     * exchange rank p finished with it (only p's thread touches row p) */
    uint32_t *seen;
    /* the shared regions: memory, and this process's bookkeeping */
    unsigned char *shared;
    size_t shared_bytes;
    pthread_mutex_t shared_mu;
    region *regions; /* in use, sorted by offset */
    int nregions, regions_cap;
    uint64_t shared_hash;
    int attached; /* the memory is the caller's (hn_world_attach) */
    size_t bump;  /* attached: the shared regions' end so far */
    /* a world across nodes (hn_world_set_net): rank r on node r / per_node */
    hn_net *net;
    int per_node;
};

/* The block, the board and the shared regions laid out from base: where
 * each begins (64-byte aligned; the regions page-aligned). */
static size_t board_at(void) { return (sizeof(world_block) + ALIGN - 1) / ALIGN * ALIGN; }
static size_t shared_at(int n)
{
    size_t end = board_at() + (size_t)n * sizeof(board_slot), page = 4096;
    return (end + page - 1) / page * page;
}

size_t hn_world_bytes(int n, size_t shared_bytes) { return shared_at(n) + shared_bytes; }

static hn_world *world_new(int n, double timeout_s)
{
    hn_world *w = hn_calloc(1, sizeof(*w));
    if (w == NULL)
        return NULL;
    w->n = n;
    w->timeout_s = timeout_s;
    if ((w->seen = hn_calloc((size_t)n * (size_t)n, sizeof(*w->seen))) == NULL) {
        hn_free(w);
        return NULL;
    }
    pthread_mutex_init(&w->shared_mu, NULL);
    return w;
}

hn_status_t hn_world_create_local(int n, double timeout_s, size_t shared_bytes, hn_world **out)
{
    hn_world *w;
    if (n < 1 || n > HN_WORLD_MAX_RANKS || !(timeout_s > 0) || out == NULL)
        return HN_ERR_INVALID;
    if ((w = world_new(n, timeout_s)) == NULL)
        return HN_ERR_NOMEM;
    w->b = hn_calloc(1, sizeof(*w->b));
    w->board = hn_calloc((size_t)n, sizeof(*w->board));
    if (w->b == NULL || w->board == NULL)
        goto nomem;
    if (shared_bytes > 0) {
        /* reserved, not committed: pages are zero and backed when touched */
        void *p = mmap(NULL, shared_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                       -1, 0);
        if (p == MAP_FAILED)
            goto nomem;
        w->shared = p;
        w->shared_bytes = shared_bytes;
    }
    w->b->magic = WORLD_MAGIC;
    w->b->version = WORLD_VERSION;
    w->b->n = (uint32_t)n;
    *out = w;
    return HN_OK;
nomem:
    hn_world_destroy(w);
    return HN_ERR_NOMEM;
}

hn_status_t hn_world_attach(int n, double timeout_s, size_t shared_bytes, void *base, int first, hn_world **out)
{
    hn_world *w;
    world_block *b = base;
    if (n < 1 || n > HN_WORLD_MAX_RANKS || !(timeout_s > 0) || base == NULL || out == NULL)
        return HN_ERR_INVALID;
    if (first) {
        b->n = (uint32_t)n;
        b->version = WORLD_VERSION;
        __atomic_store_n(&b->magic, WORLD_MAGIC, __ATOMIC_RELEASE);
    } else {
        /* the first process stamps it once it is there itself */
        double end = hn_now() + timeout_s;
        while (__atomic_load_n(&b->magic, __ATOMIC_ACQUIRE) == 0 && hn_now() < end) {
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
        if (__atomic_load_n(&b->magic, __ATOMIC_ACQUIRE) != WORLD_MAGIC || b->version != WORLD_VERSION ||
            b->n != (uint32_t)n)
            return __atomic_load_n(&b->magic, __ATOMIC_ACQUIRE) == 0 ? HN_ERR_TIMEOUT : HN_ERR_MISMATCH;
    }
    if ((w = world_new(n, timeout_s)) == NULL)
        return HN_ERR_NOMEM;
    w->attached = 1;
    w->b = b;
    w->board = (board_slot *)((unsigned char *)base + board_at());
    w->shared = shared_bytes > 0 ? (unsigned char *)base + shared_at(n) : NULL;
    w->shared_bytes = shared_bytes;
    *out = w;
    return HN_OK;
}

void hn_world_destroy(hn_world *w)
{
    if (w == NULL)
        return;
    if (!w->attached) {
        if (w->shared != NULL)
            munmap(w->shared, w->shared_bytes);
        hn_free(w->b);
        hn_free(w->board);
    }
    pthread_mutex_destroy(&w->shared_mu);
    hn_free(w->regions);
    hn_free(w->seen);
    hn_free(w);
}

int hn_world_size(const hn_world *w) { return w->n; }

/* ---- abort word and doorbell ---- */

const int *hn_world_abort_word(const hn_world *w) { return &w->b->abort; }

void hn_world_abort(hn_world *w)
{
    __atomic_store_n(&w->b->abort, 1, __ATOMIC_RELEASE);
    hn_doorbell_ring(&w->b->bell);
}

int hn_world_aborted(const hn_world *w) { return __atomic_load_n(&w->b->abort, __ATOMIC_ACQUIRE) != 0; }

hn_doorbell *hn_world_bell(hn_world *w) { return &w->b->bell; }

void hn_world_mark_dead(hn_world *w, int rank)
{
    if (rank < 0 || rank >= w->n)
        return;
    __atomic_or_fetch(&w->b->dead[rank / 64], (uint64_t)1 << (rank % 64), __ATOMIC_ACQ_REL);
    hn_world_abort(w);
}

int hn_world_dead_rank(const hn_world *w)
{
    for (int i = 0; i < MASK_WORDS; i++) {
        uint64_t d = __atomic_load_n(&w->b->dead[i], __ATOMIC_ACQUIRE);
        if (d != 0)
            return i * 64 + __builtin_ctzll(d);
    }
    return -1;
}

/* ---- the error slot ----
 * A part per level, each written once by the post that claims it (claim
 * 0 -> 1), published by ready; the failure part beats the echo part. No
 * two posts write one part, so a post never waits for another. */

int hn_world_error_post(hn_world *w, hn_status_t st, int rank, int instr, const char *text)
{
    int level = st == HN_ERR_ABORTED ? ECHO : FAILURE, won = 0;
    error_part *e = &w->b->err[level];
    uint32_t free_word = 0;
    if (__atomic_compare_exchange_n(&e->claim, &free_word, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
        e->status = st;
        e->rank = rank;
        e->instr = instr;
        snprintf(e->text, sizeof(e->text), "%s", text != NULL ? text : "");
        __atomic_store_n(&e->ready, 1, __ATOMIC_RELEASE);
        /* an echo is the first error only while no failure is posted */
        won = level == FAILURE || !__atomic_load_n(&w->b->err[FAILURE].claim, __ATOMIC_ACQUIRE);
    }
    return won;
}

/* Waits until a claimed part is written (its post is between claim and
 * ready: a few stores away); 0 past the world's timeout. */
static int part_ready(hn_world *w, error_part *e)
{
    double end = 0;
    for (unsigned k = 0; !__atomic_load_n(&e->ready, __ATOMIC_ACQUIRE); k++) {
        if (end == 0)
            end = hn_now() + w->timeout_s;
        else if (hn_now() > end)
            return 0;
        sched_yield();
    }
    return 1;
}

hn_status_t hn_world_error_get(hn_world *w, hn_world_error *out)
{
    memset(out, 0, sizeof(*out));
    for (int level = FAILURE; level >= ECHO; level--) {
        error_part *e = &w->b->err[level];
        if (!__atomic_load_n(&e->claim, __ATOMIC_ACQUIRE))
            continue;
        if (!part_ready(w, e))
            return HN_ERR_TIMEOUT;
        out->status = e->status;
        out->rank = e->rank;
        out->instr = e->instr;
        snprintf(out->text, sizeof(out->text), "%s", e->text);
        return HN_OK;
    }
    return HN_OK;
}

void hn_world_error_clear(hn_world *w)
{
    for (int level = 0; level < LEVELS; level++) {
        error_part *e = &w->b->err[level];
        if (__atomic_load_n(&e->claim, __ATOMIC_ACQUIRE))
            (void)part_ready(w, e);
        __atomic_store_n(&e->ready, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&e->claim, 0, __ATOMIC_RELEASE);
    }
    __atomic_store_n(&w->b->abort, 0, __ATOMIC_RELEASE);
}

/* ---- the exchange board ----
 * Member p of an exchange among M with tag T:
 *   1. publishes: its data, tag, mask and bytes, then gen + 1;
 *   2. for every member q: waits until q is in an exchange (left < gen)
 *      newer than the last p finished with it (gen > seen[p][q]) of the
 *      same tag and members, then copies q's data; raises read;
 *   3. waits until every member q read (read >= q's gen of step 2), so
 *      nobody reads p's data any more; raises left.
 * A member leaves only after every other one copied its data, so data is
 * rewritten only by a later exchange. Every change rings the bell. */

typedef struct xchg_view {
    uint32_t gen, left, failed;
    uint64_t tag, bytes, mask[MASK_WORDS];
} xchg_view;

/* q's slot as one consistent picture: the exchange's description with
 * the gen it belongs to (an even tseq, the same before and after) */
static void look(const board_slot *s, xchg_view *v)
{
    for (;;) {
        uint32_t before = __atomic_load_n(&s->tseq, __ATOMIC_ACQUIRE), after;
        if (before & 1) { /* the owner is publishing */
            sched_yield();
            continue;
        }
        v->gen = __atomic_load_n(&s->gen, __ATOMIC_ACQUIRE);
        v->left = __atomic_load_n(&s->left, __ATOMIC_ACQUIRE);
        v->failed = __atomic_load_n(&s->failed, __ATOMIC_ACQUIRE);
        v->tag = __atomic_load_n(&s->tag, __ATOMIC_RELAXED);
        v->bytes = __atomic_load_n(&s->bytes, __ATOMIC_RELAXED);
        for (int i = 0; i < MASK_WORDS; i++)
            v->mask[i] = __atomic_load_n(&s->mask[i], __ATOMIC_RELAXED);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        after = __atomic_load_n(&s->tseq, __ATOMIC_RELAXED);
        if (after == before)
            return;
    }
}

static int in_mask(const uint64_t *mask, int rank) { return (mask[rank / 64] >> (rank % 64)) & 1; }

static void describe_members(hn_strbuf *sb, const uint64_t *mask)
{
    const char *sep = "";
    hn_sb_append(sb, "{");
    for (int r = 0; r < HN_WORLD_MAX_RANKS; r++)
        if (in_mask(mask, r)) {
            hn_sb_printf(sb, "%s%d", sep, r);
            sep = " ";
        }
    hn_sb_append(sb, "}");
}

/* Where member q stands for p's exchange: */
enum { Q_NOT_YET, Q_HERE, Q_GAVE_UP, Q_ELSEWHERE };

static int where(const xchg_view *v, uint32_t seen, uint64_t tag, const uint64_t *mask, size_t bytes, int p)
{
    int same;
    if (v->gen == seen || (int32_t)(v->gen - seen) < 0)
        return Q_NOT_YET; /* still at (or leaving) the last exchange with p */
    same = v->tag == tag && memcmp(v->mask, mask, sizeof(v->mask)) == 0;
    if (v->left == v->gen) /* between exchanges, or gave one up */
        return same && v->failed == v->gen ? Q_GAVE_UP : Q_NOT_YET;
    if (same && v->bytes == bytes)
        return Q_HERE;
    /* in another exchange: one that p should be in too is a divergence */
    return in_mask(v->mask, p) ? Q_ELSEWHERE : Q_NOT_YET;
}

typedef struct xchg {
    hn_world *w;
    const int *ranks;
    int n, me, p;
    uint64_t tag, mask[MASK_WORDS];
    size_t bytes;
    unsigned flags;
    hn_strbuf *why;
    double end;
} xchg;

/* One round of a wait: a yield at first, then a sleep on the bell;
 * HN_ERR_ABORTED on the abort word, HN_ERR_TIMEOUT past the deadline. */
static hn_status_t pause_once(xchg *x, unsigned round, uint32_t bell)
{
    double now;
    for (int i = 0; i < MASK_WORDS; i++)
        if (__atomic_load_n(&x->w->b->dead[i], __ATOMIC_ACQUIRE) & x->mask[i])
            return HN_ERR_PEER_LOST;
    if (!(x->flags & HN_WORLD_EVEN_ABORTED) && hn_world_aborted(x->w))
        return HN_ERR_ABORTED;
    now = hn_now();
    if (now > x->end)
        return HN_ERR_TIMEOUT;
    if (round < YIELDS)
        sched_yield();
    else
        (void)hn_doorbell_wait(&x->w->b->bell, bell, HN_MIN(SLICE_S, x->end - now));
    return HN_OK;
}

static void say(const xchg *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(const xchg *x, const char *fmt, ...)
{
    va_list ap;
    if (x->why == NULL)
        return;
    hn_sb_printf(x->why, "rank %d, exchange %#llx among ", x->p, (unsigned long long)x->tag);
    describe_members(x->why, x->mask);
    hn_sb_append(x->why, ": ");
    va_start(ap, fmt);
    hn_sb_vprintf(x->why, fmt, ap);
    va_end(ap);
}

/* The ranks of x's members for which busy[i] holds, into why. */
static void say_ranks(const xchg *x, const int *busy, const char *what)
{
    hn_strbuf list;
    const char *sep = "";
    int count = 0;
    hn_sb_init(&list);
    for (int i = 0; i < x->n; i++)
        if (busy[i]) {
            hn_sb_printf(&list, "%s%d", sep, x->ranks[i]);
            sep = ", ";
            count++;
        }
    say(x, "rank%s %s %s (waited %.3g s)", count == 1 ? "" : "s", list.data != NULL ? list.data : "", what,
        x->w->timeout_s);
    hn_sb_free(&list);
}

/* Step 2: every member's data into all; got[i] its gen there. */
static hn_status_t collect(xchg *x, void *all, uint32_t *got, int *wait)
{
    hn_world *w = x->w;
    int left = x->n;
    for (int i = 0; i < x->n; i++)
        wait[i] = i != x->me;
    left--;
    for (unsigned round = 0; left > 0; round++) {
        uint32_t bell = hn_doorbell_read(&w->b->bell);
        hn_status_t st;
        for (int i = 0; i < x->n; i++) {
            int q = x->ranks[i];
            xchg_view v;
            if (!wait[i])
                continue;
            look(&w->board[q], &v);
            switch (where(&v, w->seen[(size_t)x->p * (size_t)w->n + (size_t)q], x->tag, x->mask, x->bytes, x->p)) {
            case Q_HERE:
                if (x->bytes > 0) {
                    xchg_view after;
                    slot_get(&w->board[q], (unsigned char *)all + (size_t)i * x->bytes, x->bytes);
                    __atomic_thread_fence(__ATOMIC_ACQUIRE);
                    look(&w->board[q], &after);
                    if (after.gen != v.gen || after.failed == v.gen) { /* it gave up while we copied */
                        say(x, "rank %d gave the exchange up (it failed)", q);
                        return HN_ERR_ABORTED;
                    }
                }
                got[i] = v.gen;
                wait[i] = 0;
                left--;
                round = 0;
                break;
            case Q_GAVE_UP:
                say(x, "rank %d gave the exchange up (it failed)", q);
                return HN_ERR_ABORTED;
            case Q_ELSEWHERE:
                say(x, "rank %d is in exchange %#llx among ", q, (unsigned long long)v.tag);
                if (x->why != NULL) {
                    describe_members(x->why, v.mask);
                    if (v.tag == x->tag)
                        hn_sb_printf(x->why, " of %llu bytes", (unsigned long long)v.bytes);
                }
                if (x->why != NULL && v.tag == x->tag && memcmp(v.mask, x->mask, sizeof(v.mask)) == 0)
                    hn_sb_printf(x->why, " (this rank gives %zu)", x->bytes);
                return HN_ERR_MISMATCH;
            default: break;
            }
        }
        if (left > 0 && (st = pause_once(x, round, bell)) != HN_OK) {
            if (st == HN_ERR_TIMEOUT)
                say_ranks(x, wait, "never came");
            else if (st == HN_ERR_PEER_LOST)
                say(x, "the process of rank %d died", hn_world_dead_rank(w));
            else
                say(x, "the world was aborted while waiting");
            return st;
        }
    }
    return HN_OK;
}

/* Step 3: every member read this exchange (nobody needs p's data). */
static hn_status_t drain(xchg *x, const uint32_t *got, int *wait)
{
    hn_world *w = x->w;
    int left = 0;
    for (int i = 0; i < x->n; i++)
        left += wait[i] = i != x->me;
    for (unsigned round = 0; left > 0; round++) {
        uint32_t bell = hn_doorbell_read(&w->b->bell);
        hn_status_t st;
        for (int i = 0; i < x->n; i++) {
            board_slot *s = &w->board[x->ranks[i]];
            if (!wait[i] || (int32_t)(__atomic_load_n(&s->read, __ATOMIC_ACQUIRE) - got[i]) < 0)
                continue;
            if (__atomic_load_n(&s->failed, __ATOMIC_ACQUIRE) == got[i]) {
                say(x, "rank %d gave the exchange up (it failed)", x->ranks[i]);
                return HN_ERR_ABORTED;
            }
            wait[i] = 0;
            left--;
            round = 0;
        }
        if (left > 0 && (st = pause_once(x, round, bell)) != HN_OK) {
            if (st == HN_ERR_TIMEOUT)
                say_ranks(x, wait, "never finished reading");
            else if (st == HN_ERR_PEER_LOST)
                say(x, "the process of rank %d died", hn_world_dead_rank(w));
            else
                say(x, "the world was aborted while waiting");
            return st;
        }
    }
    return HN_OK;
}

/* ---- exchanges across nodes ----
 * Through the link's mailbox: each member puts a blob (a header, then its
 * bytes) under (tag, its rank) for the other members and takes theirs. */

void hn_world_set_net(hn_world *w, hn_net *net, int per_node)
{
    w->net = net;
    w->per_node = per_node > 0 ? per_node : w->n;
}

int hn_world_node_of(const hn_world *w, int rank) { return w->net != NULL ? rank / w->per_node : 0; }

hn_net *hn_world_net(const hn_world *w) { return w->net; }

int hn_world_spans_nodes(const hn_world *w, const int *ranks, int n)
{
    for (int i = 1; i < n; i++)
        if (hn_world_node_of(w, ranks[i]) != hn_world_node_of(w, ranks[0]))
            return 1;
    return 0;
}

typedef struct net_head {
    uint64_t members; /* a hash of the member list */
    uint64_t bytes;
} net_head;

typedef struct net_stop {
    hn_world *w;
    const int *ranks;
    int n;
    unsigned flags;
} net_stop;

/* 1 aborted, 2 a member is dead: the wait ends. */
static int net_stopped(void *arg)
{
    net_stop *q = arg;
    int dead = hn_world_dead_rank(q->w);
    for (int i = 0; dead >= 0 && i < q->n; i++)
        if (q->ranks[i] == dead)
            return 2;
    return !(q->flags & HN_WORLD_EVEN_ABORTED) && hn_world_aborted(q->w);
}

static hn_status_t net_xchg(hn_world *w, const int *ranks, int n, int me, uint64_t tag, const void *mine,
                            size_t bytes, void *all, unsigned flags, hn_strbuf *why)
{
    net_head h = {0x9e3779b97f4a7c15ull, bytes};
    net_stop q = {w, ranks, n, flags};
    double end = hn_now() + w->timeout_s + ((flags & HN_WORLD_PATIENT) ? 1.0 : 0.0);
    unsigned char *blob = hn_malloc(sizeof(h) + bytes + 1);
    hn_status_t st = HN_OK;
    for (int i = 0; i < n; i++)
        h.members = (h.members ^ (uint64_t)ranks[i]) * 0x100000001b3ull;
    if (blob == NULL)
        return HN_ERR_NOMEM;
    memcpy(blob, &h, sizeof(h));
    if (bytes > 0)
        memcpy(blob + sizeof(h), mine, bytes);
    if (n > 1 && hn_net_put(w->net, tag, ranks[me], n - 1, blob, sizeof(h) + bytes) != 0) {
        hn_sb_printf(why, "rank %d: the world's link is down (exchange %#llx)", ranks[me], (unsigned long long)tag);
        st = HN_ERR_PEER_LOST;
    }
    if (st == HN_OK && bytes > 0)
        memmove((unsigned char *)all + (size_t)me * bytes, mine, bytes);
    for (int i = 0; i < n && st == HN_OK; i++) {
        void *got;
        size_t len;
        int r;
        net_head g;
        if (i == me)
            continue;
        r = hn_net_take(w->net, tag, ranks[i], &got, &len, end, net_stopped, &q);
        if (r == 0) {
            if (len >= sizeof(g))
                memcpy(&g, got, sizeof(g));
            if (len < sizeof(g) || g.members != h.members || g.bytes != bytes || len != sizeof(g) + bytes) {
                hn_sb_printf(why, "rank %d and rank %d (node %d) disagree on exchange %#llx: its members or "
                             "size differ (%zu bytes here)", ranks[me], ranks[i], hn_world_node_of(w, ranks[i]),
                             (unsigned long long)tag, bytes);
                st = HN_ERR_MISMATCH;
            } else if (bytes > 0) {
                memcpy((unsigned char *)all + (size_t)i * bytes, (unsigned char *)got + sizeof(g), bytes);
            }
            hn_free(got);
        } else if (r == 1) {
            hn_sb_printf(why, "rank %d (node %d) never came to exchange %#llx within %.0f s", ranks[i],
                         hn_world_node_of(w, ranks[i]), (unsigned long long)tag, w->timeout_s);
            st = HN_ERR_TIMEOUT;
        } else if (r == 2) {
            st = net_stopped(&q) == 2 ? HN_ERR_PEER_LOST : HN_ERR_ABORTED;
            hn_sb_printf(why, "exchange %#llx: %s", (unsigned long long)tag,
                         st == HN_ERR_PEER_LOST ? "a member's process is gone" : "the world aborted");
        } else {
            hn_sb_printf(why, "rank %d: the world's link is down (exchange %#llx)", ranks[me],
                         (unsigned long long)tag);
            st = HN_ERR_PEER_LOST;
        }
    }
    hn_free(blob);
    return st;
}

hn_status_t hn_world_xchg(hn_world *w, const int *ranks, int n, int me, uint64_t tag, const void *mine,
                          size_t bytes, void *all, unsigned flags, hn_strbuf *why)
{
    xchg x;
    board_slot *s;
    uint32_t gen, got_small[16], *got;
    int wait_small[16], *wait;
    hn_status_t st;
    if (w == NULL || ranks == NULL || n < 1 || n > w->n || me < 0 || me >= n || bytes > HN_WORLD_XCHG_BYTES ||
        (bytes > 0 && (mine == NULL || all == NULL)))
        return HN_ERR_INVALID;
    memset(&x, 0, sizeof(x));
    for (int i = 0; i < n; i++) {
        if (ranks[i] < 0 || ranks[i] >= w->n || in_mask(x.mask, ranks[i]))
            return HN_ERR_INVALID;
        x.mask[ranks[i] / 64] |= (uint64_t)1 << (ranks[i] % 64);
    }
    if (w->net != NULL && hn_world_spans_nodes(w, ranks, n))
        return net_xchg(w, ranks, n, me, tag, mine, bytes, all, flags, why);
    x.w = w;
    x.ranks = ranks;
    x.n = n;
    x.me = me;
    x.p = ranks[me];
    x.tag = tag;
    x.bytes = bytes;
    x.flags = flags;
    x.why = why;
    x.end = hn_now() + w->timeout_s + ((flags & HN_WORLD_PATIENT) ? 1.0 : 0.0);
    got = n <= 16 ? got_small : hn_calloc((size_t)n, sizeof(*got));
    wait = n <= 16 ? wait_small : hn_calloc((size_t)n, sizeof(*wait));
    if (got == NULL || wait == NULL) {
        st = HN_ERR_NOMEM;
        goto out;
    }
    /* 1: published (the slot is free: our last exchange's readers are done) */
    s = &w->board[x.p];
    if (bytes > 0) {
        slot_put(s, mine, bytes);
        memmove((unsigned char *)all + (size_t)me * bytes, mine, bytes);
    }
    {   /* the description and gen change together, under the sequence lock */
        uint32_t seq = __atomic_load_n(&s->tseq, __ATOMIC_RELAXED);
        __atomic_store_n(&s->tseq, seq + 1, __ATOMIC_RELAXED);
        __atomic_thread_fence(__ATOMIC_RELEASE);
        __atomic_store_n(&s->tag, tag, __ATOMIC_RELAXED);
        __atomic_store_n(&s->bytes, (uint64_t)bytes, __ATOMIC_RELAXED);
        for (int i = 0; i < MASK_WORDS; i++)
            __atomic_store_n(&s->mask[i], x.mask[i], __ATOMIC_RELAXED);
        gen = __atomic_load_n(&s->gen, __ATOMIC_RELAXED) + 1;
        __atomic_store_n(&s->gen, gen, __ATOMIC_RELEASE);
        __atomic_store_n(&s->tseq, seq + 2, __ATOMIC_RELEASE);
    }
    hn_doorbell_ring(&w->b->bell);
    got[me] = gen;
    /* 2 and 3 */
    if ((st = collect(&x, all, got, wait)) == HN_OK) {
        __atomic_store_n(&s->read, gen, __ATOMIC_RELEASE);
        hn_doorbell_ring(&w->b->bell);
        st = drain(&x, got, wait);
    }
    if (st == HN_OK) {
        for (int i = 0; i < n; i++)
            w->seen[(size_t)x.p * (size_t)w->n + (size_t)ranks[i]] = got[i];
    } else { /* given up: members waiting for this rank fail at once, not at their deadline */
        __atomic_store_n(&s->failed, gen, __ATOMIC_RELEASE);
        __atomic_store_n(&s->read, gen, __ATOMIC_RELEASE);
    }
    __atomic_store_n(&s->left, gen, __ATOMIC_RELEASE);
    hn_doorbell_ring(&w->b->bell);
out:
    if (got != got_small)
        hn_free(got);
    if (wait != wait_small)
        hn_free(wait);
    return st;
}

hn_status_t hn_world_barrier(hn_world *w, const int *ranks, int n, int me, uint64_t tag, unsigned flags,
                             hn_strbuf *why)
{
    return hn_world_xchg(w, ranks, n, me, tag, NULL, 0, NULL, flags, why);
}

/* ---- shared regions ---- */

static uint64_t mix(uint64_t h, uint64_t v)
{
    uint64_t s = h ^ (v + 0x9e3779b97f4a7c15ull);
    return hn_splitmix64(&s);
}

hn_status_t hn_world_shared(hn_world *w, uint64_t key, size_t bytes, void **out)
{
    /* across processes whole pages, never handed out twice (below) */
    size_t unit = w->attached ? 4096 : ALIGN;
    size_t need = (HN_MAX(bytes, (size_t)1) + unit - 1) / unit * unit, at = 0;
    int i;
    if (bytes > w->shared_bytes || out == NULL)
        return bytes > w->shared_bytes ? HN_ERR_NOMEM : HN_ERR_INVALID;
    pthread_mutex_lock(&w->shared_mu);
    if (w->attached) {
        /* Each process frees its view of a region when it is done with
         * it, at its own pace: a part handed out again could be in use in
         * one process while another still frees it. So parts are never
         * reused across processes. Their pages go back to the system at
         * the first free anywhere (zero in every process from then on):
         * the runtime frees a region only where every process is done
         * with it (teams are destroyed together after a failure, and at
         * destroy), so a process that breaks the contract times out, it
         * does not read another's live state. */
        at = w->bump;
        i = w->nregions;
    } else {
        /* first fit: the gap before region i */
        for (i = 0; i < w->nregions; i++) {
            if (w->regions[i].off - at >= need)
                break;
            at = w->regions[i].off + w->regions[i].bytes;
        }
    }
    if (w->shared_bytes - at < need ||
        hn_grow((void **)&w->regions, &w->regions_cap, w->nregions, sizeof(*w->regions)) != 0) {
        pthread_mutex_unlock(&w->shared_mu);
        return HN_ERR_NOMEM;
    }
    memmove(&w->regions[i + 1], &w->regions[i], (size_t)(w->nregions - i) * sizeof(*w->regions));
    w->regions[i].off = at;
    w->regions[i].bytes = need;
    w->regions[i].key = key;
    w->nregions++;
    w->bump = at + need;
    w->shared_hash = mix(mix(mix(w->shared_hash, key), at), need);
    pthread_mutex_unlock(&w->shared_mu);
    /* freed parts were zeroed by their free; fresh pages are zero */
    *out = w->shared + at;
    return HN_OK;
}

void hn_world_shared_free(hn_world *w, void *p)
{
    size_t off;
    if (p == NULL)
        return;
    off = (size_t)((unsigned char *)p - w->shared);
    pthread_mutex_lock(&w->shared_mu);
    for (int i = 0; i < w->nregions; i++)
        if (w->regions[i].off == off) {
            if (!w->attached)
                memset(p, 0, w->regions[i].bytes);
            else if (madvise(p, w->regions[i].bytes, MADV_REMOVE) != 0) /* the pages, in every process */
                HN_DEBUG("world: cannot give back %zu bytes of shared memory: %s", w->regions[i].bytes,
                         strerror(errno));
            w->shared_hash = mix(w->shared_hash, ~(uint64_t)off);
            memmove(&w->regions[i], &w->regions[i + 1], (size_t)(w->nregions - i - 1) * sizeof(*w->regions));
            w->nregions--;
            pthread_mutex_unlock(&w->shared_mu);
            return;
        }
    pthread_mutex_unlock(&w->shared_mu);
    HN_WARN("hn_world_shared_free: %p is no shared region (freed already?): ignored", p);
}

size_t hn_world_shared_offset(const hn_world *w, const void *p)
{
    return (size_t)((const unsigned char *)p - w->shared);
}

uint64_t hn_world_shared_hash(const hn_world *w) { return w->shared_hash; }
