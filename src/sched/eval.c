/* The evaluator: walks a program for one rank and issues each instruction
 * onto the current stream (or, in a dry run, only checks it). Dispatch is
 * generated from ops.def; each instruction handler validates its operands
 * the same way in both modes, so the verifier and the runtime cannot
 * disagree about what a program means. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cost.h"
#include "eval.h"
#include "fault_inject.h"
#include "rank.h"
#include "run_error.h"
#include "teams.h"
#include "trace.h"

#define DRY_BASE ((uintptr_t)1 << 20) /* fake address of dry-run buffers */

static hn_status_t fail(hn_exec *x, const hn_instr *in, hn_status_t st, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static hn_status_t fail(hn_exec *x, const hn_instr *in, hn_status_t st, const char *fmt, ...)
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

static hn_origin origin_of(const hn_exec *x, const hn_instr *in)
{
    hn_origin o = {x->dry ? NULL : &x->rt->sink, x->rank, in->id, x->trace_hook, x->graph};
    return o;
}

static const char *vname(const hn_exec *x, int var) { return x->p->names[var]; }

/* The dry run logs every communication and allocation (for matching, for
 * the caches); a bound on the records bounds the verifier's memory and
 * time (20 million logged allreduces took 1.3 GB and 3 s to verify). */
static hn_status_t count_record(hn_exec *x, const hn_instr *in)
{
    if (--x->records < 0)
        return fail(x, in, HN_ERR_VERIFY, "the dry run gave up after %d communications and allocations",
                    HN_DRY_RUN_RECORDS);
    return HN_OK;
}

static hn_status_t eval(hn_exec *x, const hn_instr *in, const hn_expr *e, int64_t *out)
{
    hn_scalar_env env = {x->ivals, x->rank, x->world, x->nstreams};
    char err[160];
    if (hn_expr_eval(e, &env, out, err, sizeof(err)) != HN_OK)
        return fail(x, in, HN_ERR_RUNTIME, "%s", err);
    return HN_OK;
}

static hn_status_t eval_num(hn_exec *x, const hn_instr *in, const hn_expr *e, double *out)
{
    hn_scalar_env env = {x->ivals, x->rank, x->world, x->nstreams};
    char err[160];
    if (hn_expr_eval_num(e, &env, out, err, sizeof(err)) != HN_OK)
        return fail(x, in, HN_ERR_RUNTIME, "%s", err);
    return HN_OK;
}

static void advance(hn_tensor *t, int64_t elems)
{
    t->data = (void *)((uintptr_t)t->data + (uintptr_t)(elems * hn_dtype_size(t->dtype)));
}

/* Drops axis `ax` of t after moving the data pointer to index `idx`. */
static void drop_axis(hn_tensor *t, int ax, int64_t idx)
{
    advance(t, idx * t->stride[ax]);
    for (int i = ax; i < t->ndim - 1; i++) {
        t->shape[i] = t->shape[i + 1];
        t->stride[i] = t->stride[i + 1];
    }
    t->ndim--;
}

static hn_status_t tensor_of(hn_exec *x, const hn_instr *in, const hn_tref *tr, hn_tensor *out)
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

static int same_shape(const hn_tensor *a, const hn_tensor *b)
{
    if (a->ndim != b->ndim)
        return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i])
            return 0;
    return 1;
}

static hn_status_t need_same_shape(hn_exec *x, const hn_instr *in, const hn_tensor *a,
                                   const hn_tensor *b, const char *what)
{
    char sa[96], sb[96];
    if (same_shape(a, b))
        return HN_OK;
    hn_tensor_shape_text(a, sa, sizeof(sa));
    hn_tensor_shape_text(b, sb, sizeof(sb));
    return fail(x, in, HN_ERR_RUNTIME, "%s: %s does not match %s", what, sa, sb);
}

static hn_status_t need_contiguous(hn_exec *x, const hn_instr *in, const hn_tensor *t,
                                   const char *what)
{
    if (hn_tensor_is_contiguous(t))
        return HN_OK;
    return fail(x, in, HN_ERR_RUNTIME, "%s must be contiguous", what);
}

static hn_status_t stream_at(hn_exec *x, const hn_instr *in, int idx, hn_dstream **out)
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

static hn_status_t cur_stream(hn_exec *x, const hn_instr *in, hn_dstream **out)
{
    return stream_at(x, in, x->cur, out);
}

static hn_status_t issued(hn_exec *x, const hn_instr *in, hn_status_t st, const char *what)
{
    if (st != HN_OK)
        return fail(x, in, st, "cannot issue %s: %s", what, hn_status_string(st));
    return HN_OK;
}

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

static hn_status_t exec_ALLOC(hn_exec *x, const hn_instr *in)
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
            if (count_record(x, in) != HN_OK)
                return x->status;
            if (hn_comm_log_add_alloc(x->log, in->id, x->occurrence[in->id], hn_tensor_bytes(&t)) != HN_OK)
                return fail(x, in, HN_ERR_NOMEM, "out of memory");
            x->occurrence[in->id]++;
        }
    } else {
        int occ = x->occurrence[in->id]++;
        hn_status_t st = hn_rank_alloc_cached(x->r, x->p, in->id, occ, hn_tensor_bytes(&t), &t.data);
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

static hn_status_t exec_FREE(hn_exec *x, const hn_instr *in)
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

static hn_status_t exec_VIEW(hn_exec *x, const hn_instr *in)
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

static hn_status_t exec_SELECT(hn_exec *x, const hn_instr *in)
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

static hn_status_t exec_CHUNK(hn_exec *x, const hn_instr *in)
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

static hn_status_t exec_TRANSPOSE(hn_exec *x, const hn_instr *in)
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

static hn_status_t exec_LET(hn_exec *x, const hn_instr *in)
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

static hn_status_t exec_CURRENT_STREAM(hn_exec *x, const hn_instr *in)
{
    x->vals[in->dst].kind = HN_V_STREAM;
    x->vals[in->dst].stream = x->cur;
    return HN_OK;
}

static hn_status_t exec_STREAM(hn_exec *x, const hn_instr *in)
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

static hn_status_t exec_SET_STREAM(hn_exec *x, const hn_instr *in)
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

static hn_status_t exec_WAIT_STREAM(hn_exec *x, const hn_instr *in)
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

static hn_status_t exec_HOST_SYNC(hn_exec *x, const hn_instr *in)
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
    return x->status != HN_OK || (!x->dry && __atomic_load_n(&x->rt->abort_flag, __ATOMIC_ACQUIRE));
}

static hn_status_t exec_FOR(hn_exec *x, const hn_instr *in)
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

static hn_status_t exec_IF(hn_exec *x, const hn_instr *in)
{
    int64_t c;
    if (eval(x, in, in->e[0], &c) != HN_OK)
        return x->status;
    return hn_exec_block(x, c ? &in->body : &in->orelse);
}

/* ---- communication ---- */

hn_status_t hn_exec_team(hn_exec *x, const hn_instr *in, int *out, int cap, int *n)
{
    int64_t v[3];
    /* members are clamped to [-1, 2^30] so that out-of-range ones stay out of range */
    if (in->team_kind == HN_TEAM_ALL) {
        if (x->world > cap)
            return fail(x, in, HN_ERR_RUNTIME, "team larger than %d", cap);
        for (int i = 0; i < x->world; i++)
            out[i] = i;
        *n = x->world;
        return HN_OK;
    }
    if (in->team_kind == HN_TEAM_RANGE) {
        v[2] = 1;
        for (int i = 0; i < in->nteam; i++)
            if (eval(x, in, in->team[i], &v[i]) != HN_OK)
                return x->status;
        if (v[1] <= 0 || v[1] > cap)
            return fail(x, in, HN_ERR_RUNTIME, "team size %lld out of range [1, %d]", (long long)v[1], cap);
        for (int64_t i = 0; i < v[1]; i++)
            out[i] = (int)HN_MAX(HN_MIN((int64_t)((uint64_t)v[0] + (uint64_t)i * (uint64_t)v[2]),
                                        (int64_t)1 << 30), -1);
        *n = (int)v[1];
    } else {
        if (in->nteam > cap)
            return fail(x, in, HN_ERR_RUNTIME, "team larger than %d", cap);
        for (int i = 0; i < in->nteam; i++) {
            if (eval(x, in, in->team[i], &v[0]) != HN_OK)
                return x->status;
            out[i] = (int)HN_MAX(HN_MIN(v[0], (int64_t)1 << 30), -1);
        }
        *n = in->nteam;
    }
    for (int i = 0; i < *n; i++) {
        if (out[i] < 0 || out[i] >= x->world)
            return fail(x, in, HN_ERR_RUNTIME, "team member %d out of range [0, %d)", out[i], x->world);
        for (int j = 0; j < i; j++)
            if (out[j] == out[i])
                return fail(x, in, HN_ERR_RUNTIME, "rank %d appears twice in the team", out[i]);
    }
    return HN_OK;
}

static hn_status_t record_comm(hn_exec *x, const hn_instr *in, hn_dstream *s)
{
    int idx = x->comm_next++;
    /* the event only serves a later `wait`: none, no event on the stream */
    if (!x->dry && x->p->has_wait) {
        hn_devent *ev;
        hn_status_t st = hn_rank_comm_event(x->r, idx, &ev);
        if (st != HN_OK)
            return fail(x, in, st, "cannot create an event");
        if (issued(x, in, x->rt->dev->event_record(ev, s), "event record") != HN_OK)
            return x->status;
    }
    x->last_comm = idx;
    if (in->dst >= 0) {
        x->vals[in->dst].kind = HN_V_COMM;
        x->vals[in->dst].comm = idx;
    }
    return HN_OK;
}

static hn_status_t log_comm(hn_exec *x, const hn_instr *in, const hn_comm_rec *rec)
{
    if (x->log == NULL)
        return HN_OK;
    if (count_record(x, in) != HN_OK)
        return x->status;
    if (hn_comm_log_add(x->log, rec) != HN_OK)
        return fail(x, in, HN_ERR_NOMEM, "out of memory");
    return HN_OK;
}

/* Offset of this team in the log's pool of distinct teams, added if new. */
static hn_status_t intern_team(hn_exec *x, const hn_instr *in, const int *members, int n, int *off)
{
    *off = 0;
    if (x->log != NULL && hn_comm_log_team(x->log, members, n, off) != HN_OK)
        return fail(x, in, HN_ERR_NOMEM, "out of memory");
    return HN_OK;
}

static hn_status_t no_comm_in_reference(hn_exec *x, const hn_instr *in)
{
    if (x->reference)
        return fail(x, in, HN_ERR_RUNTIME, "communication in the reference block");
    return HN_OK;
}

static hn_status_t exec_coll(hn_exec *x, const hn_instr *in, hn_coll_kind kind)
{
    int members[256], n, me = -1;
    int64_t root = 0;
    hn_tensor out, inp;
    int64_t no, ni, total_in, total_out;
    size_t count;
    hn_backend_kind via;
    int get;
    const char *what = hn_op_table[in->op].keyword;
    const hn_comm_ops *comm;
    char why[256];
    if (no_comm_in_reference(x, in) != HN_OK || hn_exec_team(x, in, members, 256, &n) != HN_OK)
        return x->status;
    for (int i = 0; i < n; i++)
        if (members[i] == x->rank)
            me = i;
    if (me < 0) { /* not a member: skip, and a wait on it waits for nothing */
        if (in->dst >= 0) {
            x->vals[in->dst].kind = HN_V_COMM;
            x->vals[in->dst].comm = -1;
        }
        return HN_OK;
    }
    if (in->e[0] != NULL && eval(x, in, in->e[0], &root) != HN_OK)
        return x->status;
    if (root < 0 || root >= n)
        return fail(x, in, HN_ERR_RUNTIME, "root %lld out of range for a team of %d", (long long)root, n);
    if (tensor_of(x, in, &in->a, &out) != HN_OK || tensor_of(x, in, &in->b, &inp) != HN_OK ||
        need_contiguous(x, in, &out, "the output") != HN_OK ||
        need_contiguous(x, in, &inp, "the input") != HN_OK)
        return x->status;
    if (out.dtype != inp.dtype)
        return fail(x, in, HN_ERR_RUNTIME, "output is %s but input is %s", hn_dtype_name(out.dtype),
                    hn_dtype_name(inp.dtype));
    no = hn_tensor_numel(&out);
    ni = hn_tensor_numel(&inp);
    /* a buffer's count fits in int64; a team of n of them may not */
    if (hn_mul_overflows(ni, n, &total_in) || hn_mul_overflows(no, n, &total_out))
        return fail(x, in, HN_ERR_RUNTIME, "%s over a team of %d: %lld or %lld elements times %d overflows",
                    what, n, (long long)ni, (long long)no, n);
    switch (kind) {
    case HN_COLL_ALLGATHER:
    case HN_COLL_GATHER:
        if (no != total_in)
            return fail(x, in, HN_ERR_RUNTIME,
                        "%s of %lld elements over a team of %d needs an output of %lld, not %lld",
                        what, (long long)ni, n, (long long)total_in, (long long)no);
        count = (size_t)ni;
        break;
    case HN_COLL_REDUCE_SCATTER:
    case HN_COLL_SCATTER:
        if (ni != total_out)
            return fail(x, in, HN_ERR_RUNTIME,
                        "%s to %lld elements over a team of %d needs an input of %lld, not %lld",
                        what, (long long)no, n, (long long)total_out, (long long)ni);
        count = (size_t)no;
        break;
    case HN_COLL_ALL_TO_ALL:
        if (ni != no || ni % n != 0)
            return fail(x, in, HN_ERR_RUNTIME,
                        "all_to_all needs equal input and output sizes divisible by the team size %d "
                        "(input %lld, output %lld)", n, (long long)ni, (long long)no);
        count = (size_t)(ni / n);
        break;
    default:
        if (ni != no)
            return fail(x, in, HN_ERR_RUNTIME, "%s needs equal input and output sizes (%lld, %lld)",
                        what, (long long)ni, (long long)no);
        count = (size_t)ni;
        break;
    }
    /* `via auto` picks by size here, the same way on every member */
    via = hn_via_resolve(in->via, !x->dry && x->rt->default_auto, kind, count, out.dtype, n);
    get = via == in->via ? in->get : 0;
    /* what the communicator cannot run, by its own rules */
    comm = x->dry ? hn_comm_find(hn_backend_name(via)) : hn_runtime_comm(x->rt, via)->ops;
    if (comm != NULL && comm->refuses != NULL && comm->refuses(kind, out.dtype, count, n, why, sizeof(why)) != NULL)
        return fail(x, in, HN_ERR_UNSUPPORTED, "%s", why);
    if (via == HN_VIA_LL && get == 0) /* one-shot or two-shot by size (cost.c) */
        get = hn_via_ll_algo(kind, count, out.dtype, n);
    if (x->dry) {
        hn_comm_rec rec;
        memset(&rec, 0, sizeof(rec));
        rec.instr = in->id;
        rec.via = (int)via;
        rec.get = get;
        rec.kind = kind;
        rec.nteam = n;
        if (intern_team(x, in, members, n, &rec.team_off) != HN_OK)
            return x->status;
        rec.count = count;
        rec.dtype = out.dtype;
        rec.redop = (int)in->redop;
        rec.root = (int)root;
        if (log_comm(x, in, &rec) != HN_OK)
            return x->status;
        return record_comm(x, in, NULL);
    } else {
        hn_coll_args args = {kind, inp.data, out.data, count, out.dtype, (int)in->redop, (int)root, get};
        hn_comm_team *team = hn_runtime_team(x->rt, via, members, n);
        hn_dstream *s;
        hn_origin o = origin_of(x, in);
        if (team == NULL)
            return fail(x, in, HN_ERR_RUNTIME, "no communicator for this team (not verified?)");
        if (x->trace != NULL) /* its match keys count the team's collectives */
            hn_trace_team(x->trace, in, members, n);
        if (cur_stream(x, in, &s) != HN_OK ||
            issued(x, in, hn_runtime_comm(x->rt, via)->ops->collective(team, me, &args, s, &o), what) != HN_OK)
            return x->status;
        return record_comm(x, in, s);
    }
}

#define COLL(E, K) \
    static hn_status_t exec_##E(hn_exec *x, const hn_instr *in) { return exec_coll(x, in, K); }
COLL(ALLGATHER, HN_COLL_ALLGATHER)
COLL(ALLREDUCE, HN_COLL_ALLREDUCE)
COLL(REDUCE_SCATTER, HN_COLL_REDUCE_SCATTER)
COLL(BROADCAST, HN_COLL_BROADCAST)
COLL(REDUCE, HN_COLL_REDUCE)
COLL(GATHER, HN_COLL_GATHER)
COLL(SCATTER, HN_COLL_SCATTER)
COLL(ALL_TO_ALL, HN_COLL_ALL_TO_ALL)
#undef COLL

/* Evaluates one send/recv into a posted operation. */
static hn_status_t p2p_op(hn_exec *x, const hn_instr *in, hn_p2p_op *op)
{
    hn_tensor t;
    int64_t peer;
    if (tensor_of(x, in, &in->a, &t) != HN_OK ||
        need_contiguous(x, in, &t, in->op == HN_OP_SEND ? "a sent tensor" : "a received tensor") != HN_OK ||
        eval(x, in, in->e[0], &peer) != HN_OK)
        return x->status;
    if (peer < 0 || peer >= x->world)
        return fail(x, in, HN_ERR_RUNTIME, "peer %lld out of range [0, %d)", (long long)peer, x->world);
    op->is_send = in->op == HN_OP_SEND;
    op->get = in->get;
    op->peer = (int)peer;
    op->buf = t.data;
    op->bytes = hn_tensor_bytes(&t);
    if (x->dry) {
        hn_comm_rec rec;
        memset(&rec, 0, sizeof(rec));
        rec.instr = in->id;
        rec.via = (int)in->via;
        rec.get = in->get;
        rec.is_p2p = 1;
        rec.kind = op->is_send;
        rec.peer = op->peer;
        rec.group = x->comm_next; /* the post these ops go out with */
        rec.count = (size_t)hn_tensor_numel(&t);
        rec.dtype = t.dtype;
        return log_comm(x, in, &rec);
    }
    return HN_OK;
}

static hn_status_t post_p2p(hn_exec *x, const hn_instr *in, hn_backend_kind via, const hn_p2p_op *ops, int n)
{
    hn_dstream *s;
    hn_origin o;
    const hn_comm_slot *c;
    if (x->dry)
        return record_comm(x, in, NULL);
    o = origin_of(x, in);
    c = hn_runtime_comm(x->rt, via);
    if (cur_stream(x, in, &s) != HN_OK ||
        issued(x, in, c->ops->p2p(c->world, x->rank, ops, n, s, &o), "send/recv") != HN_OK)
        return x->status;
    return record_comm(x, in, s);
}

static hn_status_t exec_p2p(hn_exec *x, const hn_instr *in)
{
    hn_p2p_op op;
    if (no_comm_in_reference(x, in) != HN_OK || p2p_op(x, in, &op) != HN_OK)
        return x->status;
    return post_p2p(x, in, in->via, &op, 1);
}

static hn_status_t exec_SEND(hn_exec *x, const hn_instr *in) { return exec_p2p(x, in); }
static hn_status_t exec_RECV(hn_exec *x, const hn_instr *in) { return exec_p2p(x, in); }

static hn_status_t inject_faults(hn_exec *x, const hn_instr *in);

static hn_status_t exec_GROUP(hn_exec *x, const hn_instr *in)
{
    hn_p2p_op stack_ops[16], *ops = stack_ops;
    hn_status_t st = HN_OK;
    if (no_comm_in_reference(x, in) != HN_OK)
        return x->status;
    if (in->body.n > HN_ARRAY_LEN(stack_ops) &&
        (ops = hn_malloc((size_t)in->body.n * sizeof(*ops))) == NULL)
        return fail(x, in, HN_ERR_NOMEM, "out of memory");
    for (int i = 0; i < in->body.n && st == HN_OK; i++) {
        if (in->body.items[i]->via != in->body.items[0]->via || in->body.items[i]->get != in->body.items[0]->get)
            st = fail(x, in->body.items[i], HN_ERR_RUNTIME, "a group posts through one communicator and "
                      "protocol: this is via %s%s, the first via %s%s", hn_backend_name(in->body.items[i]->via),
                      in->body.items[i]->get ? " get" : "", hn_backend_name(in->body.items[0]->via),
                      in->body.items[0]->get ? " get" : "");
        else if (!x->dry && !x->reference && x->rt->faults.n > 0 &&
                 inject_faults(x, in->body.items[i]) != HN_OK) /* its members are instructions too */
            st = x->status != HN_OK ? x->status : HN_ERR_ABORTED;
        else
            st = p2p_op(x, in->body.items[i], &ops[i]);
    }
    if (st == HN_OK && in->body.n > 0)
        st = post_p2p(x, in, in->body.items[0]->via, ops, in->body.n);
    if (ops != stack_ops)
        hn_free(ops);
    return st;
}

static hn_status_t exec_WAIT(hn_exec *x, const hn_instr *in)
{
    int idx = x->last_comm;
    hn_dstream *s;
    hn_origin o;
    if (in->wait_var >= 0) {
        const hn_value *v = &x->vals[in->wait_var];
        if (v->kind != HN_V_COMM)
            return fail(x, in, HN_ERR_RUNTIME, "'%s' is not a communication", vname(x, in->wait_var));
        idx = v->comm;
    }
    if (idx < 0 || x->dry)
        return HN_OK;
    o = origin_of(x, in);
    if (cur_stream(x, in, &s) != HN_OK ||
        issued(x, in, x->rt->dev->stream_wait_event(s, x->r->comm_events[idx], &o), "wait") != HN_OK)
        return x->status;
    return HN_OK;
}

/* ---- compute ---- */

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

static hn_status_t exec_COPY(hn_exec *x, const hn_instr *in) { return exec_copy_like(x, in, 1); }
static hn_status_t exec_CAST(hn_exec *x, const hn_instr *in) { return exec_copy_like(x, in, 0); }

static hn_status_t exec_FILL(hn_exec *x, const hn_instr *in)
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

static hn_status_t exec_IOTA(hn_exec *x, const hn_instr *in)
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

static hn_status_t exec_RANDOM(hn_exec *x, const hn_instr *in)
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

static hn_status_t exec_binary(hn_exec *x, const hn_instr *in, int op)
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

static hn_status_t exec_ADD(hn_exec *x, const hn_instr *in) { return exec_binary(x, in, 0); }
static hn_status_t exec_MUL(hn_exec *x, const hn_instr *in) { return exec_binary(x, in, 1); }
static hn_status_t exec_MAXIMUM(hn_exec *x, const hn_instr *in) { return exec_binary(x, in, 2); }
static hn_status_t exec_MINIMUM(hn_exec *x, const hn_instr *in) { return exec_binary(x, in, 3); }

static hn_status_t exec_SCALE(hn_exec *x, const hn_instr *in)
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

static hn_status_t exec_SUM(hn_exec *x, const hn_instr *in)
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

static hn_status_t exec_MATMUL(hn_exec *x, const hn_instr *in)
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

static hn_status_t exec_LINEAR(hn_exec *x, const hn_instr *in)
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

/* ---- injected faults (HIRNODE_FAULT, fault_inject.c) ---- */

static hn_status_t inject_faults(hn_exec *x, const hn_instr *in)
{
    char msg[512];
    hn_status_t st = hn_faults_set_off(x, in, msg, sizeof(msg));
    if (st != HN_OK && msg[0] != '\0')
        return fail(x, in, st, "%s", msg);
    return st;
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
    static hn_status_t exec_##E(hn_exec *x, const hn_instr *in) { return exec_pipelined(x, in); }
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
#define HN_OP(e, kw, form, sig, flags) [HN_OP_##e] = exec_##e,
#include "../core/ops.def"
};

hn_status_t hn_exec_block(hn_exec *x, const hn_block *b)
{
    for (int i = 0; i < b->n; i++) {
        const hn_instr *in = b->items[i];
        if (x->dry && --x->budget < 0)
            return fail(x, in, HN_ERR_VERIFY, "the dry run gave up after %d instructions",
                        HN_DRY_RUN_BUDGET);
        if (x->r != NULL)
            __atomic_store_n(&x->r->current_instr, in->id, __ATOMIC_RELAXED);
        if (!x->dry && !x->reference && x->rt->faults.n > 0 && inject_faults(x, in) != HN_OK)
            return x->status != HN_OK ? x->status : HN_ERR_ABORTED;
        /* tracing off costs this one branch */
        if ((x->trace != NULL ? hn_trace_exec(x, in, dispatch[in->op]) : dispatch[in->op](x, in)) != HN_OK)
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
    x->err_instr = -1;
    x->budget = HN_DRY_RUN_BUDGET;
    x->records = HN_DRY_RUN_RECORDS;
    x->vals = hn_calloc((size_t)p->nvars, sizeof(*x->vals));
    x->ivals = hn_calloc((size_t)p->nvars, sizeof(*x->ivals));
    x->occurrence = hn_calloc((size_t)p->ninstrs, sizeof(int));
    if (x->vals == NULL || x->ivals == NULL || x->occurrence == NULL) {
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
    x->vals = NULL;
    x->ivals = NULL;
    x->occurrence = NULL;
}
