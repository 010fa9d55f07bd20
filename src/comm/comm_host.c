/* CPU emulation communicator: collectives and send/recv as real rendezvous
 * between the emulated devices' stream workers. A rendezvous is keyed by
 * (team, sequence number); arriving members publish their buffers and a
 * signature, a mismatch is reported naming the diverging ranks, and every
 * wait has a deadline. Reductions run in team order (deterministic). */
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "comm.h"
#include "team_list.h"

typedef struct rdv {
    uint64_t seq;
    int arrived, read, left;
    hn_coll_args *args;  /* per member */
    int *rank_arrived;   /* per member: 1 once arrived */
    struct rdv *next;
} rdv;

typedef struct member {
    int rank;
    uint64_t issue_seq; /* touched only by that rank's thread */
} member;

struct hn_comm_team {
    hn_comm_world *w;
    int n;
    member *m;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    rdv *slots;
};

typedef struct post {
    int src, dst;
    uint64_t seq;
    void *buf;
    size_t bytes;
    int consumed;
    struct post *next;
} post;

struct hn_comm_world {
    int nranks;
    const hn_fault_sink *sink;
    pthread_mutex_t mu; /* p2p posts */
    pthread_cond_t cv;
    post *posts;
    uint64_t *send_seq; /* [src * n + dst]; issue side, src's thread */
    uint64_t *recv_seq; /* [src * n + dst]; issue side, dst's thread */
    int aborted;
    hn_team_list teams;
};

void hn_reduce_into(double *acc, const void *src, hn_dtype dt, size_t n, int redop, int first)
{
    int is_float = hn_dtype_is_float(dt);
    for (size_t i = 0; i < n; i++) {
        double v = hn_load(dt, src, (int64_t)i);
        double a = acc[i];
        if (first) {
            acc[i] = v;
            continue;
        }
        switch (redop) {
        case HN_REDUCE_SUM:
        case HN_REDUCE_AVG: a = a + v; break;
        case HN_REDUCE_PROD: a = a * v; break;
        case HN_REDUCE_MAX: a = v > a ? v : a; break;
        case HN_REDUCE_MIN: a = v < a ? v : a; break;
        }
        /* fp32 accumulation for floating types, like the GPU backends */
        acc[i] = is_float ? (double)(float)a : a;
    }
}

static hn_status_t host_init(const hn_comm_config *cfg, hn_comm_world **out)
{
    hn_comm_world *w = hn_calloc(1, sizeof(*w));
    size_t n2 = (size_t)cfg->nranks * (size_t)cfg->nranks;
    if (w == NULL)
        return HN_ERR_NOMEM;
    w->nranks = cfg->nranks;
    w->sink = cfg->sink;
    w->send_seq = hn_calloc(n2, sizeof(uint64_t));
    w->recv_seq = hn_calloc(n2, sizeof(uint64_t));
    if (w->send_seq == NULL || w->recv_seq == NULL) {
        hn_free(w->send_seq);
        hn_free(w->recv_seq);
        hn_free(w);
        return HN_ERR_NOMEM;
    }
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    *out = w;
    return HN_OK;
}

static void free_posts(hn_comm_world *w)
{
    while (w->posts != NULL) {
        post *p = w->posts;
        w->posts = p->next;
        hn_free(p);
    }
}

static void host_fini(hn_comm_world *w)
{
    if (w == NULL)
        return;
    free_posts(w);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    hn_free(w->send_seq);
    hn_free(w->recv_seq);
    hn_team_list_free(&w->teams);
    hn_free(w);
}

static hn_status_t host_team_create(hn_comm_world *w, const int *ranks, int n, hn_comm_team **out)
{
    void *m = NULL;
    hn_comm_team *t = hn_team_new(&w->teams, w->nranks, ranks, n, sizeof(hn_comm_team), sizeof(member),
                                  offsetof(member, rank), &m);
    if (t == NULL)
        return HN_ERR_NOMEM;
    t->m = m;
    t->n = n;
    t->w = w;
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, NULL);
    *out = t;
    return HN_OK;
}

static void free_slot(rdv *r)
{
    hn_free(r->args);
    hn_free(r->rank_arrived);
    hn_free(r);
}

static void host_team_destroy(hn_comm_team *t)
{
    if (t == NULL)
        return;
    while (t->slots != NULL) {
        rdv *r = t->slots;
        t->slots = r->next;
        free_slot(r);
    }
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->cv);
    hn_team_free(&t->w->teams, t, t->m);
}

static void team_text(const hn_comm_team *t, char *buf, size_t n)
{
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < t->n && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, i ? ", %d" : "%d", t->m[i].rank);
    if (k < n)
        snprintf(buf + k, n - k, "]");
}

static int is_aborted(const hn_comm_world *w, const hn_origin *o)
{
    return __atomic_load_n(&w->aborted, __ATOMIC_ACQUIRE) || hn_origin_aborted(o);
}

/* Waits on cv until *cond(arg) holds; 0 ok, 1 aborted, 2 timed out. */
static int wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, int (*cond)(void *), void *arg,
                      const hn_comm_world *w, const hn_origin *o)
{
    double start = hn_now();
    double timeout = o->sink ? o->sink->timeout_s : 60.0;
    while (!cond(arg)) {
        struct timespec ts;
        if (is_aborted(w, o))
            return 1;
        if (hn_now() - start > timeout)
            return 2;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 50 * 1000000L;
        ts.tv_sec += ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(cv, mu, &ts);
    }
    return 0;
}

typedef struct coll_job {
    hn_comm_team *t;
    int me;
    uint64_t seq;
    hn_coll_args a;
} coll_job;

typedef struct rdv_wait {
    rdv *r;
    int n;
    int phase; /* 0 arrived, 1 read */
} rdv_wait;

static int rdv_done(void *arg)
{
    rdv_wait *rw = arg;
    return (rw->phase == 0 ? rw->r->arrived : rw->r->read) == rw->n;
}

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

/* Computes member `me`'s result into a fresh buffer from all members' inputs. */
static void *compute_result(const hn_comm_team *t, const rdv *r, int me, size_t *bytes_out)
{
    const hn_coll_args *a = &r->args[me];
    int n = t->n;
    size_t es = (size_t)hn_dtype_size(a->dtype), c = a->count;
    size_t out_elems = 0;
    char *out;
    double *acc = NULL;
    switch (a->kind) {
    case HN_COLL_ALLGATHER:
    case HN_COLL_GATHER:
    case HN_COLL_ALL_TO_ALL: out_elems = c * (size_t)n; break;
    default: out_elems = c; break;
    }
    *bytes_out = out_elems * es;
    if ((a->kind == HN_COLL_GATHER || a->kind == HN_COLL_REDUCE) && me != a->root) {
        *bytes_out = 0; /* non-roots receive nothing */
        return hn_malloc(1);
    }
    out = hn_malloc(out_elems * es);
    if (out == NULL)
        return NULL;
    switch (a->kind) {
    case HN_COLL_ALLGATHER:
    case HN_COLL_GATHER:
        for (int j = 0; j < n; j++)
            memcpy(out + (size_t)j * c * es, r->args[j].send, c * es);
        break;
    case HN_COLL_BROADCAST: memcpy(out, r->args[a->root].send, c * es); break;
    case HN_COLL_SCATTER: memcpy(out, (const char *)r->args[a->root].send + (size_t)me * c * es, c * es); break;
    case HN_COLL_ALL_TO_ALL:
        for (int j = 0; j < n; j++)
            memcpy(out + (size_t)j * c * es, (const char *)r->args[j].send + (size_t)me * c * es, c * es);
        break;
    case HN_COLL_ALLREDUCE:
    case HN_COLL_REDUCE:
    case HN_COLL_REDUCE_SCATTER: {
        size_t off = a->kind == HN_COLL_REDUCE_SCATTER ? (size_t)me * c : 0;
        acc = hn_malloc(c * sizeof(double) + 1);
        if (acc == NULL) {
            hn_free(out);
            return NULL;
        }
        for (int j = 0; j < n; j++) /* team order: deterministic */
            hn_reduce_into(acc, (const char *)r->args[j].send + off * es, a->dtype, c, a->redop, j == 0);
        for (size_t i = 0; i < c; i++) {
            double v = acc[i];
            if (a->redop == HN_REDUCE_AVG)
                v = hn_dtype_is_float(a->dtype) ? (double)((float)v / (float)n) : floor(v / n);
            hn_store(a->dtype, out, (int64_t)i, v);
        }
        hn_free(acc);
        break;
    }
    default: break;
    }
    return out;
}

/* The rendezvous key of sequence number seq. Replays of a captured graph
 * run the same closures again: theirs is in a space of the graph's own,
 * moved on by the graph's epoch (read now, in stream order), so that no
 * replay meets an earlier one's rendezvous (a capture takes fewer than
 * HN_GRAPH_EPOCH_SPAN numbers of a sequence). */
static uint64_t seq_key(const hn_origin *o, uint64_t seq)
{
    uint32_t ep;
    if (o == NULL || o->graph == NULL)
        return seq;
    ep = __atomic_load_n(&o->graph->ep[0], __ATOMIC_ACQUIRE);
    return (1ull << 63) | (o->graph->id << 32) | (uint32_t)(seq + ep);
}

static hn_status_t run_coll(void *arg, const hn_origin *o)
{
    coll_job job = *(coll_job *)arg, *j = &job;
    hn_comm_team *t = j->t;
    rdv *r;
    rdv_wait rw;
    void *result = NULL;
    size_t bytes = 0;
    int rc;
    char team[128];
    hn_status_t st = HN_OK;

    j->seq = seq_key(o, j->seq);
    pthread_mutex_lock(&t->mu);
    for (r = t->slots; r != NULL && r->seq != j->seq; r = r->next)
        ;
    if (r == NULL) {
        r = hn_calloc(1, sizeof(*r));
        if (r != NULL) {
            r->args = hn_calloc((size_t)t->n, sizeof(*r->args));
            r->rank_arrived = hn_calloc((size_t)t->n, sizeof(int));
        }
        if (r == NULL || r->args == NULL || r->rank_arrived == NULL) {
            if (r != NULL)
                free_slot(r);
            pthread_mutex_unlock(&t->mu);
            hn_origin_fail(o, HN_ERR_NOMEM, "%s: out of host memory", hn_coll_name(j->a.kind));
            return HN_ERR_NOMEM;
        }
        r->seq = j->seq;
        r->next = t->slots;
        t->slots = r;
    }
    r->args[j->me] = j->a;
    r->rank_arrived[j->me] = 1;
    r->arrived++;
    pthread_cond_broadcast(&t->cv);
    team_text(t, team, sizeof(team));
    /* compare with every member already here */
    for (int m = 0; m < t->n; m++)
        if (m != j->me && r->rank_arrived[m] && !same_signature(&r->args[m], &j->a)) {
            char mine[96], theirs[96];
            describe_args(&j->a, mine, sizeof(mine));
            describe_args(&r->args[m], theirs, sizeof(theirs));
            pthread_mutex_unlock(&t->mu);
            hn_origin_fail(o, HN_ERR_MISMATCH,
                           "ranks diverge on team %s, communication #%llu: rank %d issues %s, "
                           "rank %d issues %s",
                           team, (unsigned long long)j->seq, t->m[j->me].rank, mine, t->m[m].rank, theirs);
            return HN_ERR_MISMATCH;
        }
    rw.r = r;
    rw.n = t->n;
    rw.phase = 0;
    rc = wait_until(&t->cv, &t->mu, rdv_done, &rw, t->w, o);
    if (rc != 0) {
        char missing[128];
        size_t k = 0;
        missing[0] = '\0';
        for (int m = 0; m < t->n && k < sizeof(missing); m++)
            if (!r->rank_arrived[m])
                k += (size_t)snprintf(missing + k, sizeof(missing) - k, k ? ", %d" : "%d", t->m[m].rank);
        pthread_mutex_unlock(&t->mu);
        if (rc == 2)
            hn_origin_fail(o, HN_ERR_TIMEOUT,
                           "%s on team %s (communication #%llu) timed out: rank(s) %s never arrived",
                           hn_coll_name(j->a.kind), team, (unsigned long long)j->seq, missing);
        return rc == 2 ? HN_ERR_TIMEOUT : HN_ERR_ABORTED;
    }
    pthread_mutex_unlock(&t->mu);

    /* everyone's buffers are published and nobody has written yet */
    result = compute_result(t, r, j->me, &bytes);
    if (result == NULL) {
        hn_origin_fail(o, HN_ERR_NOMEM, "%s: out of host memory", hn_coll_name(j->a.kind));
        st = HN_ERR_NOMEM;
    }

    pthread_mutex_lock(&t->mu);
    r->read++;
    pthread_cond_broadcast(&t->cv);
    rw.phase = 1;
    rc = wait_until(&t->cv, &t->mu, rdv_done, &rw, t->w, o);
    if (rc == 0 && st == HN_OK && bytes > 0)
        memcpy(j->a.recv, result, bytes); /* no member reads inputs any more */
    if (rc == 2)
        hn_origin_fail(o, HN_ERR_TIMEOUT, "%s on team %s timed out while peers read",
                       hn_coll_name(j->a.kind), team);
    if (++r->left == t->n) {
        rdv **pp = &t->slots;
        while (*pp != r)
            pp = &(*pp)->next;
        *pp = r->next;
        free_slot(r);
    }
    pthread_mutex_unlock(&t->mu);
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

typedef struct p2p_job {
    hn_comm_world *w;
    int rank, n;
    hn_p2p_op *ops;
    uint64_t *seqs;
} p2p_job;

typedef struct find_post {
    hn_comm_world *w;
    int src, dst;
    uint64_t seq;
    post *found;
    post *mine; /* for waiting on consumption */
} find_post;

static int post_ready(void *arg)
{
    find_post *f = arg;
    for (post *p = f->w->posts; p != NULL; p = p->next)
        if (p->src == f->src && p->dst == f->dst && p->seq == f->seq && !p->consumed) {
            f->found = p;
            return 1;
        }
    return 0;
}

static int post_consumed(void *arg)
{
    find_post *f = arg;
    return f->mine->consumed;
}

static void unlink_post(hn_comm_world *w, post *p)
{
    post **pp = &w->posts;
    while (*pp != p)
        pp = &(*pp)->next;
    *pp = p->next;
    hn_free(p);
}

static hn_status_t run_p2p(void *arg, const hn_origin *o)
{
    p2p_job *j = arg;
    hn_comm_world *w = j->w;
    post **mine = hn_calloc((size_t)j->n, sizeof(*mine));
    hn_status_t st = HN_OK;
    if (mine == NULL) {
        hn_origin_fail(o, HN_ERR_NOMEM, "send/recv: out of host memory");
        return HN_ERR_NOMEM;
    }
    pthread_mutex_lock(&w->mu);
    /* 1: post every send, so that no order of receives can deadlock */
    for (int i = 0; i < j->n; i++) {
        if (!j->ops[i].is_send)
            continue;
        mine[i] = hn_calloc(1, sizeof(post));
        if (mine[i] == NULL) {
            st = HN_ERR_NOMEM;
            hn_origin_fail(o, st, "send: out of host memory");
            goto done;
        }
        mine[i]->src = j->rank;
        mine[i]->dst = j->ops[i].peer;
        mine[i]->seq = seq_key(o, j->seqs[i]);
        mine[i]->buf = j->ops[i].buf;
        mine[i]->bytes = j->ops[i].bytes;
        mine[i]->next = w->posts;
        w->posts = mine[i];
    }
    pthread_cond_broadcast(&w->cv);
    /* 2: complete every receive */
    for (int i = 0; i < j->n && st == HN_OK; i++) {
        find_post f = {w, j->ops[i].peer, j->rank, seq_key(o, j->seqs[i]), NULL, NULL};
        int rc;
        if (j->ops[i].is_send)
            continue;
        rc = wait_until(&w->cv, &w->mu, post_ready, &f, w, o);
        if (rc != 0) {
            st = rc == 2 ? HN_ERR_TIMEOUT : HN_ERR_ABORTED;
            if (rc == 2)
                hn_origin_fail(o, st, "recv from rank %d timed out: rank %d never sent (#%llu)",
                               f.src, f.src, (unsigned long long)f.seq);
            break;
        }
        if (f.found->bytes != j->ops[i].bytes) {
            st = HN_ERR_MISMATCH;
            hn_origin_fail(o, st, "rank %d sends %zu bytes but rank %d receives %zu bytes",
                           f.src, f.found->bytes, j->rank, j->ops[i].bytes);
            break;
        }
        memcpy(j->ops[i].buf, f.found->buf, j->ops[i].bytes);
        f.found->consumed = 1;
        pthread_cond_broadcast(&w->cv);
    }
    /* 3: a send completes once its receiver has copied the data */
    for (int i = 0; i < j->n; i++) {
        find_post f = {w, 0, 0, 0, NULL, mine[i]};
        int rc;
        if (mine[i] == NULL)
            continue;
        rc = st == HN_OK ? wait_until(&w->cv, &w->mu, post_consumed, &f, w, o) : 1;
        if (rc == 2) {
            st = HN_ERR_TIMEOUT;
            hn_origin_fail(o, st, "send to rank %d timed out: rank %d never received (#%llu)",
                           mine[i]->dst, mine[i]->dst, (unsigned long long)mine[i]->seq);
        } else if (rc == 1 && st == HN_OK) {
            st = HN_ERR_ABORTED;
        }
        unlink_post(w, mine[i]);
        mine[i] = NULL;
    }
done:
    for (int i = 0; i < j->n; i++)
        if (mine[i] != NULL)
            unlink_post(w, mine[i]);
    pthread_mutex_unlock(&w->mu);
    hn_free(mine);
    return st;
}

static void free_p2p_job(void *arg)
{
    p2p_job *j = arg;
    hn_free(j->ops);
    hn_free(j->seqs);
    hn_free(j);
}

static hn_status_t host_p2p(hn_comm_world *w, int rank, const hn_p2p_op *ops, int n, hn_dstream *s,
                            const hn_origin *o)
{
    p2p_job *j = hn_calloc(1, sizeof(*j));
    if (j == NULL)
        return HN_ERR_NOMEM;
    j->ops = hn_malloc((size_t)n * sizeof(*ops));
    j->seqs = hn_malloc((size_t)n * sizeof(uint64_t));
    if (j->ops == NULL || j->seqs == NULL) {
        free_p2p_job(j);
        return HN_ERR_NOMEM;
    }
    memcpy(j->ops, ops, (size_t)n * sizeof(*ops));
    j->w = w;
    j->rank = rank;
    j->n = n;
    /* sequence numbers per (src, dst) pair, taken in issue order */
    for (int i = 0; i < n; i++)
        j->seqs[i] = ops[i].is_send ? w->send_seq[rank * w->nranks + ops[i].peer]++
                                    : w->recv_seq[ops[i].peer * w->nranks + rank]++;
    return hn_device_host.launch_host(s, run_p2p, j, free_p2p_job, o);
}

static int host_abort(hn_comm_world *w)
{
    __atomic_store_n(&w->aborted, 1, __ATOMIC_RELEASE);
    pthread_mutex_lock(&w->mu);
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    for (int i = 0; i < w->teams.n; i++) {
        hn_comm_team *t = w->teams.teams[i];
        pthread_mutex_lock(&t->mu);
        pthread_cond_broadcast(&t->cv);
        pthread_mutex_unlock(&t->mu);
    }
    return 0;
}

/* After an abort (every stream drained): posts, slots and sequence numbers
 * start over. Otherwise nothing: a successful run leaves no post or slot
 * behind, and the sequence numbers go on growing, so that the work of
 * launches still in flight keeps its partners. */
static void host_reset(hn_comm_world *w)
{
    size_t n2 = (size_t)w->nranks * (size_t)w->nranks;
    if (!__atomic_load_n(&w->aborted, __ATOMIC_ACQUIRE))
        return;
    __atomic_store_n(&w->aborted, 0, __ATOMIC_RELEASE);
    free_posts(w);
    memset(w->send_seq, 0, n2 * sizeof(uint64_t));
    memset(w->recv_seq, 0, n2 * sizeof(uint64_t));
    for (int i = 0; i < w->teams.n; i++) {
        hn_comm_team *t = w->teams.teams[i];
        for (int k = 0; k < t->n; k++)
            t->m[k].issue_seq = 0;
        while (t->slots != NULL) {
            rdv *r = t->slots;
            t->slots = r->next;
            free_slot(r);
        }
    }
}

const hn_comm_ops hn_comm_host = {
    .name = "host",
    .init = host_init,
    .fini = host_fini,
    .team_create = host_team_create,
    .team_destroy = host_team_destroy,
    .collective = host_collective,
    .p2p = host_p2p,
    .abort = host_abort,
    .reset = host_reset,
};
