/* The --check driver: builds global inputs (seeded random or .npy), shards
 * them per the input declarations, runs the program, gathers the outputs
 * and compares them with the reference block, run on rank 0's device in
 * f32 (bf16/f16 tensors promoted). Outputs are poisoned before the run. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../device/npy.h"
#include "bind.h"
#include "check.h"
#include "config_cache.h"
#include "../ir/params.h"
#include "prepare.h"
#include "procs.h"
#include "run.h"
#include "../ranks/run_error.h"

typedef struct io_buf {
    const hn_io *io;
    hn_tensor local, global; /* global.data: host buffer */
    void **dev;              /* per rank */
    size_t *dev_bytes;       /* per rank: local_bytes, as a binding says it */
    size_t local_bytes;
} io_buf;

static size_t es_of(hn_dtype t) { return (size_t)hn_dtype_size(t); }

/* Copies shard r (along axis) between a global host tensor and a local one. */
static void shard_move(const hn_tensor *g, const hn_tensor *l, int axis, int r, void *local, int to_local)
{
    size_t es = es_of(g->dtype);
    int64_t outer = 1, inner = 1, ga = g->shape[axis], la = l->shape[axis];
    size_t chunk;
    if (hn_tensor_numel(g) == 0) /* nothing to move; other dimensions may not multiply */
        return;
    for (int i = 0; i < axis; i++)
        outer *= g->shape[i];
    for (int i = axis + 1; i < g->ndim; i++)
        inner *= g->shape[i];
    chunk = (size_t)(la * inner) * es;
    for (int64_t o = 0; o < outer; o++) {
        char *lp = (char *)local + (size_t)o * chunk;
        char *gp = (char *)g->data + (size_t)((o * ga + (int64_t)r * la) * inner) * es;
        if (to_local)
            memcpy(lp, gp, chunk);
        else
            memcpy(gp, lp, chunk);
    }
}

/* The poison: for floating types a quiet NaN with a payload that no
 * arithmetic produces (GPUs and CPUs make canonical NaNs), so an element
 * still holding it afterwards was never written; for integers an unlikely
 * value. */
static const uint32_t POISON_F32 = 0x7fc5a5a5u;
static const uint16_t POISON_BF16 = 0x7fc5u, POISON_F16 = 0x7e5au;
static const int64_t POISON_INT = -123456789;

static void poison(void *buf, hn_dtype t, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        switch (t) {
        case HN_F32: memcpy((char *)buf + i * 4, &POISON_F32, 4); break;
        case HN_BF16: memcpy((char *)buf + i * 2, &POISON_BF16, 2); break;
        case HN_F16: memcpy((char *)buf + i * 2, &POISON_F16, 2); break;
        default: hn_store(t, buf, i, (double)POISON_INT); break;
        }
}

static int is_poison(hn_dtype t, const void *buf, int64_t i)
{
    uint32_t w;
    uint16_t h;
    switch (t) {
    case HN_F32: memcpy(&w, (const char *)buf + i * 4, 4); return w == POISON_F32;
    case HN_BF16: memcpy(&h, (const char *)buf + i * 2, 2); return h == POISON_BF16;
    case HN_F16: memcpy(&h, (const char *)buf + i * 2, 2); return h == POISON_F16;
    default: return hn_load(t, buf, i) == (double)POISON_INT;
    }
}

/* The bound on an output's relative L2 error, ||out - ref|| / ||ref||
 * (the one error that decides; the largest absolute and relative errors
 * of single elements are reported beside it). `run --help` says it too. */
static double tolerance(hn_dtype t)
{
    switch (t) {
    case HN_F32: return 1e-5;
    case HN_F16: return 2e-3;
    case HN_BF16: return 1.6e-2;
    default: return 0;
    }
}

typedef struct cmp {
    double max_abs, max_rel, rel_l2;
    int64_t n;
    int64_t left;      /* elements still holding the poison: never written */
    int64_t nonfinite; /* other NaN/inf where the reference has none, or the reverse */
    int ok;
} cmp;

static cmp compare(const hn_tensor *out, const void *ref, hn_dtype ref_t)
{
    cmp c = {0, 0, 0, 0, 0, 0, 1};
    int64_t n = hn_tensor_numel(out);
    double num = 0, den = 0, refmax = 0;
    c.n = n;
    for (int64_t i = 0; i < n; i++)
        refmax = fmax(refmax, fabs(hn_load(ref_t, ref, i)));
    for (int64_t i = 0; i < n; i++) {
        double o = hn_load(out->dtype, out->data, i), r = hn_load(ref_t, ref, i);
        double d = fabs(o - r);
        if (is_poison(out->dtype, out->data, i)) {
            c.left++;
            continue;
        }
        if (isnan(o) != isnan(r) || (!isnan(o) && isinf(o) != isinf(r))) {
            c.nonfinite++;
            continue;
        }
        if (isnan(o) || isinf(o))
            continue;
        num += d * d;
        den += r * r;
        c.max_abs = fmax(c.max_abs, d);
        c.max_rel = fmax(c.max_rel, d / fmax(fabs(r), 1e-6 * refmax + 1e-30));
    }
    c.rel_l2 = den > 0 ? sqrt(num / den) : sqrt(num);
    c.ok = c.left == 0 && c.nonfinite == 0 && c.rel_l2 <= tolerance(out->dtype);
    return c;
}

/* Out of memory, naming the tensor, the bytes and where. */
static hn_status_t no_memory(hn_strbuf *diag, const hn_program *p, const hn_io *io, const char *where, size_t bytes)
{
    hn_sb_printf(diag, "%s:%d:%d: error: cannot allocate %zu bytes of %s for '%s'\n", p->filename, io->line,
                 io->col, bytes, where, p->names[io->var]);
    return HN_ERR_NOMEM;
}

/* ... on a device: with its free memory. */
static void no_device_memory(hn_runtime *rt, hn_strbuf *diag, const hn_program *p, const hn_io *io, int rank,
                             const char *what, size_t bytes)
{
    size_t free_b = 0, total_b = 0;
    char where[160];
    hn_runtime_mem_info(rt, rank, &free_b, &total_b);
    snprintf(where, sizeof(where), "rank %d's device memory%s (%zu of %zu bytes free)", rank, what, free_b, total_b);
    no_memory(diag, p, io, where, bytes);
}

static void fill_random(hn_tensor *t, uint64_t seed)
{
    int64_t n = hn_tensor_numel(t);
    uint64_t st = seed;
    for (int64_t i = 0; i < n; i++) {
        double u = (double)(hn_splitmix64(&st) >> 11) * (1.0 / 9007199254740992.0);
        hn_store(t->dtype, t->data, i, hn_dtype_is_float(t->dtype) ? 2 * u - 1 : floor(16 * u) - 8);
    }
}

static void free_bufs(hn_runtime *rt, io_buf *b, int n)
{
    for (int k = 0; k < n; k++) {
        if (b[k].dev != NULL)
            for (int i = 0; i < rt->nlocal; i++)
                hn_runtime_free(rt, rt->first + i, b[k].dev[i]);
        hn_free(b[k].dev);
        hn_free(b[k].dev_bytes);
        hn_free(b[k].global.data);
    }
    hn_free(b);
}

/* Runs the reference block on rank 0; ref[k] receives output k (f32 for
 * floating outputs). */
static hn_status_t run_reference(hn_runtime *rt, const hn_program *p, const int64_t *params,
                                 io_buf *b, void **ref, hn_dtype *ref_t, hn_strbuf *diag)
{
    int nio = p->ninputs + p->noutputs;
    void **dev = hn_calloc((size_t)nio + 1, sizeof(void *));
    hn_status_t st = HN_OK;
    if (dev == NULL)
        return HN_ERR_NOMEM;
    for (int k = 0; k < nio && st == HN_OK; k++) {
        hn_dtype t = b[k].global.dtype;
        hn_dtype pt = (t == HN_BF16 || t == HN_F16) ? HN_F32 : t;
        int64_t n = hn_tensor_numel(&b[k].global);
        size_t bytes = (size_t)n * es_of(pt);
        void *host = hn_malloc(bytes + 1);
        if (host == NULL) {
            st = no_memory(diag, p, b[k].io, "host memory (the reference's copy)", bytes);
            break;
        }
        if (k < p->ninputs) {
            for (int64_t i = 0; i < n; i++)
                hn_store(pt, host, i, hn_load(t, b[k].global.data, i));
        } else {
            poison(host, pt, n);
        }
        if ((st = hn_runtime_alloc(rt, rt->first, bytes, &dev[k])) == HN_ERR_NOMEM)
            no_device_memory(rt, diag, p, b[k].io, rt->first, ", for the reference", bytes);
        if (st == HN_OK)
            st = hn_runtime_upload(rt, rt->first, dev[k], host, bytes);
        if (k >= p->ninputs) {
            ref[k - p->ninputs] = host;
            ref_t[k - p->ninputs] = pt;
        } else {
            hn_free(host);
        }
    }
    if (st == HN_OK)
        st = hn_runtime_run_reference(rt, p, params, dev);
    for (int k = p->ninputs; k < nio && st == HN_OK; k++)
        st = hn_runtime_download(rt, rt->first, ref[k - p->ninputs], dev[k],
                                 (size_t)hn_tensor_numel(&b[k].global) * es_of(ref_t[k - p->ninputs]));
    for (int k = 0; k < nio; k++)
        hn_runtime_free(rt, rt->first, dev[k]);
    hn_free(dev);
    return st;
}

static void report(FILE *f, const char *what, const cmp *c, hn_dtype t)
{
    if (f == NULL)
        return;
    /* the rel l2 err decides (the tolerance bounds it); the others inform */
    if (tolerance(t) > 0)
        fprintf(f, "check %s: rel l2 err %.3g (must be at most %.3g for %s); max abs err %.3g, max rel err %.3g", what,
                c->rel_l2, tolerance(t), hn_dtype_name(t), c->max_abs, c->max_rel);
    else
        fprintf(f, "check %s: rel l2 err %.3g (must be 0 for %s: exact); max abs err %.3g, max rel err %.3g", what,
                c->rel_l2, hn_dtype_name(t), c->max_abs, c->max_rel);
    if (c->left > 0)
        fprintf(f, ", %lld of %lld elements left at the poison (never written)", (long long)c->left,
                (long long)c->n);
    if (c->nonfinite > 0)
        fprintf(f, ", %lld non-finite elements where the reference is finite (or the reverse)",
                (long long)c->nonfinite);
    fprintf(f, ": %s\n", c->ok ? "ok" : "MISMATCH");
}

/* The bindings matched by name and checked on every rank as a run checks
 * an embedder's (hn_runtime_resolve), once for all iterations; what is
 * wrong said in the error text, as a run says it. */
static hn_status_t bind_once(hn_runtime *rt, const hn_program *p, const int64_t *params, const hn_run_args *args,
                             hn_bound *bound)
{
    hn_strbuf why;
    hn_status_t st;
    hn_sb_init(&why);
    if ((st = hn_bind_match(p, args, bound, &why)) == HN_OK)
        st = hn_bind_check(rt, p, params, hn_cache_config(rt, hn_runtime_lowered_of(rt, p, params), params), bound,
                           &why);
    if (st != HN_OK)
        hn_runtime_set_error_text(rt, why.data != NULL ? why.data : hn_status_string(st));
    hn_sb_free(&why);
    return st;
}

/* This rank's output (dev, bytes), handed over the link to the processes
 * of the other nodes (a world across nodes); *tag names it for them. */
static hn_status_t post_output(hn_runtime *rt, const void *dev, size_t bytes, uint64_t *tag)
{
    void *h = hn_malloc(bytes + 1);
    hn_status_t st = h != NULL ? hn_runtime_download(rt, rt->first, h, dev, bytes) : HN_ERR_NOMEM;
    if (st == HN_OK)
        st = hn_procs_post(rt, "--check: this rank's output", h, bytes, tag);
    hn_free(h);
    return st;
}

hn_status_t hn_check_run(hn_runtime *rt, const hn_program *p, const hn_check_opts *o,
                         hn_check_result *res, hn_strbuf *diag)
{
    /* shapes and inputs are the world's; buffers, uploads and downloads
     * the ranks this runtime drives (first + i, in dev[i]) */
    int nio = p->ninputs + p->noutputs, world = rt->world, first = rt->first, nlocal = rt->nlocal;
    uint64_t tag = 0;
    int64_t *params = hn_calloc((size_t)p->nparams + 1, sizeof(int64_t));
    io_buf *b = hn_calloc((size_t)nio + 1, sizeof(*b));
    hn_binding *binds = hn_calloc((size_t)nio + 1, sizeof(hn_binding));
    hn_bound bound = {NULL, NULL};
    double *times = hn_calloc((size_t)HN_MAX(o->iters, 1), sizeof(double));
    void **ref = hn_calloc((size_t)p->noutputs + 1, sizeof(void *));
    hn_dtype *ref_t = hn_calloc((size_t)p->noutputs + 1, sizeof(hn_dtype));
    hn_status_t st = HN_OK;
    int iters = HN_MAX(o->iters, 1);
    FILE *out = o->out;
    memset(res, 0, sizeof(*res));
    res->passed = 1;
    hn_run_args args = {o->noverrides, o->names, o->values, nio, binds};
    if (params == NULL || b == NULL || binds == NULL || times == NULL || ref == NULL || ref_t == NULL) {
        st = HN_ERR_NOMEM;
        goto done;
    }
    if (o->check && !p->has_reference) {
        hn_sb_printf(diag, "%s: error: --check needs a reference block\n", p->filename);
        st = HN_ERR_INVALID;
        goto done;
    }
    if ((st = hn_params_resolve(p, world, rt->cfg.nstreams, o->noverrides, o->names, o->values, params,
                                diag)) != HN_OK ||
        (st = hn_runtime_prepare(rt, p, params, diag)) != HN_OK)
        goto done;

    /* global host tensors, per-rank device buffers */
    for (int k = 0; k < nio && st == HN_OK; k++) {
        io_buf *x = &b[k];
        x->io = k < p->ninputs ? &p->inputs[k] : &p->outputs[k - p->ninputs];
        for (int r = 0; r < world && st == HN_OK; r++) {
            hn_tensor t;
            st = hn_io_tensor(p, x->io, params, r, world, rt->cfg.nstreams, 0, &t, diag);
            if (st == HN_OK && r > 0 && memcmp(t.shape, x->local.shape, sizeof(t.shape)) != 0) {
                hn_sb_printf(diag, "%s:%d:%d: error: the shape of '%s' differs between ranks\n",
                             p->filename, x->io->line, x->io->col, p->names[x->io->var]);
                st = HN_ERR_VERIFY;
            }
            x->local = t;
        }
        if (st != HN_OK ||
            (st = hn_io_tensor(p, x->io, params, 0, world, rt->cfg.nstreams, 1, &x->global, diag)) != HN_OK)
            break;
        x->local_bytes = hn_tensor_bytes(&x->local);
        x->dev = hn_calloc((size_t)nlocal, sizeof(void *));
        x->dev_bytes = hn_calloc((size_t)nlocal, sizeof(size_t));
        if (x->dev == NULL || x->dev_bytes == NULL) {
            st = HN_ERR_NOMEM;
            break;
        }
        /* the devices first: a size they cannot hold fails there, before a
         * global tensor world times its size is made in host memory */
        for (int i = 0; i < nlocal && st == HN_OK; i++)
            if ((st = hn_runtime_alloc(rt, first + i, x->local_bytes, &x->dev[i])) == HN_ERR_NOMEM)
                no_device_memory(rt, diag, p, x->io, first + i, "", x->local_bytes);
            else
                x->dev_bytes[i] = x->local_bytes;
        /* bound as an embedder binds them: checked on every rank */
        binds[k].name = p->names[x->io->var];
        binds[k].data = x->dev;
        binds[k].bytes = x->dev_bytes;
        if (st != HN_OK)
            break;
        x->global.data = hn_malloc(hn_tensor_bytes(&x->global) + 1);
        if (x->global.data == NULL) {
            st = no_memory(diag, p, x->io, "host memory (the global tensor)", hn_tensor_bytes(&x->global));
            break;
        }
        if (k < p->ninputs) {
            if (o->load_dir != NULL) {
                char path[4096];
                snprintf(path, sizeof(path), "%s/%s.npy", o->load_dir, p->names[x->io->var]);
                st = hn_npy_read(path, &x->global, diag);
            } else {
                fill_random(&x->global, o->seed * 1000003u + (uint64_t)k);
            }
        }
    }
    if (st != HN_OK)
        goto done;
    for (int k = 0; k < nio && st == HN_OK; k++) {
        io_buf *x = &b[k];
        void *h = hn_malloc(x->local_bytes + 1);
        if (h == NULL) {
            st = no_memory(diag, p, x->io, "host memory (staging)", x->local_bytes);
            break;
        }
        for (int i = 0; i < nlocal && st == HN_OK; i++) {
            if (k >= p->ninputs)
                poison(h, x->local.dtype, hn_tensor_numel(&x->local));
            else if (x->io->shard_axis >= 0)
                shard_move(&x->global, &x->local, x->io->shard_axis, first + i, h, 1);
            else
                memcpy(h, x->global.data, x->local_bytes);
            st = hn_runtime_upload(rt, first + i, x->dev[i], h, x->local_bytes);
        }
        hn_free(h);
    }
    if (st != HN_OK)
        goto done;

    /* run as prepared above (hn_runtime_run would resolve the parameters,
     * match and check the bindings and prepare again, every iteration) */
    st = bind_once(rt, p, params, &args, &bound);
    for (int it = 0; it < iters && st == HN_OK; it++) {
        double t0 = hn_now();
        if ((st = hn_runtime_run_prepared(rt, p, params, (void *const *const *)bound.ptr)) != HN_OK)
            break;
        times[it] = hn_now() - t0;
    }
    if (st != HN_OK) {
        if (st == HN_ERR_INVALID || st == HN_ERR_VERIFY) /* said by the error text alone */
            hn_sb_printf(diag, "%s\n", hn_runtime_error(rt));
        goto done;
    }
    res->median_s = hn_median(times, iters);

    if (o->check && (st = run_reference(rt, p, params, b, ref, ref_t, diag)) != HN_OK)
        goto done;

    /* gather outputs; compare each rank's copy of a replicated output.
     * Across processes every process reads every rank's output where it
     * lies (device memory is at the same address in every process) and
     * compares alike; rank 0's reports and saves. */
    if (hn_procs(rt) && first != 0)
        out = NULL;
    for (int k = p->ninputs; k < nio && st == HN_OK; k++) {
        io_buf *x = &b[k];
        int q = k - p->ninputs;
        void *h = hn_malloc(x->local_bytes + 1);
        void **at = hn_calloc((size_t)world, sizeof(void *));
        if (h == NULL || at == NULL) {
            hn_free(h);
            hn_free(at);
            st = HN_ERR_NOMEM;
            break;
        }
        if (hn_procs(rt))
            st = hn_procs_xchg(rt, "--check: where the outputs are", &x->dev[0], sizeof(void *), at);
        else
            for (int i = 0; i < nlocal; i++)
                at[first + i] = x->dev[i];
        if (st == HN_OK && rt->nodes > 1) /* the other nodes take this rank's output over the link */
            st = post_output(rt, x->dev[0], x->local_bytes, &tag);
        for (int r = 0; r < world && st == HN_OK; r++) {
            if (r - first >= 0 && r - first < nlocal)
                st = hn_runtime_download(rt, r, h, at[r], x->local_bytes);
            else if (r / rt->per_node != rt->node)
                st = hn_procs_fetch(rt, "--check: an output of another node", tag, r, h, x->local_bytes);
            else
                st = rt->dev->copy_to_host(rt->dev_ctx, first, h, at[r], x->local_bytes);
            if (st != HN_OK)
                break;
            if (x->io->shard_axis >= 0) {
                shard_move(&x->global, &x->local, x->io->shard_axis, r, h, 0);
            } else {
                if (r == 0)
                    memcpy(x->global.data, h, x->local_bytes);
                if (o->check) {
                    hn_tensor t = x->local;
                    char what[160];
                    cmp c;
                    t.data = h;
                    c = compare(&t, ref[q], ref_t[q]);
                    snprintf(what, sizeof(what), "%s on rank %d", p->names[x->io->var], r);
                    report(out, what, &c, t.dtype);
                    res->checked++;
                    res->left += c.left;
                    res->passed &= c.ok;
                    res->worst_rel_l2 = fmax(res->worst_rel_l2, c.left || c.nonfinite ? INFINITY : c.rel_l2);
                }
            }
        }
        hn_free(h);
        hn_free(at);
        if (st == HN_OK && o->check && x->io->shard_axis >= 0) {
            cmp c = compare(&x->global, ref[q], ref_t[q]);
            report(out, p->names[x->io->var], &c, x->global.dtype);
            res->checked++;
            res->left += c.left;
            res->passed &= c.ok;
            res->worst_rel_l2 = fmax(res->worst_rel_l2, c.left || c.nonfinite ? INFINITY : c.rel_l2);
        }
        if (st == HN_OK && o->save_dir != NULL && (!hn_procs(rt) || first == 0)) {
            char path[4096];
            snprintf(path, sizeof(path), "%s/%s.npy", o->save_dir, p->names[x->io->var]);
            st = hn_npy_write(path, &x->global, diag);
        }
    }
    /* the others read this process's outputs until all are done */
    if (st == HN_OK && hn_procs(rt))
        st = hn_procs_xchg(rt, "--check: the outputs read", NULL, 0, NULL);
done:
    if (ref != NULL)
        for (int q = 0; q < p->noutputs; q++)
            hn_free(ref[q]);
    hn_free(ref);
    hn_free(ref_t);
    if (b != NULL)
        free_bufs(rt, b, nio);
    hn_bound_free(&bound);
    hn_free(binds);
    hn_free(times);
    hn_free(params);
    return st;
}
