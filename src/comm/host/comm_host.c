/* CPU emulation communicator: collectives and send/recv as real rendezvous
 * between the emulated devices' stream workers. A rendezvous is keyed by
 * (team, sequence number); arriving members publish their buffers and a
 * signature, a mismatch is reported naming the diverging ranks, and every
 * wait has a deadline. Reductions run in team order (deterministic).
 *
 * Everything a member reads of another lives in the world's shared regions
 * (src/world/world.h), so the members may be threads of one process or
 * ranks in processes of their own: device memory is at the same address
 * in every process, so the buffers' raw pointers travel as they are.
 * Shared state is atomics only; waits sleep on the world's doorbell and
 * look at the abort words between slices. Only the issue side's sequence
 * numbers (each touched by its rank's thread) stay in this process. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "../comm_base.h"

#define RDV_SLOTS 16 /* rendezvous of one team in flight at once */
#define POSTS 8      /* sends of one (src, dst) pair in flight at once */
#define SLICE_S 0.05 /* the longest sleep between two looks at the abort words */
#define KEY_POSTS 0x686f737470000000ull /* "host" "p": the world's posts */
#define KEY_TEAM 0x686f737474000000ull  /* "host" "t": a team's slots (| its id) */
/* a world of its own (the setup gave none): room for the posts and teams */
#define OWN_WORLD_TEAMS ((size_t)64 << 20)

/* One member's part of a rendezvous slot: its arguments, then `state`. */
enum { M_ABSENT, M_HERE, M_READ };
typedef struct slot_member {
    uint32_t state;
    uint32_t pad;
    hn_coll_args args; /* written before state turns M_HERE */
} slot_member;

/* A rendezvous slot in shared memory. key is 0 while free, else the
 * rendezvous key + 1; the first member claims it (CAS from 0), the others
 * find it. The last member to leave zeroes it and frees the key. Slot
 * (key % RDV_SLOTS) of the team's table: a member whose slot still holds
 * an earlier rendezvous waits for its last members to leave. */
typedef struct rdv_slot {
    uint64_t key;
    uint32_t arrived, read, left, pad;
    char align[64 - 24];
    slot_member m[]; /* per member, in team order */
} rdv_slot;

/* A posted send in shared memory: the ring of POSTS of pair (src, dst).
 * The sender claims a free one (P_FREE -> P_FILLING), fills it and makes it
 * P_READY; the receiver that finds its key takes it (P_READY -> P_COPYING,
 * so that the sender cannot withdraw it under the copy), copies and marks
 * it P_TAKEN; the sender then frees it. */
enum { P_FREE, P_FILLING, P_READY, P_COPYING, P_TAKEN };
typedef struct post {
    uint32_t state;
    uint32_t pad;
    uint64_t key;
    void *buf;
    uint64_t bytes;
} post;

typedef struct member {
    uint64_t issue_seq; /* touched only by that rank's thread */
} member;

struct hn_comm_team {
    hn_comm_team_base base; /* the world, size, id, ranks (comm_base.h) */
    char *slots;            /* shared: RDV_SLOTS slots of slot_bytes */
    size_t slot_bytes;
    member m[];
};

struct hn_comm_world {
    hn_comm_base base;
    hn_doorbell *bell;  /* the world's */
    post *posts;        /* shared: [(src * nranks + dst) * POSTS] */
    uint64_t *send_seq; /* [src * n + dst]; issue side, src's thread */
    uint64_t *recv_seq; /* [src * n + dst]; issue side, dst's thread */
    int aborted;        /* this process's members give up (host_abort) */
    int shared_dirty;   /* an abort left slots and posts behind (reset_shared) */
};

static size_t posts_bytes(int nranks) { return (size_t)nranks * (size_t)nranks * POSTS * sizeof(post); }

static void host_fini(hn_comm_world *w)
{
    if (w == NULL)
        return;
    hn_world_shared_free(w->base.world, w->posts);
    hn_free(w->send_seq);
    hn_free(w->recv_seq);
    hn_comm_base_free(&w->base);
}

static hn_status_t host_init(const hn_comm_setup *setup, hn_comm_world **out)
{
    size_t n2 = (size_t)setup->nranks * (size_t)setup->nranks;
    hn_comm_world *w;
    hn_status_t st = hn_comm_base_new("host", setup, sizeof(*w), posts_bytes(setup->nranks) + OWN_WORLD_TEAMS, &w);
    if (st != HN_OK)
        return st;
    w->bell = hn_world_bell(w->base.world);
    w->send_seq = hn_calloc(n2, sizeof(uint64_t));
    w->recv_seq = hn_calloc(n2, sizeof(uint64_t));
    if (w->send_seq == NULL || w->recv_seq == NULL) {
        host_fini(w);
        return HN_ERR_NOMEM;
    }
    /* in every process, first of this communicator's regions: the same offset everywhere */
    if ((st = hn_world_shared(w->base.world, KEY_POSTS, posts_bytes(w->base.nranks), (void **)&w->posts)) != HN_OK) {
        HN_ERROR("host: no room in the shared regions for the posts of %d ranks (%zu bytes)", w->base.nranks,
                 posts_bytes(w->base.nranks));
        host_fini(w);
        return st;
    }
    *out = w;
    return HN_OK;
}

static hn_status_t host_team_create(hn_comm_world *w, const int *ranks, int n, hn_comm_team **out)
{
    hn_comm_team *t;
    hn_status_t st = hn_comm_team_new(&w->base, ranks, n, sizeof(*t) + (size_t)n * sizeof(member), &t);
    if (st != HN_OK)
        return st;
    t->slot_bytes = (sizeof(rdv_slot) + (size_t)n * sizeof(slot_member) + 63) / 64 * 64;
    /* team_create runs in every process in the same order: the same region everywhere */
    st = hn_world_shared(w->base.world, KEY_TEAM | t->base.id, RDV_SLOTS * t->slot_bytes, (void **)&t->slots);
    if (st != HN_OK) {
        HN_ERROR("host: no room in the shared regions for a team of %d (%zu bytes)", n,
                 RDV_SLOTS * t->slot_bytes);
        hn_comm_team_free(&t->base);
        return st;
    }
    *out = t;
    return HN_OK;
}

static void host_team_destroy(hn_comm_team *t)
{
    if (t == NULL)
        return;
    hn_world_shared_free(t->base.w->base.world, t->slots);
    hn_comm_team_free(&t->base);
}

static void team_text(const hn_comm_team *t, char *buf, size_t n)
{
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < t->base.n && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, i ? ", %d" : "%d", t->base.ranks[i]);
    if (k < n)
        snprintf(buf + k, n - k, "]");
}

static int is_aborted(const hn_comm_world *w, const hn_origin *o)
{
    return __atomic_load_n(&w->aborted, __ATOMIC_ACQUIRE) || hn_world_aborted(w->base.world) || hn_origin_aborted(o);
}

static uint32_t load32(const uint32_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }

/* Waits until ready(arg) holds, sleeping on the world's bell (rung by every
 * change of the slots and posts); 0 ready, 1 aborted, 2 timed out. */
static int wait_for(const hn_comm_world *w, const hn_origin *o, int (*ready)(void *), void *arg)
{
    double start = hn_now();
    double timeout = o->sink ? o->sink->timeout_s : 60.0;
    for (;;) {
        uint32_t seen = hn_doorbell_read(w->bell);
        if (ready(arg))
            return 0;
        if (is_aborted(w, o))
            return 1;
        if (hn_now() - start > timeout)
            return 2;
        (void)hn_doorbell_wait(w->bell, seen, SLICE_S);
    }
}

typedef struct coll_job {
    hn_comm_team *t;
    int me;
    uint64_t seq;
    hn_coll_args a;
} coll_job;

static int same_signature(const hn_coll_args *x, const hn_coll_args *y)
{
    return x->kind == y->kind && x->count == y->count && x->dtype == y->dtype &&
           x->redop == y->redop && x->root == y->root;
}

static void describe_args(const hn_coll_args *a, char *buf, size_t n)
{
    snprintf(buf, n, "%s of %zu x %s root %d", hn_coll_name(a->kind), a->count,
             hn_dtype_name(a->dtype), a->root);
}

static rdv_slot *slot_at(const hn_comm_team *t, uint64_t key)
{
    return (rdv_slot *)(t->slots + (size_t)(key % RDV_SLOTS) * t->slot_bytes);
}

/* What a member waits for in a slot: to claim or find it (CLAIM), for
 * every member to arrive (ARRIVED) or to have read the inputs (READ). */
enum { CLAIM, ARRIVED, READ };
typedef struct slot_wait {
    rdv_slot *r;
    uint64_t key; /* as stored: the rendezvous key + 1 */
    uint32_t n;
    int phase;
} slot_wait;

static int slot_ready(void *arg)
{
    slot_wait *sw = arg;
    uint64_t free_key = 0;
    switch (sw->phase) {
    case CLAIM:
        return __atomic_load_n(&sw->r->key, __ATOMIC_ACQUIRE) == sw->key ||
               __atomic_compare_exchange_n(&sw->r->key, &free_key, sw->key, 0, __ATOMIC_SEQ_CST,
                                           __ATOMIC_ACQUIRE);
    case ARRIVED: return load32(&sw->r->arrived) == sw->n;
    default: return load32(&sw->r->read) == sw->n;
    }
}

/* The ranks of the team whose state in r is below `state`, as "1, 3". */
static void ranks_below(const hn_comm_team *t, rdv_slot *r, uint32_t state, char *buf, size_t len)
{
    size_t k = 0;
    buf[0] = '\0';
    for (int m = 0; m < t->base.n && k < len; m++)
        if (load32(&r->m[m].state) < state)
            k += (size_t)snprintf(buf + k, len - k, k ? ", %d" : "%d", t->base.ranks[m]);
}

/* The last member out: the slot zeroed, then its key freed for the next. */
static void slot_leave(const hn_comm_team *t, rdv_slot *r)
{
    if (__atomic_add_fetch(&r->left, 1, __ATOMIC_ACQ_REL) == (uint32_t)t->base.n) {
        memset(r->m, 0, (size_t)t->base.n * sizeof(slot_member));
        r->arrived = r->read = r->left = 0;
        __atomic_store_n(&r->key, 0, __ATOMIC_RELEASE);
    }
    hn_doorbell_ring(t->base.w->bell);
}

/* A member's arrival: its arguments published, then compared with every
 * member already here (the one to come second sees a divergence). */
static hn_status_t arrive(const hn_comm_team *t, rdv_slot *r, const coll_job *j, const char *team,
                          const hn_origin *o)
{
    slot_member *sm = &r->m[j->me];
    sm->args = j->a;
    __atomic_store_n(&sm->state, M_HERE, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&r->arrived, 1, __ATOMIC_SEQ_CST);
    hn_doorbell_ring(t->base.w->bell);
    for (int m = 0; m < t->base.n; m++)
        if (m != j->me && load32(&r->m[m].state) >= M_HERE && !same_signature(&r->m[m].args, &j->a)) {
            char mine[96], theirs[96];
            describe_args(&j->a, mine, sizeof(mine));
            describe_args(&r->m[m].args, theirs, sizeof(theirs));
            hn_origin_fail(o, HN_ERR_MISMATCH,
                           "ranks diverge on team %s, communication #%llu: rank %d issues %s, "
                           "rank %d issues %s",
                           team, (unsigned long long)j->seq, t->base.ranks[j->me], mine, t->base.ranks[m], theirs);
            return HN_ERR_MISMATCH;
        }
    return HN_OK;
}

static hn_status_t run_coll(void *arg, const hn_origin *o)
{
    coll_job job = *(coll_job *)arg, *j = &job;
    hn_comm_team *t = j->t;
    slot_wait sw;
    hn_coll_args *args = NULL;
    void *result = NULL;
    size_t bytes = 0;
    int rc;
    char team[128], who[128];
    hn_status_t st;

    j->seq = hn_comm_seq_key(o, j->seq);
    team_text(t, team, sizeof(team));
    sw = (slot_wait){slot_at(t, j->seq), j->seq + 1, (uint32_t)t->base.n, CLAIM};
    if ((rc = wait_for(t->base.w, o, slot_ready, &sw)) != 0) {
        uint64_t held = __atomic_load_n(&sw.r->key, __ATOMIC_ACQUIRE);
        ranks_below(t, sw.r, M_HERE, who, sizeof(who));
        if (rc == 2)
            hn_origin_fail(o, HN_ERR_TIMEOUT,
                           "%s on team %s (communication #%llu) timed out: its rendezvous slot still holds "
                           "communication #%llu, where rank(s) %s never arrived",
                           hn_coll_name(j->a.kind), team, (unsigned long long)j->seq,
                           (unsigned long long)(held - 1), who[0] ? who : "none");
        return rc == 2 ? HN_ERR_TIMEOUT : HN_ERR_ABORTED;
    }
    if ((st = arrive(t, sw.r, j, team, o)) != HN_OK)
        return st; /* the slot stays taken: the run fails, and the reset clears it */
    sw.phase = ARRIVED;
    if ((rc = wait_for(t->base.w, o, slot_ready, &sw)) != 0) {
        ranks_below(t, sw.r, M_HERE, who, sizeof(who));
        if (rc == 2)
            hn_origin_fail(o, HN_ERR_TIMEOUT,
                           "%s on team %s (communication #%llu) timed out: rank(s) %s never arrived",
                           hn_coll_name(j->a.kind), team, (unsigned long long)j->seq, who);
        return rc == 2 ? HN_ERR_TIMEOUT : HN_ERR_ABORTED;
    }

    /* everyone's buffers are published and nobody has written yet */
    st = HN_ERR_NOMEM;
    if ((args = hn_malloc((size_t)t->base.n * sizeof(*args))) != NULL) {
        for (int m = 0; m < t->base.n; m++)
            args[m] = sw.r->m[m].args;
        result = hn_coll_result(args, t->base.n, j->me, &bytes);
        hn_free(args);
        if (result != NULL)
            st = HN_OK;
    }
    if (st != HN_OK)
        hn_origin_fail(o, HN_ERR_NOMEM, "%s: out of host memory", hn_coll_name(j->a.kind));

    __atomic_store_n(&sw.r->m[j->me].state, M_READ, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&sw.r->read, 1, __ATOMIC_SEQ_CST);
    hn_doorbell_ring(t->base.w->bell);
    sw.phase = READ;
    rc = wait_for(t->base.w, o, slot_ready, &sw);
    if (rc == 0 && st == HN_OK && bytes > 0)
        memcpy(j->a.recv, result, bytes); /* no member reads inputs any more */
    if (rc == 2) {
        ranks_below(t, sw.r, M_READ, who, sizeof(who));
        hn_origin_fail(o, HN_ERR_TIMEOUT, "%s on team %s timed out while peers read: rank(s) %s never did",
                       hn_coll_name(j->a.kind), team, who);
    }
    slot_leave(t, sw.r);
    hn_free(result);
    return rc == 0 ? st : rc == 2 ? HN_ERR_TIMEOUT : HN_ERR_ABORTED;
}

static hn_status_t host_collective(hn_comm_team *t, int me, const hn_coll_args *a, hn_dstream *s,
                                   const hn_origin *o)
{
    coll_job *j = hn_malloc(sizeof(*j));
    if (j == NULL)
        return HN_ERR_NOMEM;
    j->t = t;
    j->me = me;
    j->seq = t->m[me].issue_seq++;
    j->a = *a;
    return hn_device_host.launch_host(s, run_coll, j, hn_free, o);
}

typedef hn_comm_p2p_job p2p_job;

static post *ring_of(const hn_comm_world *w, int src, int dst)
{
    return &w->posts[((size_t)src * (size_t)w->base.nranks + (size_t)dst) * POSTS];
}

/* Posts a send in a free post of its pair's ring; NULL when all are in use. */
static post *try_post(hn_comm_world *w, int src, const hn_p2p_op *op, uint64_t key)
{
    post *ring = ring_of(w, src, op->peer);
    for (int i = 0; i < POSTS; i++) {
        uint32_t free_state = P_FREE;
        if (!__atomic_compare_exchange_n(&ring[i].state, &free_state, P_FILLING, 0, __ATOMIC_SEQ_CST,
                                         __ATOMIC_RELAXED))
            continue;
        __atomic_store_n(&ring[i].key, key, __ATOMIC_RELAXED);
        __atomic_store_n(&ring[i].buf, op->buf, __ATOMIC_RELAXED);
        __atomic_store_n(&ring[i].bytes, (uint64_t)op->bytes, __ATOMIC_RELAXED);
        __atomic_store_n(&ring[i].state, P_READY, __ATOMIC_SEQ_CST);
        return &ring[i];
    }
    return NULL;
}

/* The post of key from src to dst, taken for copying (P_COPYING), or NULL. */
static post *try_take(hn_comm_world *w, int src, int dst, uint64_t key)
{
    post *ring = ring_of(w, src, dst);
    for (int i = 0; i < POSTS; i++) {
        uint32_t ready = P_READY;
        if (load32(&ring[i].state) != P_READY || __atomic_load_n(&ring[i].key, __ATOMIC_RELAXED) != key)
            continue;
        if (!__atomic_compare_exchange_n(&ring[i].state, &ready, P_COPYING, 0, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
            continue;
        /* taken: its sender can no longer change it; was it still this one? */
        if (__atomic_load_n(&ring[i].key, __ATOMIC_RELAXED) == key)
            return &ring[i];
        __atomic_store_n(&ring[i].state, P_READY, __ATOMIC_SEQ_CST);
    }
    return NULL;
}

/* A send given up (a failure): withdrawn unless its receiver copies it
 * now; then freed once the copy is over (bounded: a receiver that never
 * ends its copy leaves the post to the reset). */
static void withdraw(hn_comm_world *w, post *p, const hn_origin *o)
{
    double start = hn_now(), timeout = o->sink ? o->sink->timeout_s : 60.0;
    for (;;) {
        uint32_t state = P_READY, seen = hn_doorbell_read(w->bell);
        if (__atomic_compare_exchange_n(&p->state, &state, P_FREE, 0, __ATOMIC_SEQ_CST, __ATOMIC_ACQUIRE) ||
            state != P_COPYING)
            break;
        if (hn_now() - start > timeout)
            return;
        (void)hn_doorbell_wait(w->bell, seen, SLICE_S);
    }
    __atomic_store_n(&p->state, P_FREE, __ATOMIC_SEQ_CST);
    hn_doorbell_ring(w->bell);
}

/* What is left of a group: sends to post, receives to complete, sends
 * posted and not yet copied by their receivers. */
enum { OP_TODO, OP_POSTED, OP_DONE };

/* One pass over the group's operations: every one that can move does.
 * Returns 1 if any moved; *st a failure of a receive (bytes disagree). */
static int progress(p2p_job *j, int *state, post **mine, const hn_origin *o, hn_status_t *st)
{
    hn_comm_world *w = j->w;
    int moved = 0;
    for (int i = 0; i < j->n && *st == HN_OK; i++) {
        hn_p2p_op *op = &j->ops[i];
        uint64_t key = hn_comm_seq_key(o, j->seqs[i]);
        post *p;
        if (state[i] == OP_DONE)
            continue;
        if (op->is_send && state[i] == OP_TODO) {
            if ((mine[i] = try_post(w, j->rank, op, key)) != NULL) {
                state[i] = OP_POSTED;
                moved = 1;
            }
        } else if (op->is_send) { /* a send completes once its receiver has copied the data */
            if (load32(&mine[i]->state) == P_TAKEN) {
                __atomic_store_n(&mine[i]->state, P_FREE, __ATOMIC_SEQ_CST);
                mine[i] = NULL;
                state[i] = OP_DONE;
                moved = 1;
            }
        } else if ((p = try_take(w, op->peer, j->rank, key)) != NULL) {
            size_t bytes = (size_t)__atomic_load_n(&p->bytes, __ATOMIC_RELAXED);
            if (bytes != op->bytes) {
                __atomic_store_n(&p->state, P_READY, __ATOMIC_SEQ_CST); /* its sender's to withdraw */
                *st = HN_ERR_MISMATCH;
                hn_origin_fail(o, *st, "rank %d sends %zu bytes but rank %d receives %zu bytes", op->peer, bytes,
                               j->rank, op->bytes);
                break;
            }
            memcpy(op->buf, __atomic_load_n(&p->buf, __ATOMIC_RELAXED), bytes);
            __atomic_store_n(&p->state, P_TAKEN, __ATOMIC_SEQ_CST);
            state[i] = OP_DONE;
            moved = 1;
        }
    }
    return moved;
}

/* Names the first operation that never completed after a timeout. */
static void report_stuck(const p2p_job *j, const int *state, const hn_origin *o)
{
    for (int i = 0; i < j->n; i++) {
        const hn_p2p_op *op = &j->ops[i];
        unsigned long long key = (unsigned long long)hn_comm_seq_key(o, j->seqs[i]);
        if (state[i] == OP_DONE)
            continue;
        if (!op->is_send)
            hn_origin_fail(o, HN_ERR_TIMEOUT, "recv from rank %d timed out: rank %d never sent (#%llu)", op->peer,
                           op->peer, key);
        else if (state[i] == OP_POSTED)
            hn_origin_fail(o, HN_ERR_TIMEOUT, "send to rank %d timed out: rank %d never received (#%llu)",
                           op->peer, op->peer, key);
        else
            hn_origin_fail(o, HN_ERR_TIMEOUT,
                           "send to rank %d timed out: all %d posts to rank %d stay unreceived (#%llu)", op->peer,
                           POSTS, op->peer, key);
        return;
    }
}

/* Every operation of the group moves as soon as it can, in any order (so
 * that no order of sends and receives across ranks deadlocks, and a group
 * of more sends to one peer than its ring holds still goes through); the
 * deadline runs from the last move. */
static hn_status_t run_p2p(void *arg, const hn_origin *o)
{
    p2p_job *j = arg;
    hn_comm_world *w = j->w;
    post **mine = hn_calloc((size_t)j->n, sizeof(*mine));
    int *state = hn_calloc((size_t)j->n, sizeof(*state));
    double timeout = o->sink ? o->sink->timeout_s : 60.0, last = hn_now();
    hn_status_t st = HN_OK;
    if (mine == NULL || state == NULL) {
        hn_free(mine);
        hn_free(state);
        hn_origin_fail(o, HN_ERR_NOMEM, "send/recv: out of host memory");
        return HN_ERR_NOMEM;
    }
    for (;;) {
        uint32_t seen = hn_doorbell_read(w->bell);
        int left = 0;
        if (progress(j, state, mine, o, &st)) {
            hn_doorbell_ring(w->bell);
            last = hn_now();
        }
        if (st != HN_OK)
            break;
        for (int i = 0; i < j->n; i++)
            left += state[i] != OP_DONE;
        if (left == 0)
            break;
        if (is_aborted(w, o)) {
            st = HN_ERR_ABORTED;
            break;
        }
        if (hn_now() - last > timeout) {
            st = HN_ERR_TIMEOUT;
            report_stuck(j, state, o);
            break;
        }
        (void)hn_doorbell_wait(w->bell, seen, SLICE_S);
    }
    for (int i = 0; i < j->n; i++)
        if (mine[i] != NULL)
            withdraw(w, mine[i], o);
    hn_free(mine);
    hn_free(state);
    return st;
}

static hn_status_t host_p2p(hn_comm_world *w, int rank, const hn_p2p_op *ops, int n, hn_dstream *s,
                            const hn_origin *o)
{
    p2p_job *j = hn_comm_p2p_job_new(w, rank, ops, n, w->base.nranks, w->send_seq, w->recv_seq);
    return j != NULL ? hn_device_host.launch_host(s, run_p2p, j, hn_comm_p2p_job_free, o) : HN_ERR_NOMEM;
}

/* After a failure: this process's members give up (the world's abort word,
 * which every process's waits also read, is the runtime's to raise); the
 * bell wakes them at once. The teams stay usable. */
static int host_abort(hn_comm_world *w)
{
    __atomic_store_n(&w->aborted, 1, __ATOMIC_RELEASE);
    __atomic_store_n(&w->shared_dirty, 1, __ATOMIC_RELEASE);
    hn_doorbell_ring(w->bell);
    return 0;
}

/* After an abort (every stream drained): this process's sequence numbers
 * start over. Otherwise nothing: a successful run leaves no post or slot
 * behind, and the sequence numbers go on growing, so that the work of
 * launches still in flight keeps its partners. */
static void host_reset(hn_comm_world *w)
{
    size_t n2 = (size_t)w->base.nranks * (size_t)w->base.nranks;
    if (!__atomic_load_n(&w->aborted, __ATOMIC_ACQUIRE))
        return;
    __atomic_store_n(&w->aborted, 0, __ATOMIC_RELEASE);
    memset(w->send_seq, 0, n2 * sizeof(uint64_t));
    memset(w->recv_seq, 0, n2 * sizeof(uint64_t));
    for (int i = 0; i < w->base.teams.n; i++) {
        hn_comm_team *t = w->base.teams.teams[i];
        for (int k = 0; k < t->base.n; k++)
            t->m[k].issue_seq = 0;
    }
}

/* After an abort: the slots and posts a failure left behind, zeroed. Only
 * zeroes, so running it in several processes does no harm as long as
 * every one of them does it before any issues again: with ranks in
 * processes of their own, the recovery must separate every process's
 * reset from the next run's first rendezvous by a barrier of the world
 * (or run this in one process between two such barriers). */
static void host_reset_shared(hn_comm_world *w)
{
    if (!__atomic_exchange_n(&w->shared_dirty, 0, __ATOMIC_ACQ_REL))
        return;
    memset(w->posts, 0, posts_bytes(w->base.nranks));
    for (int i = 0; i < w->base.teams.n; i++) {
        hn_comm_team *t = w->base.teams.teams[i];
        memset(t->slots, 0, RDV_SLOTS * t->slot_bytes);
    }
    hn_doorbell_ring(w->bell);
}

const hn_comm_ops hn_comm_host = {
    .name = "host",
    .peers_reach_buffers = 1,
    .init = host_init,
    .fini = host_fini,
    .team_create = host_team_create,
    .team_destroy = host_team_destroy,
    .collective = host_collective,
    .p2p = host_p2p,
    .abort = host_abort,
    .reset = host_reset,
    .reset_shared = host_reset_shared,
};
