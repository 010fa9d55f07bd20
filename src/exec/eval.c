/* The evaluator: walks a program for one rank and issues each instruction
 * onto the current stream (or, in a dry run, only checks it). Dispatch is
 * generated from ops.def; each instruction handler validates its operands
 * the same way in both modes, so the verifier and the runtime cannot
 * disagree about what a program means. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "eval_int.h"
#include "../ranks/rank.h"

#define DRY_BASE ((uintptr_t)1 << 20) /* fake address of dry-run buffers */

/* ---- memory and views ---- */

/* Contiguous strides for t, or an error naming the tensor and the values
 * when its size overflows. */
static hn_status_t make_contiguous(hn_exec *x, const hn_instr *in, hn_tensor *t, const char *what)
{
    char text[256];
    if (hn_tensor_make_contiguous(t) == 0)
        return HN_OK;
    hn_shape_overflow_text(t, text, sizeof(text));
    return fail(x, in, HN_ERR_RUNTIME, "%s: %s", what, text);
}

/* The count of allocations instruction `id` made so far this run, to
 * update; NULL when out of memory. */
static int *occurrence_of(hn_exec *x, int id)
{
    uint32_t mask;
    if (2 * (x->noccurrence + 1) > x->occurrence_cap) { /* grow: at most half full */
        int cap = x->occurrence_cap ? 2 * x->occurrence_cap : 64, *old = x->occurrence, oldcap = x->occurrence_cap;
        int *t = hn_calloc((size_t)cap, 2 * sizeof(int));
        if (t == NULL)
            return NULL;
        x->occurrence = t;
        x->occurrence_cap = cap;
        for (int i = 0; i < oldcap; i++)
            if (old[2 * i] != 0) {
                uint32_t m = (uint32_t)cap - 1, h = ((uint32_t)old[2 * i] * 2654435761u) & m;
                while (t[2 * h] != 0)
                    h = (h + 1) & m;
                t[2 * h] = old[2 * i];
                t[2 * h + 1] = old[2 * i + 1];
            }
        hn_free(old);
    }
    mask = (uint32_t)x->occurrence_cap - 1;
    for (uint32_t h = ((uint32_t)(id + 1) * 2654435761u) & mask;; h = (h + 1) & mask) {
        if (x->occurrence[2 * h] == id + 1)
            return &x->occurrence[2 * h + 1];
        if (x->occurrence[2 * h] == 0) {
            x->occurrence[2 * h] = id + 1;
            x->noccurrence++;
            return &x->occurrence[2 * h + 1];
        }
    }
}

hn_status_t hn_exec_ALLOC(hn_exec *x, const hn_instr *in)
{
    hn_value *v = &x->vals[in->dst];
    hn_tensor t;
    int64_t numel;
    char what[160];
    memset(&t, 0, sizeof(t));
    t.dtype = in->type.dtype;
    if (x->promote && (t.dtype == HN_BF16 || t.dtype == HN_F16))
        t.dtype = HN_F32;
    t.ndim = in->type.ndim;
    for (int i = 0; i < t.ndim; i++) {
        if (eval(x, in, in->type.shape[i], &t.shape[i]) != HN_OK)
            return x->status;
        if (t.shape[i] < 0)
            return fail(x, in, HN_ERR_RUNTIME, "dimension %d is negative (%lld)", i,
                        (long long)t.shape[i]);
    }
    snprintf(what, sizeof(what), "shape of '%s'", vname(x, in->dst));
    if (make_contiguous(x, in, &t, what) != HN_OK)
        return x->status;
    numel = hn_tensor_numel(&t);
    if (x->dry) {
        t.data = (void *)DRY_BASE;
        if (x->log != NULL) {
            int *occ;
            if (count_record(x, in) != HN_OK)
                return x->status;
            if ((occ = occurrence_of(x, in->id)) == NULL ||
                hn_comm_log_add_alloc(x->log, in->id, *occ, hn_tensor_bytes(&t)) != HN_OK)
                return fail(x, in, HN_ERR_NOMEM, "out of memory");
            (*occ)++;
        }
    } else {
        int *count = occurrence_of(x, in->id), occ;
        hn_status_t st;
        if (count == NULL)
            return fail(x, in, HN_ERR_NOMEM, "out of memory");
        occ = (*count)++;
        st = hn_rank_alloc_cached(x->r, x->p, in->id, occ, hn_tensor_bytes(&t), &t.data);
        if (st != HN_OK)
            return fail(x, in, st, "cannot allocate '%s': %zu bytes", vname(x, in->dst), hn_tensor_bytes(&t));
        if (x->poison && numel > 0) {
            hn_dstream *s;
            hn_origin o = origin_of(x, in);
            if (cur_stream(x, in, &s) != HN_OK ||
                issued(x, in, x->rt->compute->fill(s, &t, hn_dtype_is_float(t.dtype) ? NAN : -123456789.0, &o),
                       "poison fill") != HN_OK)
                return x->status;
        }
    }
    v->kind = HN_V_TENSOR;
    v->t = t;
    v->owned = 1;
    return HN_OK;
}

hn_status_t hn_exec_FREE(hn_exec *x, const hn_instr *in)
{
    hn_value *v = &x->vals[in->a.var];
    if (v->kind != HN_V_TENSOR || !v->owned)
        return fail(x, in, HN_ERR_RUNTIME, "'%s' is not an allocation of this program",
                    vname(x, in->a.var));
    /* the block stays in the rank's cache for the next run */
    v->kind = HN_V_UNDEF;
    return HN_OK;
}

static hn_status_t define_view(hn_exec *x, const hn_instr *in, const hn_tensor *t)
{
    hn_value *v = &x->vals[in->dst];
    v->kind = HN_V_TENSOR;
    v->t = *t;
    v->owned = 0;
    return HN_OK;
}

hn_status_t hn_exec_VIEW(hn_exec *x, const hn_instr *in)
{
    hn_tensor t, nt;
    char what[160];
    if (tensor_of(x, in, &in->a, &t) != HN_OK || need_contiguous(x, in, &t, "the viewed tensor") != HN_OK)
        return x->status;
    nt = t;
    nt.ndim = in->type.ndim;
    for (int i = 0; i < nt.ndim; i++) {
        if (eval(x, in, in->type.shape[i], &nt.shape[i]) != HN_OK)
            return x->status;
        if (nt.shape[i] < 0)
            return fail(x, in, HN_ERR_RUNTIME, "dimension %d is negative", i);
    }
    snprintf(what, sizeof(what), "view of '%s'", vname(x, in->a.var));
    if (make_contiguous(x, in, &nt, what) != HN_OK)
        return x->status;
    if (hn_tensor_numel(&nt) != hn_tensor_numel(&t)) {
        char a[96], b[96];
        hn_tensor_shape_text(&t, a, sizeof(a));
        hn_tensor_shape_text(&nt, b, sizeof(b));
        return fail(x, in, HN_ERR_RUNTIME, "view changes the element count: %s as %s", a, b);
    }
    return define_view(x, in, &nt);
}

static hn_status_t axis_arg(hn_exec *x, const hn_instr *in, const hn_expr *e, const hn_tensor *t,
                            int64_t *axis)
{
    if (eval(x, in, e, axis) != HN_OK)
        return x->status;
    if (*axis < 0 || *axis >= t->ndim)
        return fail(x, in, HN_ERR_RUNTIME, "axis %lld out of range for a %d-d tensor",
                    (long long)*axis, t->ndim);
    return HN_OK;
}

hn_status_t hn_exec_SELECT(hn_exec *x, const hn_instr *in)
{
    hn_tensor t;
    int64_t axis, idx;
    if (tensor_of(x, in, &in->a, &t) != HN_OK || axis_arg(x, in, in->e[0], &t, &axis) != HN_OK ||
        eval(x, in, in->e[1], &idx) != HN_OK)
        return x->status;
    if (idx < 0 || idx >= t.shape[axis])
        return fail(x, in, HN_ERR_RUNTIME, "index %lld out of range [0, %lld) on axis %lld",
                    (long long)idx, (long long)t.shape[axis], (long long)axis);
    drop_axis(&t, (int)axis, idx);
    return define_view(x, in, &t);
}

hn_status_t hn_exec_CHUNK(hn_exec *x, const hn_instr *in)
{
    hn_tensor t;
    int64_t axis, n, i, size;
    if (tensor_of(x, in, &in->a, &t) != HN_OK || axis_arg(x, in, in->e[0], &t, &axis) != HN_OK ||
        eval(x, in, in->e[1], &n) != HN_OK || eval(x, in, in->e[2], &i) != HN_OK)
        return x->status;
    if (n <= 0 || t.shape[axis] % n != 0)
        return fail(x, in, HN_ERR_RUNTIME, "axis %lld of size %lld does not split into %lld chunks",
                    (long long)axis, (long long)t.shape[axis], (long long)n);
    if (i < 0 || i >= n)
        return fail(x, in, HN_ERR_RUNTIME, "chunk %lld out of range [0, %lld)", (long long)i, (long long)n);
    size = t.shape[axis] / n;
    advance(&t, i * size * t.stride[axis]);
    t.shape[axis] = size;
    return define_view(x, in, &t);
}

hn_status_t hn_exec_TRANSPOSE(hn_exec *x, const hn_instr *in)
{
    hn_tensor t;
    int64_t a, b, tmp;
    if (tensor_of(x, in, &in->a, &t) != HN_OK || axis_arg(x, in, in->e[0], &t, &a) != HN_OK ||
        axis_arg(x, in, in->e[1], &t, &b) != HN_OK)
        return x->status;
    tmp = t.shape[a];
    t.shape[a] = t.shape[b];
    t.shape[b] = tmp;
    tmp = t.stride[a];
    t.stride[a] = t.stride[b];
    t.stride[b] = tmp;
    return define_view(x, in, &t);
}

hn_status_t hn_exec_LET(hn_exec *x, const hn_instr *in)
{
    int64_t v;
    if (eval(x, in, in->e[0], &v) != HN_OK)
        return x->status;
    x->ivals[in->dst] = v;
    x->vals[in->dst].kind = HN_V_INT;
    return HN_OK;
}

/* ---- streams ---- */

static hn_status_t stream_index(hn_exec *x, const hn_instr *in, const hn_expr *e, int *out)
{
    int64_t k;
    if (eval(x, in, e, &k) != HN_OK)
        return x->status;
    if (k < 0 || k >= HN_MAX_STREAMS)
        return fail(x, in, HN_ERR_RUNTIME, "stream %lld out of range [0, %d)", (long long)k, HN_MAX_STREAMS);
    *out = (int)k;
    return HN_OK;
}

static hn_status_t streamref(hn_exec *x, const hn_instr *in, int *out)
{
    const hn_value *v;
    if (in->sref_index != NULL)
        return stream_index(x, in, in->sref_index, out);
    v = &x->vals[in->sref_var];
    if (v->kind != HN_V_STREAM)
        return fail(x, in, HN_ERR_RUNTIME, "'%s' is not a stream", vname(x, in->sref_var));
    *out = v->stream;
    return HN_OK;
}

hn_status_t hn_exec_CURRENT_STREAM(hn_exec *x, const hn_instr *in)
{
    x->vals[in->dst].kind = HN_V_STREAM;
    x->vals[in->dst].stream = x->cur;
    return HN_OK;
}

hn_status_t hn_exec_STREAM(hn_exec *x, const hn_instr *in)
{
    int k = 0;
    if (stream_index(x, in, in->e[0], &k) != HN_OK)
        return x->status;
    x->vals[in->dst].kind = HN_V_STREAM;
    x->vals[in->dst].stream = k;
    return HN_OK;
}

/* A dry run notes each pool stream it uses: they are made before runs
 * (with their cuBLASLt workspaces), never in the middle of one. */
static void note_stream(hn_exec *x, int k)
{
    if (k >= 0)
        x->streams_used |= 1u << k;
}

hn_status_t hn_exec_SET_STREAM(hn_exec *x, const hn_instr *in)
{
    int k = 0;
    hn_dstream *s;
    if (streamref(x, in, &k) != HN_OK)
        return x->status;
    note_stream(x, k);
    if (!x->dry && stream_at(x, in, k, &s) != HN_OK)
        return x->status;
    x->cur = k;
    return HN_OK;
}

hn_status_t hn_exec_WAIT_STREAM(hn_exec *x, const hn_instr *in)
{
    int k = 0;
    hn_dstream *src, *dst;
    hn_devent *ev;
    hn_origin o;
    if (streamref(x, in, &k) != HN_OK)
        return x->status;
    note_stream(x, k);
    if (x->dry || k == x->cur)
        return HN_OK;
    if (stream_at(x, in, k, &src) != HN_OK || cur_stream(x, in, &dst) != HN_OK)
        return x->status;
    /* one event per source stream suffices: a wait captures the record made
     * just before it, and a later record does not change earlier waits */
    ev = x->r->stream_event[k + 1];
    o = origin_of(x, in);
    if (issued(x, in, x->rt->dev->event_record(ev, src), "event record") != HN_OK ||
        issued(x, in, x->rt->dev->stream_wait_event(dst, ev, &o), "stream wait") != HN_OK)
        return x->status;
    return HN_OK;
}

hn_status_t hn_exec_HOST_SYNC(hn_exec *x, const hn_instr *in)
{
    hn_dstream *s;
    if (x->dry)
        return HN_OK;
    if (x->graph != NULL) /* a graph runs without the host */
        return fail(x, in, HN_ERR_UNSUPPORTED, "host_sync cannot be captured in a graph (it makes the host wait "
                    "for the devices)");
    if (cur_stream(x, in, &s) != HN_OK)
        return x->status;
    return issued(x, in, x->rt->dev->stream_sync(s), "host sync");
}

/* ---- control ---- */

static int stopped(const hn_exec *x)
{
    return x->status != HN_OK || (!x->dry && __atomic_load_n(x->rt->abort_flag, __ATOMIC_ACQUIRE));
}

hn_status_t hn_exec_FOR(hn_exec *x, const hn_instr *in)
{
    int64_t lo, hi, step = 1;
    if (eval(x, in, in->e[0], &lo) != HN_OK || eval(x, in, in->e[1], &hi) != HN_OK ||
        (in->e[2] != NULL && eval(x, in, in->e[2], &step) != HN_OK))
        return x->status;
    if (step == 0)
        return fail(x, in, HN_ERR_RUNTIME, "loop step is zero");
    /* the trip count in unsigned arithmetic (hi - lo may not fit in int64);
     * a dry run refuses at once a loop longer than it may play */
    if (step > 0 ? lo < hi : lo > hi) {
        uint64_t span = step > 0 ? (uint64_t)hi - (uint64_t)lo : (uint64_t)lo - (uint64_t)hi;
        uint64_t by = step > 0 ? (uint64_t)step : 0 - (uint64_t)step;
        uint64_t trips = (span - 1) / by + 1;
        if (x->dry && trips > (uint64_t)HN_DRY_RUN_BUDGET)
            return fail(x, in, HN_ERR_VERIFY, "a loop of %llu iterations: the dry run plays at most %d instructions",
                        (unsigned long long)trips, HN_DRY_RUN_BUDGET);
        for (uint64_t k = 0; k < trips; k++) {
            /* lo + k * step fits: it lies between lo and hi */
            x->ivals[in->dst] = (int64_t)((uint64_t)lo + k * (uint64_t)step);
            x->vals[in->dst].kind = HN_V_INT;
            if (hn_exec_block(x, &in->body) != HN_OK)
                return x->status;
            if (stopped(x))
                return x->status != HN_OK ? x->status : HN_ERR_ABORTED;
        }
    }
    return HN_OK;
}

hn_status_t hn_exec_IF(hn_exec *x, const hn_instr *in)
{
    int64_t c;
    if (eval(x, in, in->e[0], &c) != HN_OK)
        return x->status;
    return hn_exec_block(x, c ? &in->body : &in->orelse);
}

/* ---- pipelined statements ---- */

/* Only the dry run before lowering meets a pipelined statement: it records
 * the statement's tensors, from which the scheduler (lower.c) sizes what it
 * generates; a run executes the lowered program instead. */
static hn_status_t exec_pipelined(hn_exec *x, const hn_instr *in)
{
    hn_pipe_rec rec;
    if (no_comm_in_reference(x, in) != HN_OK)
        return x->status;
    if (!x->dry)
        return fail(x, in, HN_ERR_UNSUPPORTED, "a pipelined statement runs lowered (hn_sched_lower)");
    memset(&rec, 0, sizeof(rec));
    rec.instr = in->id;
    rec.ntensors = 1 + in->nargs;
    if (tensor_of(x, in, &in->a, &rec.t[0]) != HN_OK)
        return x->status;
    for (int i = 0; i < in->nargs && i + 1 < HN_ARRAY_LEN(rec.t); i++)
        if (tensor_of(x, in, &in->args[i].t, &rec.t[i + 1]) != HN_OK)
            return x->status;
    if (x->log != NULL && hn_comm_log_add_pipe(x->log, &rec) != HN_OK)
        return fail(x, in, HN_ERR_NOMEM, "out of memory");
    return HN_OK;
}

#define PIPE(E) \
    hn_status_t hn_exec_##E(hn_exec *x, const hn_instr *in) { return exec_pipelined(x, in); }
PIPE(AG_MATMUL)
PIPE(AG_LINEAR)
PIPE(MATMUL_RS)
PIPE(LINEAR_RS)
PIPE(MATMUL_AR)
PIPE(LINEAR_AR)
PIPE(PIPE_ALLGATHER)
PIPE(PIPE_REDUCE_SCATTER)
PIPE(PIPE_ALLREDUCE)
#undef PIPE

/* ---- dispatch ---- */

typedef hn_status_t (*exec_fn)(hn_exec *x, const hn_instr *in);

static const exec_fn dispatch[HN_OP_COUNT] = {
#define HN_OP(e, kw, form, sig, flags) [HN_OP_##e] = hn_exec_##e,
#include "../ir/ops.def"
};

hn_status_t hn_exec_block(hn_exec *x, const hn_block *b)
{
    for (int i = 0; i < b->n; i++) {
        const hn_instr *in = b->items[i];
        if (x->dry && --x->budget < 0)
            return fail(x, in, HN_ERR_VERIFY, "the dry run gave up after %d instructions",
                        HN_DRY_RUN_BUDGET);
        if (x->r != NULL) {
            __atomic_store_n(&x->r->current_instr, in->id, __ATOMIC_RELAXED);
            if ((hn_op_table[in->op].flags & HN_OPF_COMM) && x->graph == NULL)
                __atomic_store_n(&x->r->last_comm, in->id, __ATOMIC_RELAXED);
        }
        if (!x->dry && !x->reference && x->rt->faults.n > 0) {
            if (inject_faults(x, in) != HN_OK)
                return x->status != HN_OK ? x->status : HN_ERR_ABORTED;
            if (x->fault_skip) { /* an injected skip: not issued at all */
                x->fault_skip = 0;
                continue;
            }
        }
        /* tracing off costs this one branch */
        if ((x->trace != NULL ? hn_exec_traced(x, in, dispatch[in->op]) : dispatch[in->op](x, in)) != HN_OK)
            return x->status != HN_OK ? x->status : HN_ERR_RUNTIME;
        if (stopped(x))
            return x->status != HN_OK ? x->status : HN_ERR_ABORTED;
    }
    return HN_OK;
}

hn_status_t hn_exec_prepare(hn_exec *x, const hn_program *p, int rank, int world, int nstreams,
                            const int64_t *params)
{
    memset(x, 0, sizeof(*x));
    x->p = p;
    x->rank = rank;
    x->world = world;
    x->nstreams = nstreams;
    x->cur = HN_CALLER_STREAM;
    x->last_comm = -1;
    x->last_event = -1;
    x->err_instr = -1;
    x->budget = HN_DRY_RUN_BUDGET;
    x->records = HN_DRY_RUN_RECORDS;
    x->vals = hn_calloc((size_t)p->nvars, sizeof(*x->vals));
    x->ivals = hn_calloc((size_t)p->nvars, sizeof(*x->ivals));
    if (x->vals == NULL || x->ivals == NULL) {
        hn_exec_release(x);
        return HN_ERR_NOMEM;
    }
    for (int i = 0; i < p->nparams; i++) {
        x->ivals[p->params[i].var] = params[i];
        x->vals[p->params[i].var].kind = HN_V_INT;
    }
    return HN_OK;
}

void hn_exec_release(hn_exec *x)
{
    hn_free(x->vals);
    hn_free(x->ivals);
    hn_free(x->occurrence);
    hn_free(x->event_of);
    x->event_of = NULL;
    x->vals = NULL;
    x->ivals = NULL;
    x->occurrence = NULL;
    x->noccurrence = x->occurrence_cap = 0;
}
