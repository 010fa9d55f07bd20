/* The evaluator's compute ops: copy, cast, fill, iota, random, the
 * elementwise binaries, scale, sum, matmul, linear and rmsnorm, each checked, then
 * issued on the current stream through the compute table. */
#include <string.h>

#include "eval_int.h"

typedef struct operands {
    hn_tensor dst;
    hn_tensor t[4];
    double num[4];
    int64_t ival[4];
    int present[4];
} operands;

static hn_status_t operands_of(hn_exec *x, const hn_instr *in, operands *ops)
{
    /* the scalars only: tensors are read where present (a memset of the
     * whole struct, five tensors, was a third of the evaluator's cost of a
     * tiny instruction) */
    memset(ops->num, 0, sizeof(ops->num));
    memset(ops->ival, 0, sizeof(ops->ival));
    memset(ops->present, 0, sizeof(ops->present));
    if (tensor_of(x, in, &in->a, &ops->dst) != HN_OK)
        return x->status;
    for (int i = 0; i < in->nargs; i++) {
        const hn_arg *a = &in->args[i];
        ops->present[i] = 1;
        if (a->is_tensor) {
            if (tensor_of(x, in, &a->t, &ops->t[i]) != HN_OK)
                return x->status;
        } else if (a->e->kind == HN_EX_FLOAT || (a->e->kind == HN_EX_NEG && a->e->a->kind == HN_EX_FLOAT)) {
            if (eval_num(x, in, a->e, &ops->num[i]) != HN_OK)
                return x->status;
        } else {
            if (eval(x, in, a->e, &ops->ival[i]) != HN_OK)
                return x->status;
            ops->num[i] = (double)ops->ival[i];
        }
    }
    return HN_OK;
}

/* 1: issue on *s now; 0: nothing to issue (a dry run, or an empty
 * destination: x->status is ok) or an error (x->status says which). An
 * empty tensor may be a view whose other dimensions are too large to
 * multiply: no backend sees it. */
static int begin_issue(hn_exec *x, const hn_instr *in, const hn_tensor *dst, hn_dstream **s, hn_origin *o)
{
    if (x->dry || hn_tensor_numel(dst) == 0)
        return 0;
    *o = origin_of(x, in);
    return cur_stream(x, in, s) == HN_OK;
}

/* copy keeps the dtype; cast converts. */
static hn_status_t exec_copy_like(hn_exec *x, const hn_instr *in, int same_dtype)
{
    const char *what = hn_op_table[in->op].keyword;
    operands o;
    hn_dstream *s;
    hn_origin or;
    if (operands_of(x, in, &o) != HN_OK || need_same_shape(x, in, &o.dst, &o.t[0], what) != HN_OK)
        return x->status;
    if (same_dtype && o.dst.dtype != o.t[0].dtype)
        return fail(x, in, HN_ERR_RUNTIME, "copy from %s to %s: use cast", hn_dtype_name(o.t[0].dtype),
                    hn_dtype_name(o.dst.dtype));
    if (!begin_issue(x, in, &o.dst, &s, &or))
        return x->status;
    return issued(x, in, x->rt->compute->copy(s, &o.dst, &o.t[0], &or), what);
}

hn_status_t hn_exec_COPY(hn_exec *x, const hn_instr *in) { return exec_copy_like(x, in, 1); }
hn_status_t hn_exec_CAST(hn_exec *x, const hn_instr *in) { return exec_copy_like(x, in, 0); }

hn_status_t hn_exec_FILL(hn_exec *x, const hn_instr *in)
{
    operands o;
    hn_dstream *s;
    hn_origin or;
    if (operands_of(x, in, &o) != HN_OK)
        return x->status;
    if (!begin_issue(x, in, &o.dst, &s, &or))
        return x->status;
    return issued(x, in, x->rt->compute->fill(s, &o.dst, o.num[0], &or), hn_op_table[in->op].keyword);
}

hn_status_t hn_exec_IOTA(hn_exec *x, const hn_instr *in)
{
    operands o;
    hn_dstream *s;
    hn_origin or;
    if (operands_of(x, in, &o) != HN_OK)
        return x->status;
    if (!begin_issue(x, in, &o.dst, &s, &or))
        return x->status;
    return issued(x, in, x->rt->compute->iota(s, &o.dst, o.present[0] ? o.num[0] : 0.0, o.present[1] ? o.num[1] : 1.0, &or), hn_op_table[in->op].keyword);
}

hn_status_t hn_exec_RANDOM(hn_exec *x, const hn_instr *in)
{
    operands o;
    hn_dstream *s;
    hn_origin or;
    double lo, hi;
    if (operands_of(x, in, &o) != HN_OK)
        return x->status;
    lo = o.present[1] ? o.num[1] : hn_dtype_is_float(o.dst.dtype) ? -1.0 : -100.0;
    hi = o.present[2] ? o.num[2] : hn_dtype_is_float(o.dst.dtype) ? 1.0 : 100.0;
    if (!(lo < hi))
        return fail(x, in, HN_ERR_RUNTIME, "random range [%g, %g) is empty", lo, hi);
    if (!begin_issue(x, in, &o.dst, &s, &or))
        return x->status;
    return issued(x, in, x->rt->compute->random(s, &o.dst, (uint64_t)o.ival[0], lo, hi, &or), hn_op_table[in->op].keyword);
}

static hn_status_t exec_binary(hn_exec *x, const hn_instr *in, hn_redop op)
{
    operands o;
    hn_dstream *s;
    hn_origin or;
    const char *what = hn_op_table[in->op].keyword;
    if (operands_of(x, in, &o) != HN_OK || need_same_shape(x, in, &o.dst, &o.t[0], what) != HN_OK ||
        need_same_shape(x, in, &o.dst, &o.t[1], what) != HN_OK)
        return x->status;
    if (!begin_issue(x, in, &o.dst, &s, &or))
        return x->status;
    return issued(x, in, x->rt->compute->binary(s, op, &o.dst, &o.t[0], &o.t[1], &or), hn_op_table[in->op].keyword);
}

/* the elementwise ops are the reductions' (the compute table's binary) */
hn_status_t hn_exec_ADD(hn_exec *x, const hn_instr *in) { return exec_binary(x, in, HN_RED_SUM); }
hn_status_t hn_exec_MUL(hn_exec *x, const hn_instr *in) { return exec_binary(x, in, HN_RED_PROD); }
hn_status_t hn_exec_MAXIMUM(hn_exec *x, const hn_instr *in) { return exec_binary(x, in, HN_RED_MAX); }
hn_status_t hn_exec_MINIMUM(hn_exec *x, const hn_instr *in) { return exec_binary(x, in, HN_RED_MIN); }

hn_status_t hn_exec_SCALE(hn_exec *x, const hn_instr *in)
{
    operands o;
    hn_dstream *s;
    hn_origin or;
    if (operands_of(x, in, &o) != HN_OK || need_same_shape(x, in, &o.dst, &o.t[0], "scale") != HN_OK)
        return x->status;
    if (!begin_issue(x, in, &o.dst, &s, &or))
        return x->status;
    return issued(x, in, x->rt->compute->scale(s, &o.dst, &o.t[0], o.num[1], &or), hn_op_table[in->op].keyword);
}

hn_status_t hn_exec_SUM(hn_exec *x, const hn_instr *in)
{
    operands o;
    hn_dstream *s;
    hn_origin or;
    hn_tensor expect;
    if (operands_of(x, in, &o) != HN_OK)
        return x->status;
    if (o.ival[1] < 0 || o.ival[1] >= o.t[0].ndim)
        return fail(x, in, HN_ERR_RUNTIME, "axis %lld out of range for a %d-d tensor",
                    (long long)o.ival[1], o.t[0].ndim);
    expect = o.t[0];
    drop_axis(&expect, (int)o.ival[1], 0);
    if (need_same_shape(x, in, &o.dst, &expect, "sum output") != HN_OK)
        return x->status;
    if (!begin_issue(x, in, &o.dst, &s, &or))
        return x->status;
    return issued(x, in, x->rt->compute->sum(s, &o.dst, &o.t[0], (int)o.ival[1], &or), hn_op_table[in->op].keyword);
}

/* dst[.., M, N] = a[.., M, K] @ b ; b is [K, N] or [.., K, N] (matmul),
 * [N, K] (linear, with optional bias [N]). */
static hn_status_t check_matmul(hn_exec *x, const hn_instr *in, const operands *o, int linear)
{
    const hn_tensor *d = &o->dst, *a = &o->t[0], *b = &o->t[1];
    int64_t M, K, N, Kb;
    char sa[96], sb[96], sd[96];
    hn_tensor_shape_text(a, sa, sizeof(sa));
    hn_tensor_shape_text(b, sb, sizeof(sb));
    hn_tensor_shape_text(d, sd, sizeof(sd));
    if (a->ndim < 2 || b->ndim < 2 || d->ndim != a->ndim)
        return fail(x, in, HN_ERR_RUNTIME, "%s: shapes %s = %s x %s do not fit",
                    hn_op_table[in->op].keyword, sd, sa, sb);
    M = a->shape[a->ndim - 2];
    K = a->shape[a->ndim - 1];
    Kb = linear ? b->shape[b->ndim - 1] : b->shape[b->ndim - 2];
    N = linear ? b->shape[b->ndim - 2] : b->shape[b->ndim - 1];
    if (K != Kb || d->shape[d->ndim - 2] != M || d->shape[d->ndim - 1] != N ||
        (linear && b->ndim != 2) || (b->ndim != 2 && b->ndim != a->ndim))
        return fail(x, in, HN_ERR_RUNTIME, "%s: shapes %s = %s x %s do not fit",
                    hn_op_table[in->op].keyword, sd, sa, sb);
    for (int i = 0; i < a->ndim - 2; i++)
        if (d->shape[i] != a->shape[i] || (b->ndim > 2 && b->shape[i] != a->shape[i]))
            return fail(x, in, HN_ERR_RUNTIME, "%s: batch dimensions of %s = %s x %s differ",
                        hn_op_table[in->op].keyword, sd, sa, sb);
    if (linear && o->present[2] && (o->t[2].ndim != 1 || o->t[2].shape[0] != N))
        return fail(x, in, HN_ERR_RUNTIME, "linear: bias must be [%lld]", (long long)N);
    return HN_OK;
}

hn_status_t hn_exec_MATMUL(hn_exec *x, const hn_instr *in)
{
    operands o;
    hn_dstream *s;
    hn_origin or;
    if (operands_of(x, in, &o) != HN_OK || check_matmul(x, in, &o, 0) != HN_OK)
        return x->status;
    if (!begin_issue(x, in, &o.dst, &s, &or))
        return x->status;
    return issued(x, in, x->rt->compute->matmul(s, &o.dst, &o.t[0], &o.t[1], 0, NULL, &or), hn_op_table[in->op].keyword);
}

hn_status_t hn_exec_LINEAR(hn_exec *x, const hn_instr *in)
{
    operands o;
    hn_dstream *s;
    hn_origin or;
    if (operands_of(x, in, &o) != HN_OK || check_matmul(x, in, &o, 1) != HN_OK)
        return x->status;
    if (!begin_issue(x, in, &o.dst, &s, &or))
        return x->status;
    return issued(x, in, x->rt->compute->matmul(s, &o.dst, &o.t[0], &o.t[1], 1, o.present[2] ? &o.t[2] : NULL, &or), hn_op_table[in->op].keyword);
}

hn_status_t hn_exec_RMSNORM(hn_exec *x, const hn_instr *in)
{
    operands o;
    hn_dstream *s;
    hn_origin or;
    double eps;
    if (operands_of(x, in, &o) != HN_OK || need_same_shape(x, in, &o.dst, &o.t[0], "rmsnorm") != HN_OK)
        return x->status;
    eps = o.present[2] ? o.num[2] : HN_NORM_EPS;
    if (norm_check(x, in, &o.dst, &o.t[1], eps) != HN_OK)
        return x->status;
    if (!begin_issue(x, in, &o.dst, &s, &or))
        return x->status;
    return issued(x, in, x->rt->compute->rmsnorm(s, &o.dst, NULL, &o.t[0], NULL, &o.t[1], (float)eps, &or),
                  hn_op_table[in->op].keyword);
}
