/* Compute ops of the CPU emulation backend: strided elementwise ops,
 * reductions, matmul and rmsnorm with fp32 accumulation, each run as a closure on
 * the stream's worker. */
#include <math.h>
#include <string.h>

#include "device.h"
#include "norm.h"

typedef struct job {
    int kind;
    hn_tensor dst, a, b, bias; /* rmsnorm: b the residual, bias the weight */
    hn_tensor res_out;
    int has_bias, has_b, has_res_out;
    hn_redop op; /* binary */
    int axis, transb;
    double x, y;
    uint64_t seed;
} job;

enum { J_COPY, J_FILL, J_IOTA, J_RANDOM, J_BINARY, J_SCALE, J_SUM, J_MATMUL, J_RMSNORM };

/* Element offset of logical (row-major) index i in t. */
static int64_t offset_of(const hn_tensor *t, int64_t i)
{
    int64_t off = 0;
    for (int d = t->ndim - 1; d >= 0; d--) {
        int64_t n = t->shape[d];
        off += (i % n) * t->stride[d];
        i /= n;
    }
    return off;
}

static double uniform01(uint64_t seed, int64_t i)
{
    uint64_t st = seed * 0x2545F4914F6CDD1Dull + (uint64_t)i;
    return (double)(hn_splitmix64(&st) >> 11) * (1.0 / 9007199254740992.0);
}

static void elementwise(job *j)
{
    int64_t n = hn_tensor_numel(&j->dst);
    hn_dtype dt = j->dst.dtype;
    if (j->kind == J_COPY && j->dst.dtype == j->a.dtype && hn_tensor_is_contiguous(&j->dst) &&
        hn_tensor_is_contiguous(&j->a)) {
        memmove(j->dst.data, j->a.data, hn_tensor_bytes(&j->dst));
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        double v = 0;
        switch (j->kind) {
        case J_COPY: v = hn_load(j->a.dtype, j->a.data, offset_of(&j->a, i)); break;
        case J_FILL: v = j->x; break;
        case J_IOTA: v = j->x + j->y * (double)i; break;
        case J_RANDOM:
            v = j->x + (j->y - j->x) * uniform01(j->seed, i);
            if (!hn_dtype_is_float(dt))
                v = floor(v);
            break;
        case J_BINARY: {
            double a = hn_load(j->a.dtype, j->a.data, offset_of(&j->a, i));
            double b = hn_load(j->b.dtype, j->b.data, offset_of(&j->b, i));
            switch (j->op) {
            case HN_RED_PROD: v = a * b; break;
            case HN_RED_MAX: v = a > b ? a : b; break;
            case HN_RED_MIN: v = a < b ? a : b; break;
            default: v = a + b; break; /* sum (avg: a sum here) */
            }
            if (hn_dtype_is_float(dt)) /* fp32 arithmetic, like the GPU */
                v = (double)(float)v;
            break;
        }
        case J_SCALE: {
            double a = hn_load(j->a.dtype, j->a.data, offset_of(&j->a, i));
            v = hn_dtype_is_float(dt) ? (double)((float)a * (float)j->x) : a * j->x;
            break;
        }
        }
        hn_store(dt, j->dst.data, offset_of(&j->dst, i), v);
    }
}

static void reduce_axis(job *j)
{
    const hn_tensor *a = &j->a;
    int64_t outer = 1, inner = 1, len = a->shape[j->axis];
    int is_float = hn_dtype_is_float(a->dtype);
    hn_tensor src = *a;
    for (int d = 0; d < j->axis; d++)
        outer *= a->shape[d];
    for (int d = j->axis + 1; d < a->ndim; d++)
        inner *= a->shape[d];
    /* view the source as [outer, len, inner] through logical indices */
    for (int64_t o = 0; o < outer; o++)
        for (int64_t in = 0; in < inner; in++) {
            float accf = 0;
            double accd = 0;
            for (int64_t k = 0; k < len; k++) {
                double v = hn_load(src.dtype, src.data, offset_of(&src, (o * len + k) * inner + in));
                if (is_float)
                    accf += (float)v;
                else
                    accd += v;
            }
            hn_store(j->dst.dtype, j->dst.data, offset_of(&j->dst, o * inner + in),
                     is_float ? (double)accf : accd);
        }
}

/* Loads a 2-d [rows, cols] slice (batch element `batch`) as floats. */
static void load_panel(const hn_tensor *t, int64_t batch, int transpose, float *out,
                       int64_t rows, int64_t cols)
{
    int nd = t->ndim;
    int64_t base = 0, rem = batch;
    for (int d = nd - 3; d >= 0; d--) {
        base += (rem % t->shape[d]) * t->stride[d];
        rem /= t->shape[d];
    }
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) {
            int64_t rr = transpose ? c : r, cc = transpose ? r : c;
            out[r * cols + c] =
                (float)hn_load(t->dtype, t->data, base + rr * t->stride[nd - 2] + cc * t->stride[nd - 1]);
        }
}

static hn_status_t matmul(job *j, const hn_origin *o)
{
    const hn_tensor *d = &j->dst, *a = &j->a, *b = &j->b;
    int64_t M = d->shape[d->ndim - 2], N = d->shape[d->ndim - 1], K = a->shape[a->ndim - 1];
    int64_t batches = (M > 0 && N > 0) ? hn_tensor_numel(d) / (M * N) : 0;
    float *pa = hn_malloc((size_t)(M * K) * sizeof(float));
    float *pb = hn_malloc((size_t)(K * N) * sizeof(float));
    float *acc = hn_malloc((size_t)N * sizeof(float));
    hn_status_t st = HN_OK;
    if (pa == NULL || pb == NULL || acc == NULL) {
        hn_origin_fail(o, HN_ERR_NOMEM, "matmul: out of host memory");
        st = HN_ERR_NOMEM;
        goto free_panels;
    }
    for (int64_t bt = 0; bt < batches; bt++) {
        int64_t dbase = 0, rem = bt;
        load_panel(a, bt, 0, pa, M, K);
        if (bt == 0 || b->ndim > 2)
            load_panel(b, b->ndim > 2 ? bt : 0, j->transb, pb, K, N);
        for (int dd = d->ndim - 3; dd >= 0; dd--) {
            dbase += (rem % d->shape[dd]) * d->stride[dd];
            rem /= d->shape[dd];
        }
        for (int64_t m = 0; m < M; m++) {
            for (int64_t n = 0; n < N; n++)
                acc[n] = j->has_bias ? (float)hn_load(j->bias.dtype, j->bias.data, n * j->bias.stride[0]) : 0.0f;
            for (int64_t k = 0; k < K; k++) {
                float av = pa[m * K + k];
                const float *brow = pb + k * N;
                for (int64_t n = 0; n < N; n++)
                    acc[n] += av * brow[n];
            }
            for (int64_t n = 0; n < N; n++)
                hn_store(d->dtype, d->data,
                         dbase + m * d->stride[d->ndim - 2] + n * d->stride[d->ndim - 1], acc[n]);
        }
    }
free_panels:
    hn_free(pa);
    hn_free(pb);
    hn_free(acc);
    return st;
}

/* A value rounded to dtype dt, as a float. */
static float as_stored(hn_dtype dt, float v)
{
    char cell[8];
    hn_store(dt, cell, 0, v);
    return (float)hn_load(dt, cell, 0);
}

/* Row by row: y = a (+ b) as stored, into res_out; the squares of y in
 * element order; then dst = y * scale * weight (y read back from where it
 * was stored, or recomputed: the same bits). */
static void rmsnorm_rows(const job *j)
{
    hn_dtype dt = j->dst.dtype;
    int64_t hidden = j->dst.shape[j->dst.ndim - 1], rows = hidden > 0 ? hn_tensor_numel(&j->dst) / hidden : 0;
    for (int64_t r = 0; r < rows; r++) {
        float sumsq = 0, scale;
        for (int64_t i = 0; i < hidden; i++) {
            int64_t e = r * hidden + i;
            float y = (float)hn_load(dt, j->a.data, offset_of(&j->a, e));
            if (j->has_b)
                y = as_stored(dt, y + (float)hn_load(dt, j->b.data, offset_of(&j->b, e)));
            if (j->has_res_out)
                hn_store(dt, j->res_out.data, offset_of(&j->res_out, e), y);
            sumsq += y * y;
        }
        scale = hn_norm_scale(sumsq, (size_t)hidden, (float)j->x);
        for (int64_t i = 0; i < hidden; i++) {
            int64_t e = r * hidden + i;
            float y = j->has_res_out ? (float)hn_load(dt, j->res_out.data, offset_of(&j->res_out, e))
                                     : (float)hn_load(dt, j->a.data, offset_of(&j->a, e));
            float w = (float)hn_load(dt, j->bias.data, i * j->bias.stride[0]);
            if (j->has_b && !j->has_res_out)
                y = as_stored(dt, y + (float)hn_load(dt, j->b.data, offset_of(&j->b, e)));
            hn_store(dt, j->dst.data, offset_of(&j->dst, e), y * scale * w);
        }
    }
}

static hn_status_t run_job(void *arg, const hn_origin *o)
{
    job *j = arg;
    switch (j->kind) {
    case J_SUM: reduce_axis(j); return HN_OK;
    case J_RMSNORM: rmsnorm_rows(j); return HN_OK;
    case J_MATMUL: return matmul(j, o);
    default: elementwise(j); return HN_OK;
    }
}

/* t with the dimensions it does not have zero */
static hn_tensor plain(const hn_tensor *t)
{
    hn_tensor p;
    memset(&p, 0, sizeof(p));
    p.data = t->data;
    p.dtype = t->dtype;
    p.ndim = t->ndim;
    for (int d = 0; d < t->ndim && d < HN_TENSOR_MAX_DIMS; d++) {
        p.shape[d] = t->shape[d];
        p.stride[d] = t->stride[d];
    }
    return p;
}

/* The job as plain bytes, its padding zero: a graph rebound in place
 * compares and moves the pointers in them (hn_host_launch_job). */
static hn_status_t submit(hn_dstream *s, const job *proto, const hn_origin *o)
{
    job j;
    memset(&j, 0, sizeof(j));
    j.kind = proto->kind;
    j.dst = plain(&proto->dst);
    j.a = plain(&proto->a);
    j.b = plain(&proto->b);
    j.bias = plain(&proto->bias);
    j.res_out = plain(&proto->res_out);
    j.has_bias = proto->has_bias;
    j.has_b = proto->has_b;
    j.has_res_out = proto->has_res_out;
    j.op = proto->op;
    j.axis = proto->axis;
    j.transb = proto->transb;
    j.x = proto->x;
    j.y = proto->y;
    j.seed = proto->seed;
    return hn_host_launch_job(s, run_job, &j, sizeof(j), o);
}

static hn_status_t h_copy(hn_dstream *s, const hn_tensor *dst, const hn_tensor *src, const hn_origin *o)
{
    job j = {.kind = J_COPY, .dst = *dst, .a = *src};
    return submit(s, &j, o);
}

static hn_status_t h_fill(hn_dstream *s, const hn_tensor *dst, double v, const hn_origin *o)
{
    job j = {.kind = J_FILL, .dst = *dst, .x = v};
    return submit(s, &j, o);
}

static hn_status_t h_iota(hn_dstream *s, const hn_tensor *dst, double start, double step,
                          const hn_origin *o)
{
    job j = {.kind = J_IOTA, .dst = *dst, .x = start, .y = step};
    return submit(s, &j, o);
}

static hn_status_t h_random(hn_dstream *s, const hn_tensor *dst, uint64_t seed, double lo,
                            double hi, const hn_origin *o)
{
    job j = {.kind = J_RANDOM, .dst = *dst, .seed = seed, .x = lo, .y = hi};
    return submit(s, &j, o);
}

static hn_status_t h_binary(hn_dstream *s, hn_redop op, const hn_tensor *dst, const hn_tensor *a,
                            const hn_tensor *b, const hn_origin *o)
{
    job j = {.kind = J_BINARY, .op = op, .dst = *dst, .a = *a, .b = *b};
    return submit(s, &j, o);
}

static hn_status_t h_scale(hn_dstream *s, const hn_tensor *dst, const hn_tensor *a, double f,
                           const hn_origin *o)
{
    job j = {.kind = J_SCALE, .dst = *dst, .a = *a, .x = f};
    return submit(s, &j, o);
}

static hn_status_t h_sum(hn_dstream *s, const hn_tensor *dst, const hn_tensor *a, int axis,
                         const hn_origin *o)
{
    job j = {.kind = J_SUM, .dst = *dst, .a = *a, .axis = axis};
    return submit(s, &j, o);
}

static hn_status_t h_matmul(hn_dstream *s, const hn_tensor *dst, const hn_tensor *a,
                            const hn_tensor *b, int transb, const hn_tensor *bias, const hn_origin *o)
{
    job j = {.kind = J_MATMUL, .dst = *dst, .a = *a, .b = *b, .transb = transb};
    if (bias != NULL) {
        j.bias = *bias;
        j.has_bias = 1;
    }
    return submit(s, &j, o);
}

static hn_status_t h_rmsnorm(hn_dstream *s, const hn_tensor *dst, const hn_tensor *res_out, const hn_tensor *a,
                             const hn_tensor *residual, const hn_tensor *weight, float eps, const hn_origin *o)
{
    job j = {.kind = J_RMSNORM, .dst = *dst, .a = *a, .bias = *weight, .x = eps};
    if (dst->ndim < 1)
        return HN_ERR_INVALID;
    if (residual != NULL) {
        j.b = *residual;
        j.has_b = 1;
    }
    if (res_out != NULL) {
        j.res_out = *res_out;
        j.has_res_out = 1;
    }
    return submit(s, &j, o);
}

const hn_compute_ops hn_compute_host = {
    .copy = h_copy,
    .fill = h_fill,
    .iota = h_iota,
    .random = h_random,
    .binary = h_binary,
    .scale = h_scale,
    .sum = h_sum,
    .matmul = h_matmul,
    .rmsnorm = h_rmsnorm,
};
