/* The builders of the lowering's generated code (lower_int.h): IR made
 * through ir.h's constructors, as the parser would make it from the
 * code's text (a negative number as -(n), via only where the code says
 * it), appended where the statement's code goes now; and the stream
 * scaffold of the pipelines (fan-out, join). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "../ir/parse.h"
#include "lower_int.h"

void hn_lower_nomem(hn_lower *L)
{
    if (L->st == HN_OK)
        L->st = HN_ERR_NOMEM;
}

hn_expr *hn_lower_num(int64_t v) { return v < 0 ? hn_ex_unary(HN_EX_NEG, hn_ex_int(-v)) : hn_ex_int(v); }

hn_expr *hn_lower_stream_index(int i, int S)
{
    return S == 1 ? hn_ex_int(0) : hn_ex_bin(HN_B_MOD, hn_ex_var(i), hn_ex_int(S));
}

hn_expr *hn_lower_peer(hn_binop op, hn_expr *e)
{
    return hn_ex_bin(HN_B_MOD, hn_ex_bin(op, hn_ex_leaf(HN_EX_RANK), e), hn_ex_leaf(HN_EX_WORLD));
}

int hn_lower_fresh(hn_lower *L, const char *base)
{
    char buf[64];
    int var, f = 0, k;
    while (f < L->nfresh && strcmp(L->fresh[f].base, base) != 0)
        f++;
    k = f < L->nfresh ? L->fresh[f].k : 0;
    for (;; k++) { /* base, base_1, base_2, ... */
        if (k == 0)
            snprintf(buf, sizeof(buf), "%s", base);
        else
            snprintf(buf, sizeof(buf), "%s_%d", base, k);
        if (hn_prog_find_var(L->out, buf) < 0 && !hn_name_reserved(buf))
            break;
    }
    if ((var = hn_prog_var(L->out, buf, (int)strlen(buf))) < 0) {
        hn_lower_nomem(L);
    } else if (f < HN_ARRAY_LEN(L->fresh)) {
        L->fresh[f].base = base;
        L->fresh[f].k = k + 1;
        L->nfresh += f == L->nfresh;
    }
    return var;
}

hn_tref hn_lower_ref(hn_lower *L, int var, int nidx, ...)
{
    hn_tref t = {var, 0, NULL, 0, 0};
    va_list ap;
    va_start(ap, nidx);
    for (int i = 0; i < nidx; i++)
        if (hn_tref_push_idx(&t, va_arg(ap, hn_expr *)) != 0) /* (a missing index too) */
            hn_lower_nomem(L);
    va_end(ap);
    return t;
}

hn_tref hn_lower_ref_of(hn_lower *L, const hn_tref *t)
{
    hn_tref c;
    if (hn_tref_clone(&c, t) != 0)
        hn_lower_nomem(L);
    return c;
}

/* A new instruction of op at the end of b; NULL after an error. */
static hn_instr *add(hn_lower *L, hn_block *b, hn_op op)
{
    hn_instr *in;
    if (L->st == HN_OK && b == NULL) /* code outside a statement: a bug of this file */
        L->st = HN_ERR_RUNTIME;
    if (L->st != HN_OK)
        return NULL;
    if ((in = hn_instr_new(op, 0, 0)) == NULL || hn_block_push(b, in) != 0) {
        hn_instr_free(in);
        hn_lower_nomem(L);
        return NULL;
    }
    return in;
}

/* e into *slot (taken); missing: out of memory */
static void take(hn_lower *L, hn_expr **slot, hn_expr *e)
{
    *slot = e;
    if (e == NULL)
        hn_lower_nomem(L);
}

static void shape(hn_lower *L, hn_type *ty, int ndim, const int64_t *dims)
{
    for (int i = 0; i < ndim; i++)
        if (hn_type_push_dim(ty, hn_lower_num(dims[i])) != 0)
            hn_lower_nomem(L);
}

/* the code says via only for these (nothing for default or auto), and get
 * only of p2p */
static void set_via(hn_instr *in, hn_via via, hn_coll_algo protocol)
{
    if (via == HN_VIA_NCCL || via == HN_VIA_P2P || via == HN_VIA_LL) {
        in->via = (unsigned char)via;
        in->algo = via == HN_VIA_P2P && protocol == HN_ALGO_PULL ? HN_ALGO_PULL : HN_ALGO_AUTO;
    }
}

void hn_lower_alloc(hn_lower *L, int var, hn_dtype dtype, int ndim, const int64_t *dims)
{
    hn_instr *in = add(L, &L->top, HN_OP_ALLOC);
    if (in == NULL)
        return;
    in->dst = var;
    in->type.dtype = dtype;
    shape(L, &in->type, ndim, dims);
}

void hn_lower_view(hn_lower *L, int var, hn_tref src, int ndim, const int64_t *dims)
{
    hn_instr *in = add(L, L->at, HN_OP_VIEW);
    if (in == NULL) {
        hn_tref_clear(&src);
        return;
    }
    in->dst = var;
    in->a = src;
    shape(L, &in->type, ndim, dims);
}

void hn_lower_select(hn_lower *L, int var, hn_tref src, int axis, hn_expr *index)
{
    hn_instr *in = add(L, L->at, HN_OP_SELECT);
    if (in == NULL) {
        hn_tref_clear(&src);
        hn_expr_free(index);
        return;
    }
    in->dst = var;
    in->a = src;
    take(L, &in->e[0], hn_ex_int(axis));
    take(L, &in->e[1], index);
}

void hn_lower_let(hn_lower *L, int var, hn_expr *e)
{
    hn_instr *in = add(L, L->at, HN_OP_LET);
    if (in == NULL) {
        hn_expr_free(e);
        return;
    }
    in->dst = var;
    take(L, &in->e[0], e);
}

void hn_lower_current_stream(hn_lower *L, int var)
{
    hn_instr *in = add(L, L->at, HN_OP_CURRENT_STREAM);
    if (in != NULL)
        in->dst = var;
}

void hn_lower_stream_var(hn_lower *L, hn_op op, int var)
{
    hn_instr *in = add(L, L->at, op);
    if (in != NULL)
        in->sref_var = var;
}

void hn_lower_stream_at(hn_lower *L, hn_op op, hn_expr *index)
{
    hn_instr *in = add(L, L->at, op);
    if (in == NULL)
        hn_expr_free(index);
    else
        take(L, &in->sref_index, index);
}

void hn_lower_p2p(hn_lower *L, hn_op op, hn_tref buf, hn_expr *peer, hn_via via, hn_coll_algo protocol)
{
    hn_instr *in = add(L, L->at, op);
    if (in == NULL) {
        hn_tref_clear(&buf);
        hn_expr_free(peer);
        return;
    }
    in->a = buf;
    take(L, &in->e[0], peer);
    set_via(in, via, protocol);
}

void hn_lower_coll(hn_lower *L, hn_op op, hn_tref out, hn_tref src, int redop, hn_expr *root, hn_via via,
                   hn_coll_algo protocol)
{
    hn_instr *in = add(L, L->at, op);
    if (in == NULL) {
        hn_tref_clear(&out);
        hn_tref_clear(&src);
        hn_expr_free(root);
        return;
    }
    in->a = out;
    in->b = src;
    if (redop >= 0)
        in->redop = (unsigned char)redop;
    if (hn_op_table[op].flags & HN_OPF_ROOT)
        take(L, &in->e[0], root);
    else
        hn_expr_free(root);
    set_via(in, via, protocol);
}

void hn_lower_compute(hn_lower *L, hn_op op, hn_tref dst, int nargs, ...)
{
    hn_instr *in = add(L, L->at, op);
    va_list ap;
    if (in != NULL)
        in->a = dst;
    else
        hn_tref_clear(&dst);
    va_start(ap, nargs);
    for (int i = 0; i < nargs; i++) {
        hn_tref t = va_arg(ap, hn_tref);
        hn_arg *arg = in != NULL ? hn_instr_push_arg(in) : NULL;
        if (arg == NULL) {
            hn_lower_nomem(L);
            hn_tref_clear(&t);
            continue;
        }
        arg->is_tensor = 1;
        arg->t = t;
    }
    va_end(ap);
}

hn_instr *hn_lower_for(hn_lower *L, int var, hn_expr *lo, hn_expr *hi, int64_t step)
{
    hn_instr *in = add(L, L->at, HN_OP_FOR);
    if (in == NULL) {
        hn_expr_free(lo);
        hn_expr_free(hi);
        return NULL;
    }
    in->dst = var;
    take(L, &in->e[0], lo);
    take(L, &in->e[1], hi);
    if (step != 1)
        take(L, &in->e[2], hn_lower_num(step));
    return in;
}

hn_instr *hn_lower_if(hn_lower *L, hn_expr *cond)
{
    hn_instr *in = add(L, L->at, HN_OP_IF);
    if (in == NULL)
        hn_expr_free(cond);
    else
        take(L, &in->e[0], cond);
    return in;
}

hn_instr *hn_lower_group(hn_lower *L) { return add(L, L->at, HN_OP_GROUP); }

hn_block *hn_lower_steps(hn_lower *L, const char *name, int64_t steps, int S, int *var)
{
    hn_block *body;
    *var = hn_lower_fresh(L, name);
    body = hn_lower_open(L, hn_lower_for(L, *var, hn_ex_int(0), hn_ex_int(steps), 1), 0);
    hn_lower_stream_at(L, HN_OP_SET_STREAM, hn_lower_stream_index(*var, S));
    return body;
}

void hn_lower_owner_piece(hn_lower *L, int t, int64_t u, int *owner, int *piece)
{
    *owner = hn_lower_fresh(L, "owner");
    hn_lower_let(L, *owner, hn_ex_bin(HN_B_DIV, hn_ex_var(t), hn_ex_int(u)));
    *piece = hn_lower_fresh(L, "piece");
    hn_lower_let(L, *piece, hn_ex_bin(HN_B_MOD, hn_ex_var(t), hn_ex_int(u)));
}

hn_block *hn_lower_open(hn_lower *L, hn_instr *in, int else_)
{
    hn_block *outer = L->at;
    L->at = in == NULL ? NULL : else_ ? &in->orelse : &in->body;
    return outer;
}

void hn_lower_close(hn_lower *L, hn_block *outer) { L->at = outer; }
/* ---- the stream scaffold ---- */

void hn_lower_fan_out(hn_lower *L, int caller, int steps, int S)
{
    int used = HN_MIN(steps, S), w;
    hn_instr *loop;
    hn_block *outer;
    hn_lower_current_stream(L, caller); /* caller = current_stream */
    if (used == 1) {
        hn_lower_stream_at(L, HN_OP_SET_STREAM, hn_ex_int(0)); /* set_stream stream(0) */
        hn_lower_stream_var(L, HN_OP_WAIT_STREAM, caller);     /* wait_stream caller */
        return;
    }
    /* for w in 0 .. used { set_stream stream(w); wait_stream caller } */
    w = hn_lower_fresh(L, "w");
    loop = hn_lower_for(L, w, hn_ex_int(0), hn_ex_int(used), 1);
    outer = hn_lower_open(L, loop, 0);
    hn_lower_stream_at(L, HN_OP_SET_STREAM, hn_ex_var(w));
    hn_lower_stream_var(L, HN_OP_WAIT_STREAM, caller);
    hn_lower_close(L, outer);
}

void hn_lower_join(hn_lower *L, int caller, int steps, int S)
{
    int used = HN_MIN(steps, S), w;
    hn_instr *loop;
    hn_block *outer;
    hn_lower_stream_var(L, HN_OP_SET_STREAM, caller); /* set_stream caller */
    if (used == 1) {
        hn_lower_stream_at(L, HN_OP_WAIT_STREAM, hn_ex_int(0)); /* wait_stream stream(0) */
        return;
    }
    /* for w in 0 .. used { wait_stream stream(w) } */
    w = hn_lower_fresh(L, "w");
    loop = hn_lower_for(L, w, hn_ex_int(0), hn_ex_int(used), 1);
    outer = hn_lower_open(L, loop, 0);
    hn_lower_stream_at(L, HN_OP_WAIT_STREAM, hn_ex_var(w));
    hn_lower_close(L, outer);
}
