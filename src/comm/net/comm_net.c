/* The host backend's communicator across nodes: what NCCL is to CUDA,
 * with the world's link (src/world/net.h) as its network. A member's part
 * of a collective crosses the link as a blob — its arguments' signature,
 * then its input — and every member computes its own result from the
 * parts it takes, reductions in team order (hn_coll_result), so results
 * equal the host communicator's on one node bit for bit. A send puts its
 * bytes for the receiver and is done; a receive takes them.
 *
 * Blobs are named by the team's members, the communicator's generation
 * (moved on by every reset after a failure, so that no part a failed run
 * left on the link is taken by the next) and the sequence number, which
 * for a graph's replays lies in a space of the graph's own (as the host
 * communicator's rendezvous keys). Every wait has the run's deadline and
 * ends at the abort words. */
#include <stdio.h>
#include <string.h>

#include "../comm_base.h"
#include "../../world/net.h"

/* a part's head: what every member must agree on, and its bytes */
typedef struct part_head {
    int32_t kind, dtype, redop, root;
    uint64_t count, bytes;
} part_head;

typedef struct member {
    uint64_t issue_seq; /* its rank's thread's */
} member;

struct hn_comm_team {
    hn_comm_team_base base;
    uint64_t key; /* a hash of the members */
    member m[];
};

struct hn_comm_world {
    hn_comm_base base;
    hn_net *net;
    uint64_t *send_seq, *recv_seq; /* [src * n + dst], as the host communicator's */
    uint32_t gen;                  /* moved on by every reset after a failure */
    int aborted;
};

static uint64_t mix(uint64_t h, uint64_t v) { return (h ^ v) * 0x100000001b3ull; }

static void net_fini(hn_comm_world *w)
{
    if (w == NULL)
        return;
    hn_free(w->send_seq);
    hn_free(w->recv_seq);
    hn_comm_base_free(&w->base);
}

static hn_status_t net_init(const hn_comm_setup *setup, hn_comm_world **out)
{
    size_t n2 = (size_t)setup->nranks * (size_t)setup->nranks;
    hn_comm_world *w;
    hn_status_t st;
    if (setup->world == NULL || hn_world_net(setup->world) == NULL) {
        HN_ERROR("net: the world has no link between nodes");
        return HN_ERR_UNSUPPORTED;
    }
    if ((st = hn_comm_base_new("net", setup, sizeof(*w), 0, &w)) != HN_OK)
        return st;
    w->net = hn_world_net(setup->world);
    w->send_seq = hn_calloc(n2, sizeof(uint64_t));
    w->recv_seq = hn_calloc(n2, sizeof(uint64_t));
    if (w->send_seq == NULL || w->recv_seq == NULL) {
        net_fini(w);
        return HN_ERR_NOMEM;
    }
    *out = w;
    return HN_OK;
}

static hn_status_t net_team_create(hn_comm_world *w, const int *ranks, int n, hn_comm_team **out)
{
    hn_comm_team *t;
    hn_status_t st = hn_comm_team_new(&w->base, ranks, n, sizeof(*t) + (size_t)n * sizeof(member), &t);
    if (st != HN_OK)
        return st;
    t->key = 0xcbf29ce484222325ull;
    for (int i = 0; i < n; i++)
        t->key = mix(t->key, (uint64_t)ranks[i] + 1);
    *out = t;
    return HN_OK;
}

static void net_team_destroy(hn_comm_team *t)
{
    if (t != NULL)
        hn_comm_team_free(&t->base);
}

typedef struct stop_ctx {
    const hn_comm_world *w;
    const hn_origin *o;
} stop_ctx;

static int stopped(void *arg)
{
    const stop_ctx *c = arg;
    return __atomic_load_n(&c->w->aborted, __ATOMIC_ACQUIRE) || hn_world_aborted(c->w->base.world) ||
           hn_origin_aborted(c->o);
}

/* Takes (tag, from)'s part within the run's deadline; HN_OK with *data. */
static hn_status_t take(const hn_comm_world *w, const hn_origin *o, uint64_t tag, int from, void **data,
                        size_t *bytes, const char *what)
{
    stop_ctx c = {w, o};
    double timeout = o->sink != NULL ? o->sink->timeout_s : 60.0;
    int r = hn_net_take(w->net, tag, from, data, bytes, hn_now() + timeout, stopped, &c);
    if (r == 0)
        return HN_OK;
    if (r == 1)
        hn_origin_fail(o, HN_ERR_TIMEOUT, "%s: rank %d (node %d) sent nothing over the network within %.0f s",
                       what, from, hn_world_node_of(w->base.world, from), timeout);
    else if (r < 0)
        hn_origin_fail(o, HN_ERR_PEER_LOST, "%s: the world's link between the nodes is down", what);
    return r == 1 ? HN_ERR_TIMEOUT : r == 2 ? HN_ERR_ABORTED : HN_ERR_PEER_LOST;
}

/* ---- collectives ---- */

typedef struct coll_job {
    hn_comm_team *t;
    int me;
    uint64_t seq;
    hn_coll_args a;
} coll_job;

/* The bytes of a member's input: what the others need of it. */
static size_t input_bytes(const hn_coll_args *a, int n)
{
    size_t es = (size_t)hn_dtype_size(a->dtype);
    switch (a->kind) {
    case HN_COLL_REDUCE_SCATTER:
    case HN_COLL_SCATTER:
    case HN_COLL_ALL_TO_ALL: return a->count * (size_t)n * es;
    default: return a->count * es;
    }
}

/* Whether member i puts its input, and member me takes member i's. */
static int puts_part(const hn_coll_args *a, int i)
{
    return (a->kind != HN_COLL_BROADCAST && a->kind != HN_COLL_SCATTER) || i == a->root;
}
static int takes_part(const hn_coll_args *a, int me, int i)
{
    if (i == me || !puts_part(a, i))
        return 0;
    return (a->kind != HN_COLL_GATHER && a->kind != HN_COLL_REDUCE) || me == a->root;
}

static hn_status_t run_coll(void *arg, const hn_origin *o)
{
    coll_job *j = arg;
    hn_comm_team *t = j->t;
    hn_comm_world *w = t->base.w;
    const int n = t->base.n;
    const size_t in = input_bytes(&j->a, n);
    part_head h = {(int32_t)j->a.kind, (int32_t)j->a.dtype, (int32_t)j->a.redop, j->a.root, j->a.count, in};
    uint64_t tag = mix(mix(t->key, w->gen), hn_comm_seq_key(o, j->seq));
    hn_coll_args *args = hn_calloc((size_t)n, sizeof(*args));
    void **got = hn_calloc((size_t)n, sizeof(void *)), *result = NULL;
    unsigned char *mine = NULL;
    char what[160];
    size_t bytes = 0;
    int readers = 0;
    hn_status_t st = HN_OK;
    snprintf(what, sizeof(what), "%s on a team of %d (communication #%llu)", hn_coll_name(j->a.kind), n,
             (unsigned long long)j->seq);
    for (int i = 0; i < n; i++)
        readers += i != j->me && takes_part(&j->a, i, j->me);
    if (args == NULL || got == NULL || (mine = hn_malloc(sizeof(h) + in + 1)) == NULL) {
        hn_origin_fail(o, HN_ERR_NOMEM, "%s: out of host memory", what);
        st = HN_ERR_NOMEM;
        goto out;
    }
    if (readers > 0) {
        memcpy(mine, &h, sizeof(h));
        memcpy(mine + sizeof(h), j->a.send, in);
        if (hn_net_put(w->net, tag, t->base.ranks[j->me], readers, mine, sizeof(h) + in) != 0) {
            hn_origin_fail(o, HN_ERR_PEER_LOST, "%s: the world's link between the nodes is down", what);
            st = HN_ERR_PEER_LOST;
            goto out;
        }
    }
    for (int i = 0; i < n && st == HN_OK; i++) {
        size_t len;
        part_head g;
        args[i] = j->a;
        if (!takes_part(&j->a, j->me, i))
            continue;
        if ((st = take(w, o, tag, t->base.ranks[i], &got[i], &len, what)) != HN_OK)
            break;
        if (len >= sizeof(g))
            memcpy(&g, got[i], sizeof(g));
        if (len < sizeof(g) || len != sizeof(g) + in || memcmp(&g, &h, sizeof(g)) != 0) {
            hn_origin_fail(o, HN_ERR_MISMATCH, "%s: rank %d (node %d) called another collective: %s of %llu x %s "
                           "root %d here", what, t->base.ranks[i], hn_world_node_of(w->base.world,
                           t->base.ranks[i]), hn_coll_name(j->a.kind), (unsigned long long)j->a.count,
                           hn_dtype_name(j->a.dtype), j->a.root);
            st = HN_ERR_MISMATCH;
            break;
        }
        args[i].send = (unsigned char *)got[i] + sizeof(g);
    }
    if (st == HN_OK) {
        if ((result = hn_coll_result(args, n, j->me, &bytes)) == NULL) {
            hn_origin_fail(o, HN_ERR_NOMEM, "%s: out of host memory", what);
            st = HN_ERR_NOMEM;
        } else if (bytes > 0) {
            memcpy(j->a.recv, result, bytes);
        }
    }
out:
    for (int i = 0; got != NULL && i < n; i++)
        hn_free(got[i]);
    hn_free(got);
    hn_free(args);
    hn_free(mine);
    hn_free(result);
    return st;
}

static hn_status_t net_collective(hn_comm_team *t, int me, const hn_coll_args *a, hn_dstream *s, const hn_origin *o)
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

/* ---- send and receive ---- */

typedef hn_comm_p2p_job p2p_job;

static uint64_t p2p_tag(const hn_comm_world *w, const hn_origin *o, int src, int dst, uint64_t seq)
{
    return mix(mix(mix(mix(0x7032702070327032ull, (uint64_t)src), (uint64_t)dst), w->gen), hn_comm_seq_key(o, seq));
}

/* Sends first (they never wait), then the receives in turn. */
static hn_status_t run_p2p(void *arg, const hn_origin *o)
{
    p2p_job *j = arg;
    hn_comm_world *w = j->w;
    hn_status_t st = HN_OK;
    for (int pass = 0; pass < 2 && st == HN_OK; pass++)
        for (int i = 0; i < j->n && st == HN_OK; i++) {
            const hn_p2p_op *op = &j->ops[i];
            char what[128];
            void *got;
            size_t len;
            if (op->is_send != (pass == 0))
                continue;
            snprintf(what, sizeof(what), "%s of %zu bytes between ranks %d and %d", op->is_send ? "send" : "recv",
                     op->bytes, op->is_send ? j->rank : op->peer, op->is_send ? op->peer : j->rank);
            if (op->is_send) {
                if (hn_net_put(w->net, p2p_tag(w, o, j->rank, op->peer, j->seqs[i]), j->rank, 1, op->buf,
                               op->bytes) != 0) {
                    hn_origin_fail(o, HN_ERR_PEER_LOST, "%s: the world's link between the nodes is down", what);
                    st = HN_ERR_PEER_LOST;
                }
                continue;
            }
            if ((st = take(w, o, p2p_tag(w, o, op->peer, j->rank, j->seqs[i]), op->peer, &got, &len, what)) !=
                HN_OK)
                break;
            if (len != op->bytes) {
                hn_origin_fail(o, HN_ERR_MISMATCH, "%s: rank %d sent %zu bytes", what, op->peer, len);
                st = HN_ERR_MISMATCH;
            } else {
                memcpy(op->buf, got, len);
            }
            hn_free(got);
        }
    return st;
}

static hn_status_t net_p2p(hn_comm_world *w, int rank, const hn_p2p_op *ops, int n, hn_dstream *s,
                           const hn_origin *o)
{
    p2p_job *j = hn_comm_p2p_job_new(w, rank, ops, n, w->base.nranks, w->send_seq, w->recv_seq);
    return j != NULL ? hn_device_host.launch_host(s, run_p2p, j, hn_comm_p2p_job_free, o) : HN_ERR_NOMEM;
}

/* ---- failures ---- */

static int net_abort(hn_comm_world *w)
{
    __atomic_store_n(&w->aborted, 1, __ATOMIC_RELEASE);
    return 0;
}

/* After an abort (every stream drained): the sequence numbers start over
 * in a new generation, in every process alike. */
static void net_reset(hn_comm_world *w)
{
    size_t n2 = (size_t)w->base.nranks * (size_t)w->base.nranks;
    if (!__atomic_load_n(&w->aborted, __ATOMIC_ACQUIRE))
        return;
    __atomic_store_n(&w->aborted, 0, __ATOMIC_RELEASE);
    w->gen++;
    memset(w->send_seq, 0, n2 * sizeof(uint64_t));
    memset(w->recv_seq, 0, n2 * sizeof(uint64_t));
    for (int i = 0; i < w->base.teams.n; i++) {
        hn_comm_team *t = w->base.teams.teams[i];
        for (int k = 0; k < t->base.n; k++)
            t->m[k].issue_seq = 0;
    }
}

const hn_comm_ops hn_comm_net = {
    .name = "net",
    .init = net_init,
    .fini = net_fini,
    .team_create = net_team_create,
    .team_destroy = net_team_destroy,
    .collective = net_collective,
    .p2p = net_p2p,
    .abort = net_abort,
    .reset = net_reset,
};
