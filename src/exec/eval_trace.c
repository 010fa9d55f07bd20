/* A traced run's instructions (eval.c calls hn_exec_traced for each while
 * x->trace is set): the recorder (src/trace/trace.c, a layer below) times
 * the issue and the device work; what only the evaluator knows — the
 * stream a wait names, a communication's bytes and peers — is evaluated
 * here, while the loop variables hold their values, and handed over. */
#include "../trace/trace.h"
#include "eval_int.h"

/* The span a wait waits for: the last one issued on the stream named
 * (wait_stream), or the communication named (wait); -1 if none. */
static int wait_dep(const hn_exec *x, const hn_instr *in)
{
    if (in->op == HN_OP_WAIT_STREAM) {
        int k;
        if (in->sref_index != NULL) {
            hn_scalar_env env = {x->ivals, x->rank, x->world, x->nstreams};
            int64_t v;
            char err[80];
            if (hn_expr_eval(in->sref_index, &env, &v, err, sizeof(err)) != HN_OK || v < 0 || v >= HN_MAX_STREAMS)
                return -1;
            k = (int)v;
        } else if (x->vals[in->sref_var].kind == HN_V_STREAM) {
            k = x->vals[in->sref_var].stream;
        } else {
            return -1;
        }
        return k == x->cur ? -1 : hn_trace_stream_span(x->trace, k);
    } else {
        int idx = x->last_comm;
        if (in->wait_var >= 0)
            idx = x->vals[in->wait_var].kind == HN_V_COMM ? x->vals[in->wait_var].comm : -1;
        return hn_trace_comm_span(x->trace, idx);
    }
}

/* Bytes of a tensor operand: its value without the indexed leading axes. */
static size_t tref_bytes(const hn_exec *x, const hn_tref *tr)
{
    const hn_value *v = &x->vals[tr->var];
    size_t n;
    if (v->kind != HN_V_TENSOR)
        return 0;
    n = (size_t)hn_dtype_size(v->t.dtype);
    for (int i = tr->nidx; i < v->t.ndim; i++)
        n *= (size_t)v->t.shape[i];
    return n;
}

/* A recorded communication's bytes, and its peers: the team of a
 * collective came with hn_trace_team while it was issued. */
static void comm_info(hn_exec *x, const hn_instr *in, const hn_trace_step *step)
{
    if (hn_op_table[in->op].form == HN_FORM_COLL) {
        size_t a = tref_bytes(x, &in->a), b = tref_bytes(x, &in->b);
        hn_trace_comm_bytes(x->trace, step, a > b ? a : b);
    } else {
        const hn_instr *const *ops = in->op == HN_OP_GROUP ? (const hn_instr *const *)in->body.items : &in;
        int nops = in->op == HN_OP_GROUP ? in->body.n : 1;
        hn_scalar_env env = {x->ivals, x->rank, x->world, x->nstreams};
        for (int i = 0; i < nops; i++) {
            int64_t peer;
            char err[80];
            if (hn_expr_eval(ops[i]->e[0], &env, &peer, err, sizeof(err)) != HN_OK || peer < 0 || peer >= x->world)
                continue;
            hn_trace_message(x->trace, step, ops[i]->op == HN_OP_SEND, (int)peer, (int)ops[i]->via,
                             tref_bytes(x, &ops[i]->a));
        }
    }
}

hn_status_t hn_exec_traced(hn_exec *x, const hn_instr *in, hn_status_t (*fn)(hn_exec *x, const hn_instr *in))
{
    hn_trace_step step;
    int comm = x->comm_next, dep = -1;
    hn_status_t st;
    if (in->op == HN_OP_WAIT_STREAM || in->op == HN_OP_WAIT)
        dep = wait_dep(x, in);
    if (!hn_trace_step_begin(x->trace, x->r, in, x->cur, dep, &step))
        return fn(x, in);
    st = fn(x, in);
    if (hn_trace_step_end(x->trace, in, &step, st, comm, x->comm_next != comm))
        comm_info(x, in, &step);
    return st;
}
