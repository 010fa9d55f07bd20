/* The communicators' shared scaffolding (comm_base.h): their worlds, their
 * teams, the exchanges among a team's ranks. */
#include <stdio.h>
#include <string.h>

#include "comm_base.h"

hn_status_t hn_comm_base_new(const char *name, const hn_comm_setup *setup, size_t world_bytes, size_t shared_bytes,
                             hn_comm_world **out)
{
    hn_comm_base *b = hn_calloc(1, world_bytes);
    if (b == NULL)
        return HN_ERR_NOMEM;
    b->name = name;
    b->nranks = setup->nranks;
    b->dev = setup->dev;
    b->dev_ctx = setup->dev_ctx;
    b->compute = setup->compute;
    b->sink = setup->sink;
    b->peer_addr = setup->peer_addr;
    b->peer_ctx = setup->peer_ctx;
    if ((b->world = setup->world) == NULL) {
        hn_status_t st = hn_world_create_local(setup->nranks, setup->sink != NULL ? setup->sink->timeout_s : 60.0,
                                               shared_bytes, &b->own_world);
        if (st != HN_OK) {
            hn_free(b);
            return st;
        }
        b->world = b->own_world;
    }
    *out = (hn_comm_world *)b; /* the communicator's world, whose first member b is */
    return HN_OK;
}

void hn_comm_base_free(hn_comm_base *b)
{
    if (b == NULL)
        return;
    hn_free(b->teams.teams);
    hn_world_destroy(b->own_world);
    hn_free(b);
}

void hn_comm_base_fini(hn_comm_world *w) { hn_comm_base_free((hn_comm_base *)w); }

hn_status_t hn_comm_team_new(hn_comm_base *b, const int *ranks, int n, size_t team_bytes, hn_comm_team **out)
{
    hn_comm_team_base *t = hn_calloc(1, team_bytes);
    int all = n == b->nranks;
    if (t == NULL)
        return HN_ERR_NOMEM;
    t->ranks = hn_calloc((size_t)n, sizeof(int));
    t->xchgs = hn_calloc((size_t)n, sizeof(uint64_t));
    if (t->ranks == NULL || t->xchgs == NULL ||
        hn_grow((void **)&b->teams.teams, &b->teams.cap, b->teams.n, sizeof(*b->teams.teams)) != 0) {
        hn_free(t->ranks);
        hn_free(t->xchgs);
        hn_free(t);
        return HN_ERR_NOMEM;
    }
    t->w = (hn_comm_world *)b; /* the communicator's world, whose first member b is */
    t->n = n;
    t->id = b->team_ids++;
    for (int i = 0; i < n; i++) {
        t->ranks[i] = ranks[i];
        all &= ranks[i] == i;
    }
    b->teams.teams[b->teams.n++] = t;
    if (all)
        b->teams.all = t;
    *out = (hn_comm_team *)t; /* the communicator's team, whose first member t is */
    return HN_OK;
}

void hn_comm_team_free(hn_comm_team_base *t)
{
    hn_team_list *l = &((hn_comm_base *)t->w)->teams;
    for (int i = 0; i < l->n; i++)
        if (l->teams[i] == t) {
            l->teams[i] = l->teams[--l->n];
            break;
        }
    if (l->all == t)
        l->all = NULL;
    hn_free(t->ranks);
    hn_free(t->xchgs);
    hn_free(t);
}

int hn_comm_team_index(const hn_comm_team_base *t, int rank)
{
    for (int i = 0; i < t->n; i++)
        if (t->ranks[i] == rank)
            return i;
    return -1;
}

/* What a member hands the others in an exchange, before its bytes. */
typedef struct xhead {
    int32_t status, pad;
} xhead;

hn_status_t hn_comm_xchg(hn_comm_base *b, const int *ranks, int n, int me, uint64_t tag, const char *what,
                         hn_status_t status, const void *mine, size_t bytes, void *all, const hn_origin *o)
{
    size_t rec = sizeof(xhead) + (bytes + 7) / 8 * 8;
    char *buf = hn_calloc((size_t)n, rec), *own;
    hn_status_t st;
    hn_strbuf why;
    if (buf == NULL) {
        hn_origin_fail(o, HN_ERR_NOMEM, "%s: %s: out of host memory", b->name, what);
        return HN_ERR_NOMEM;
    }
    own = buf + (size_t)me * rec;
    ((xhead *)own)->status = status;
    memcpy(own + sizeof(xhead), mine, bytes);
    hn_sb_init(&why);
    st = hn_world_xchg(b->world, ranks, n, me, tag, own, rec, buf, 0, &why);
    if (st != HN_OK)
        hn_origin_fail(o, st, "%s: %s: %s", b->name, what, why.data != NULL ? why.data : hn_status_string(st));
    hn_sb_free(&why);
    for (int i = 0; i < n && st == HN_OK; i++)
        if (((const xhead *)(buf + (size_t)i * rec))->status != HN_OK) /* said by that member */
            st = status != HN_OK ? status : HN_ERR_ABORTED;
    for (int i = 0; i < n && st == HN_OK && all != NULL; i++)
        memcpy((char *)all + (size_t)i * bytes, buf + (size_t)i * rec + sizeof(xhead), bytes);
    hn_free(buf);
    return st;
}

hn_status_t hn_comm_team_xchg(hn_comm_team_base *t, int me, int kind, const char *what, hn_status_t status,
                              const void *mine, size_t bytes, void *all, const hn_origin *o)
{
    hn_comm_base *b = (hn_comm_base *)t->w;
    uint64_t key = (uint64_t)(unsigned char)b->name[0] << 8 | (unsigned char)b->name[1];
    char text[96];
    snprintf(text, sizeof(text), "%s a team of %d", what, t->n);
    return hn_comm_xchg(b, t->ranks, t->n, me, key << 48 ^ t->id << 24 ^ (uint64_t)kind << 20 ^ ++t->xchgs[me], text,
                        status, mine, bytes, all, o);
}

uint64_t hn_comm_seq_key(const hn_origin *o, uint64_t seq)
{
    uint32_t ep;
    if (o == NULL || o->graph == NULL)
        return seq;
    ep = __atomic_load_n(&o->graph->ep[0], __ATOMIC_ACQUIRE);
    return (1ull << 63) | (o->graph->id << 32) | (uint32_t)(seq + ep);
}

hn_comm_p2p_job *hn_comm_p2p_job_new(hn_comm_world *w, int rank, const hn_p2p_op *ops, int n, int nranks,
                                     uint64_t *send_seq, uint64_t *recv_seq)
{
    hn_comm_p2p_job *j = hn_calloc(1, sizeof(*j));
    if (j == NULL)
        return NULL;
    j->ops = hn_malloc((size_t)n * sizeof(*ops) + 1);
    j->seqs = hn_malloc((size_t)n * sizeof(uint64_t) + 1);
    if (j->ops == NULL || j->seqs == NULL) {
        hn_comm_p2p_job_free(j);
        return NULL;
    }
    memcpy(j->ops, ops, (size_t)n * sizeof(*ops));
    j->w = w;
    j->rank = rank;
    j->n = n;
    for (int i = 0; i < n; i++)
        j->seqs[i] = ops[i].is_send ? send_seq[rank * nranks + ops[i].peer]++ : recv_seq[ops[i].peer * nranks + rank]++;
    return j;
}

void hn_comm_p2p_job_free(void *job)
{
    hn_comm_p2p_job *j = job;
    hn_free(j->ops);
    hn_free(j->seqs);
    hn_free(j);
}
