/* The evaluator's private part, shared by its files: eval.c (the
 * interpreter: state, dispatch, control flow, values, memory, views,
 * streams, pipelined statements), eval_comm.c (communications),
 * eval_compute.c (compute ops) and eval_trace.c (a traced run's
 * instructions). The helpers below are static, as they were
 * in one file, so that the compiler inlines them as it did there: every
 * instruction passes through them (unused in a file is no warning). */
#ifndef HN_SCHED_EVAL_INT_H
#define HN_SCHED_EVAL_INT_H

#include <stdarg.h>
#include <stdio.h>

#include "eval.h"
#include "fault_inject.h"
#include "../ranks/rank.h"
#include "../ranks/run_error.h"

/* One handler per instruction of ops.def, called through the dispatch
 * table (eval.c); each checks its operands the same way in a dry run and
 * a real one. */
#define HN_OP(e, kw, form, sig, flags) hn_status_t hn_exec_##e(hn_exec *x, const hn_instr *in);
#include "../ir/ops.def"
#undef HN_OP

/* Issues one instruction of a traced run through its handler fn, the
 * recorder timing its issue and putting markers on its stream around the
 * work it issues there (eval_trace.c). */
hn_status_t hn_exec_traced(hn_exec *x, const hn_instr *in, hn_status_t (*fn)(hn_exec *x, const hn_instr *in));

#define HN_EVAL_HELPER static __attribute__((unused))

/* The error of instruction `in`: the first one kept in x (what a dry run
 * reports), and in a real run reported to the runtime's error slot. */
HN_EVAL_HELPER hn_status_t fail(hn_exec *x, const hn_instr *in, hn_status_t st, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

HN_EVAL_HELPER hn_status_t fail(hn_exec *x, const hn_instr *in, hn_status_t st, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (x->status == HN_OK) {
        x->status = st;
        x->err_instr = in != NULL ? in->id : -1;
        snprintf(x->err, sizeof(x->err), "%s", msg);
    }
    if (!x->dry)
        hn_runtime_fail(x->rt, x->rank, in != NULL ? in->id : -1, st, msg);
    return st;
}

HN_EVAL_HELPER hn_origin origin_of(const hn_exec *x, const hn_instr *in)
{
    hn_origin o = {x->dry ? NULL : &x->rt->sink, x->rank, in->id, x->trace_hook, x->graph};
    return o;
}

HN_EVAL_HELPER const char *vname(const hn_exec *x, int var) { return x->p->names[var]; }

/* The dry run logs every communication and allocation (for matching, for
 * the caches); a bound on the records bounds the verifier's memory and
 * time (20 million logged allreduces took 1.3 GB and 3 s to verify). */
HN_EVAL_HELPER hn_status_t count_record(hn_exec *x, const hn_instr *in)
{
    if (--x->records < 0)
        return fail(x, in, HN_ERR_VERIFY, "the dry run gave up after %d communications and allocations",
                    HN_DRY_RUN_RECORDS);
    return HN_OK;
}

HN_EVAL_HELPER hn_status_t eval(hn_exec *x, const hn_instr *in, const hn_expr *e, int64_t *out)
{
    hn_scalar_env env = {x->ivals, x->rank, x->world, x->nstreams};
    char err[160];
    if (hn_expr_eval(e, &env, out, err, sizeof(err)) != HN_OK)
        return fail(x, in, HN_ERR_RUNTIME, "%s", err);
    return HN_OK;
}

HN_EVAL_HELPER hn_status_t eval_num(hn_exec *x, const hn_instr *in, const hn_expr *e, double *out)
{
    hn_scalar_env env = {x->ivals, x->rank, x->world, x->nstreams};
    char err[160];
    if (hn_expr_eval_num(e, &env, out, err, sizeof(err)) != HN_OK)
        return fail(x, in, HN_ERR_RUNTIME, "%s", err);
    return HN_OK;
}

HN_EVAL_HELPER void advance(hn_tensor *t, int64_t elems)
{
    t->data = (void *)((uintptr_t)t->data + (uintptr_t)(elems * hn_dtype_size(t->dtype)));
}

/* Drops axis `ax` of t after moving the data pointer to index `idx`. */
HN_EVAL_HELPER void drop_axis(hn_tensor *t, int ax, int64_t idx)
{
    advance(t, idx * t->stride[ax]);
    for (int i = ax; i < t->ndim - 1; i++) {
        t->shape[i] = t->shape[i + 1];
        t->stride[i] = t->stride[i + 1];
    }
    t->ndim--;
}

HN_EVAL_HELPER hn_status_t tensor_of(hn_exec *x, const hn_instr *in, const hn_tref *tr, hn_tensor *out)
{
    const hn_value *v = &x->vals[tr->var];
    if (v->kind != HN_V_TENSOR)
        return fail(x, in, HN_ERR_RUNTIME, "'%s' is not a live tensor here", vname(x, tr->var));
    *out = v->t;
    for (int i = 0; i < tr->nidx; i++) {
        int64_t idx;
        if (eval(x, in, tr->idx[i], &idx) != HN_OK)
            return x->status;
        if (out->ndim == 0)
            return fail(x, in, HN_ERR_RUNTIME, "'%s' has too many indices", vname(x, tr->var));
        if (idx < 0 || idx >= out->shape[0])
            return fail(x, in, HN_ERR_RUNTIME, "index %lld out of range [0, %lld) of '%s'",
                        (long long)idx, (long long)out->shape[0], vname(x, tr->var));
        drop_axis(out, 0, idx);
    }
    return HN_OK;
}

HN_EVAL_HELPER int same_shape(const hn_tensor *a, const hn_tensor *b)
{
    if (a->ndim != b->ndim)
        return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i])
            return 0;
    return 1;
}

HN_EVAL_HELPER hn_status_t need_same_shape(hn_exec *x, const hn_instr *in, const hn_tensor *a,
                                   const hn_tensor *b, const char *what)
{
    char sa[96], sb[96];
    if (same_shape(a, b))
        return HN_OK;
    hn_tensor_shape_text(a, sa, sizeof(sa));
    hn_tensor_shape_text(b, sb, sizeof(sb));
    return fail(x, in, HN_ERR_RUNTIME, "%s: %s does not match %s", what, sa, sb);
}

HN_EVAL_HELPER hn_status_t need_contiguous(hn_exec *x, const hn_instr *in, const hn_tensor *t,
                                   const char *what)
{
    if (hn_tensor_is_contiguous(t))
        return HN_OK;
    return fail(x, in, HN_ERR_RUNTIME, "%s must be contiguous", what);
}

HN_EVAL_HELPER hn_status_t stream_at(hn_exec *x, const hn_instr *in, int idx, hn_dstream **out)
{
    hn_status_t st;
    if (idx == HN_CALLER_STREAM) {
        *out = x->r->active;
        return HN_OK;
    }
    if ((st = hn_rank_stream(x->r, idx, out)) != HN_OK)
        return fail(x, in, st, "stream %d was not made before the run", idx);
    return HN_OK;
}

HN_EVAL_HELPER hn_status_t cur_stream(hn_exec *x, const hn_instr *in, hn_dstream **out)
{
    return stream_at(x, in, x->cur, out);
}

HN_EVAL_HELPER hn_status_t issued(hn_exec *x, const hn_instr *in, hn_status_t st, const char *what)
{
    if (st != HN_OK)
        return fail(x, in, st, "cannot issue %s: %s", what, hn_status_string(st));
    return HN_OK;
}

HN_EVAL_HELPER hn_status_t no_comm_in_reference(hn_exec *x, const hn_instr *in)
{
    if (x->reference)
        return fail(x, in, HN_ERR_RUNTIME, "communication in the reference block");
    return HN_OK;
}

/* The eps of rmsnorm and allreduce_rmsnorm when none is written. */
#define HN_NORM_EPS 1e-6

/* What rmsnorm and allreduce_rmsnorm ask of their output (its rows: the
 * last axis), weight and eps. */
HN_EVAL_HELPER hn_status_t norm_check(hn_exec *x, const hn_instr *in, const hn_tensor *out, const hn_tensor *w,
                                      double eps)
{
    const char *what = hn_op_table[in->op].keyword;
    int64_t hidden = out->ndim > 0 ? out->shape[out->ndim - 1] : 0;
    if (out->dtype != HN_F32 && out->dtype != HN_BF16 && out->dtype != HN_F16)
        return fail(x, in, HN_ERR_RUNTIME, "%s normalizes f32, bf16 and f16, not %s", what,
                    hn_dtype_name(out->dtype));
    if (w->dtype != out->dtype)
        return fail(x, in, HN_ERR_RUNTIME, "%s: the weight is %s but the output %s", what, hn_dtype_name(w->dtype),
                    hn_dtype_name(out->dtype));
    if (out->ndim < 1 || w->ndim != 1 || w->shape[0] != hidden) {
        char so[96], sw[96];
        hn_tensor_shape_text(out, so, sizeof(so));
        hn_tensor_shape_text(w, sw, sizeof(sw));
        return fail(x, in, HN_ERR_RUNTIME, "%s normalizes rows (the last axis): a weight %s does not fit %s", what,
                    sw, so);
    }
    if (!(eps >= 0 && eps <= 3e38)) /* eps goes to the kernels as an f32 */
        return fail(x, in, HN_ERR_RUNTIME, "%s: eps %g is not a number from 0 to 3e38", what, eps);
    return HN_OK;
}

/* Injected faults (HIRNODE_FAULT, fault_inject.c), before `in` is issued. */
HN_EVAL_HELPER hn_status_t inject_faults(hn_exec *x, const hn_instr *in)
{
    char msg[512];
    hn_status_t st = hn_faults_set_off(x, in, msg, sizeof(msg));
    if (st != HN_OK && msg[0] != '\0')
        return fail(x, in, st, "%s", msg);
    return st;
}

#endif
