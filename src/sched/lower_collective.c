/* Lowering plain allgather, reduce_scatter and allreduce in chunks on
 * streams (docs/SCHEDULER.md). */
#include <stdio.h>

#include "lower_int.h"

/* plain allgather / reduce_scatter / allreduce in chunks */
void hn_lower_collective(hn_lower *L, const hn_lower_pipe *c)
{
    const hn_pipe_plan *pl = &c->plan;
    int n = L->world, S = pl->streams, steps = pl->chunks;
    long long E = c->sh.M; /* elements per rank's chunk (allreduce: all) */
    const char *kw = hn_op_table[c->in->op].keyword;
    char op[32] = "", buf[64], iv[64], ov[64], caller[64], j[64], d[64], q[64], v[64], st[80];
    if (c->sh.kind != HN_PIPE_AG)
        snprintf(op, sizeof(op), " op %s", hn_redop_name(c->in->redop));
    if (pl->strategy == HN_STRAT_SEQUENTIAL) {
        hn_lower_emit(L, "%s %s <- %s%s%s\n", kw, c->out, c->a, op, c->via);
        return;
    }
    hn_lower_fan_out(L, hn_lower_fresh(L, "caller", caller, sizeof(caller)), steps, S);
    if (pl->strategy == HN_STRAT_BROADCAST) { /* straight into the output */
        int u = steps / n;
        hn_lower_emit(L, "%s = view %s as [%d, %lld]\n", hn_lower_fresh(L, "pieces", iv, sizeof(iv)), c->a, u, E / u);
        hn_lower_emit(L, "%s = view %s as [%d, %d, %lld]\n", hn_lower_fresh(L, "out", ov, sizeof(ov)), c->out, n, u, E / u);
        hn_lower_fresh(L, "t", j, sizeof(j));
        hn_lower_stream_of(st, sizeof(st), j, S);
        hn_lower_emit(L, "for %s in 0 .. %d {\n  set_stream %s\n", j, steps, st);
        hn_lower_emit(L, "  %s = %s / %d\n  %s = %s %% %d\n", hn_lower_fresh(L, "owner", q, sizeof(q)), j, u, hn_lower_fresh(L, "piece", v, sizeof(v)),
             j, u);
        hn_lower_emit(L, "  broadcast %s[%s][%s] <- %s[%s] root %s%s\n}\n", ov, q, v, iv, v, q, c->via);
    } else if (c->sh.kind == HN_PIPE_AR) { /* contiguous chunks in place */
        hn_lower_emit(L, "%s = view %s as [%d, %lld]\n", hn_lower_fresh(L, "pieces", iv, sizeof(iv)), c->a, steps, E / steps);
        hn_lower_emit(L, "%s = view %s as [%d, %lld]\n", hn_lower_fresh(L, "out", ov, sizeof(ov)), c->out, steps, E / steps);
        hn_lower_fresh(L, "j", j, sizeof(j));
        hn_lower_stream_of(st, sizeof(st), j, S);
        hn_lower_emit(L, "for %s in 0 .. %d {\n  set_stream %s\n  allreduce %s[%s] <- %s[%s]%s%s\n}\n", j, steps, st, ov, j, iv,
             j, op, c->via);
    } else if (c->sh.kind == HN_PIPE_AG) { /* chunk j of every rank, then into place */
        hn_lower_fresh(L, "staged", buf, sizeof(buf));
        hn_sb_printf(&L->top, "%s = alloc %s[%d, %d, %lld]\n", buf, c->dt, steps, n, E / steps);
        hn_lower_emit(L, "%s = view %s as [%d, %lld]\n", hn_lower_fresh(L, "pieces", iv, sizeof(iv)), c->a, steps, E / steps);
        hn_lower_emit(L, "%s = view %s as [%d, %d, %lld]\n", hn_lower_fresh(L, "out", ov, sizeof(ov)), c->out, n, steps, E / steps);
        hn_lower_fresh(L, "j", j, sizeof(j));
        hn_lower_stream_of(st, sizeof(st), j, S);
        hn_lower_emit(L, "for %s in 0 .. %d {\n  set_stream %s\n  allgather %s[%s] <- %s[%s]%s\n", j, steps, st, buf, j, iv, j,
             c->via);
        hn_lower_emit(L, "  %s = select %s, 1, %s\n  copy %s <- %s[%s]\n}\n", hn_lower_fresh(L, "place", d, sizeof(d)), ov, j, d, buf, j);
    } else { /* reduce_scatter: chunk j of every block staged, then reduced */
        hn_lower_fresh(L, "staged", buf, sizeof(buf));
        hn_sb_printf(&L->top, "%s = alloc %s[%d, %d, %lld]\n", buf, c->dt, steps, n, E / steps);
        hn_lower_emit(L, "%s = view %s as [%d, %d, %lld]\n", hn_lower_fresh(L, "pieces", iv, sizeof(iv)), c->a, n, steps, E / steps);
        hn_lower_emit(L, "%s = view %s as [%d, %lld]\n", hn_lower_fresh(L, "out", ov, sizeof(ov)), c->out, steps, E / steps);
        hn_lower_fresh(L, "j", j, sizeof(j));
        hn_lower_stream_of(st, sizeof(st), j, S);
        hn_lower_emit(L, "for %s in 0 .. %d {\n  set_stream %s\n", j, steps, st);
        hn_lower_emit(L, "  %s = select %s, 1, %s\n  copy %s[%s] <- %s\n", hn_lower_fresh(L, "chunk", d, sizeof(d)), iv, j, buf, j, d);
        hn_lower_emit(L, "  reduce_scatter %s[%s] <- %s[%s]%s%s\n}\n", ov, j, buf, j, op, c->via);
    }
    hn_lower_join(L, caller, steps, S);
}
