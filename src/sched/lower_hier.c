/* A plain allreduce of the whole world across nodes, lowered into three
 * collectives where the model finds it faster than one NCCL call on the
 * whole team (lower_int.h):
 *
 *   T = alloc dtype[count / M]                                (M ranks a node)
 *   reduce_scatter T <- X op R team range(rank / M * M, M)    inside the node, via as written
 *   allreduce T <- T op R team range(rank % M, nodes, M) via nccl    across the nodes
 *   allgather Y <- T team range(rank / M * M, M)              inside the node, via as written
 *
 * Only the second crosses the network, with 1/M of the bytes; the other
 * two go over the node's own links (the latency path, the copy engines or
 * NCCL, as `via auto` picks them there). A sum's order differs from one
 * call's (within the dtype's tolerance); max and min are the same bits. */
#include <string.h>

#include "../base/settings.h"
#include "lower_int.h"

/* The count and dtype every run of `in` had in the dry run (rank 0's), or 0. */
static size_t one_count(const hn_lower *L, const hn_instr *in, hn_dtype *dtype)
{
    const hn_comm_log *log = &L->logs[0];
    size_t count = 0;
    for (int i = 0; i < log->n; i++) {
        const hn_comm_rec *r = &log->recs[i];
        if (r->is_p2p || r->instr != in->id)
            continue;
        if (count != 0 && (r->count != count || r->dtype != *dtype))
            return 0; /* runs of other sizes: one buffer will not do */
        count = r->count;
        *dtype = r->dtype;
    }
    return count;
}

/* range(start, count[, stride]) on `in` (takes the expressions) */
static void set_range(hn_lower *L, hn_instr *in, hn_expr *start, hn_expr *count, hn_expr *stride, int strided)
{
    hn_expr **t = hn_calloc(3, sizeof(*t));
    if (in == NULL || t == NULL || start == NULL || count == NULL || (strided && stride == NULL)) {
        hn_expr_free(start);
        hn_expr_free(count);
        hn_expr_free(stride);
        hn_free(t);
        hn_lower_nomem(L);
        return;
    }
    t[0] = start;
    t[1] = count;
    t[2] = stride;
    in->team = t;
    in->nteam = strided ? 3 : 2;
    in->team_kind = HN_TEAM_RANGE;
}

/* The instruction hn_lower_coll just added, NULL after an error. */
static hn_instr *last_added(hn_lower *L)
{
    return L->st == HN_OK && L->at != NULL && L->at->n > 0 ? L->at->items[L->at->n - 1] : NULL;
}

int hn_lower_hier_allreduce(hn_lower *L, const hn_instr *in, hn_block *out)
{
    const int M = L->nodes > 0 ? L->world / L->nodes : 0;
    const char *mode = "auto";
    hn_dtype dtype = HN_F32;
    size_t count;
    int t;
    hn_instr *c;
    if (L->nodes < 2 || M < 2 || L->world % L->nodes != 0 || in->op != HN_OP_ALLREDUCE ||
        in->team_kind != HN_TEAM_ALL || (in->via != HN_VIA_AUTO && in->via != HN_VIA_DEFAULT))
        return 0;
    (void)hn_setting_word("hier_allreduce", &mode, NULL);
    if (strcmp(mode, "0") == 0 || (count = one_count(L, in, &dtype)) == 0 || count % (size_t)M != 0)
        return 0;
    if (strcmp(mode, "1") != 0 &&
        !hn_cost_hier_allreduce(L->prof, (double)count * hn_dtype_size(dtype), L->nodes, M))
        return 0;
    begin_stmt_of(L, in);
    if ((t = hn_lower_fresh(L, "across")) >= 0)
        hn_lower_alloc(L, t, dtype, HN_LOWER_DIMS((int64_t)(count / (size_t)M)));
    hn_lower_coll(L, HN_OP_REDUCE_SCATTER, hn_lower_ref(L, t, 0), hn_lower_ref_of(L, &in->b), in->redop, NULL,
                  HN_VIA_AUTO, HN_ALGO_AUTO);
    if ((c = last_added(L)) != NULL) {
        c->via = in->via;
        set_range(L, c, hn_ex_bin(HN_B_MUL, hn_ex_bin(HN_B_DIV, hn_ex_leaf(HN_EX_RANK), hn_lower_num(M)),
                                  hn_lower_num(M)),
                  hn_lower_num(M), NULL, 0);
    }
    hn_lower_coll(L, HN_OP_ALLREDUCE, hn_lower_ref(L, t, 0), hn_lower_ref(L, t, 0), in->redop, NULL, HN_VIA_NCCL,
                  HN_ALGO_AUTO);
    if ((c = last_added(L)) != NULL)
        set_range(L, c, hn_ex_bin(HN_B_MOD, hn_ex_leaf(HN_EX_RANK), hn_lower_num(M)), hn_lower_num(L->nodes),
                  hn_lower_num(M), 1);
    hn_lower_coll(L, HN_OP_ALLGATHER, hn_lower_ref_of(L, &in->a), hn_lower_ref(L, t, 0), -1, NULL, HN_VIA_AUTO,
                  HN_ALGO_AUTO);
    if ((c = last_added(L)) != NULL) {
        c->via = in->via;
        set_range(L, c, hn_ex_bin(HN_B_MUL, hn_ex_bin(HN_B_DIV, hn_ex_leaf(HN_EX_RANK), hn_lower_num(M)),
                                  hn_lower_num(M)),
                  hn_lower_num(M), NULL, 0);
    }
    if (L->notes != NULL)
        hn_sb_printf(L->notes, "line %d: allreduce across %d nodes: reduce_scatter inside each node, allreduce of "
                     "1/%d across them via nccl, allgather inside\n", in->line, L->nodes, M);
    end_stmt_of(L, out);
    return 1;
}
