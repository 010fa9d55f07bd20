/* Compute ops of the CUDA backend: strided elementwise kernels, reductions,
 * and matmul/linear through cuBLASLt (bf16/f16/f32 with fp32 accumulation;
 * a plain kernel for layouts cuBLASLt cannot express and for integers).
 * Built for sm_90 with PTX for other GPUs. */
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>
#include <string.h>

extern "C" {
#include "cuda_check.h"
#include "device_cuda.h"
}
#include "cuda_float.cuh"
#include "norm.h"

#define MAX_DEVICES 256
#define PLAN_CACHE 64

static const char *lt_status(cublasStatus_t s)
{
    return cublasLtGetStatusString(s);
}

static hn_status_t lt_check(cublasStatus_t s, const char *what, const char *file, int line)
{
    if (s == CUBLAS_STATUS_SUCCESS)
        return HN_OK;
    if (HN_LOG_ERROR <= hn_log_level())
        hn_log_emit(HN_LOG_ERROR, file, line, "%s failed: %s", what, lt_status(s));
    return s == CUBLAS_STATUS_ALLOC_FAILED ? HN_ERR_NOMEM : HN_ERR_DEVICE;
}

#define HN_CUBLAS_STATUS(call) lt_check((call), #call, __FILE__, __LINE__)
#define HN_CUBLAS_CHECK_GOTO(call, st, label)                                \
    do {                                                                     \
        if (((st) = HN_CUBLAS_STATUS(call)) != HN_OK)                        \
            goto label;                                                      \
    } while (0)

/* ---- tensors on the device ---- */

struct tdesc {
    char *data;
    int dtype;
    int ndim;
    int64_t shape[HN_TENSOR_MAX_DIMS];
    int64_t stride[HN_TENSOR_MAX_DIMS];
};

static tdesc to_desc(const hn_tensor *t)
{
    tdesc d;
    memset(&d, 0, sizeof(d));
    d.data = (char *)t->data;
    d.dtype = t->dtype;
    d.ndim = t->ndim;
    for (int i = 0; i < t->ndim; i++) {
        d.shape[i] = t->shape[i];
        d.stride[i] = t->stride[i];
    }
    return d;
}

__device__ __forceinline__ int64_t offset_of(const tdesc &t, int64_t i)
{
    int64_t off = 0;
    for (int d = t.ndim - 1; d >= 0; d--) {
        int64_t n = t.shape[d];
        off += (i % n) * t.stride[d];
        i /= n;
    }
    return off;
}

__device__ __forceinline__ double load(const tdesc &t, int64_t off)
{
    switch (t.dtype) {
    case HN_F32: return ((const float *)t.data)[off];
    case HN_BF16: return __bfloat162float(((const __nv_bfloat16 *)t.data)[off]);
    case HN_F16: return __half2float(((const __half *)t.data)[off]);
    case HN_I32: return ((const int32_t *)t.data)[off];
    default: return (double)((const int64_t *)t.data)[off];
    }
}

__device__ __forceinline__ void store(const tdesc &t, int64_t off, double v)
{
    switch (t.dtype) {
    case HN_F32: ((float *)t.data)[off] = (float)v; break;
    case HN_BF16: ((__nv_bfloat16 *)t.data)[off] = __float2bfloat16_rn((float)v); break;
    case HN_F16: ((__half *)t.data)[off] = __float2half_rn((float)v); break;
    case HN_I32: ((int32_t *)t.data)[off] = (int32_t)v; break;
    default: ((int64_t *)t.data)[off] = (int64_t)v; break;
    }
}

__device__ __forceinline__ uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

enum { K_COPY, K_FILL, K_IOTA, K_RANDOM, K_BINARY, K_SCALE };

/* One kernel for every elementwise op: x, y are its scalars. */
__global__ void elementwise(int kind, hn_redop op, tdesc dst, tdesc a, tdesc b, double x, double y,
                            uint64_t seed, int64_t n)
{
    int is_float = dst.dtype == HN_F32 || dst.dtype == HN_BF16 || dst.dtype == HN_F16;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        double v = 0;
        switch (kind) {
        case K_COPY: v = load(a, offset_of(a, i)); break;
        case K_FILL: v = x; break;
        case K_IOTA: v = x + y * (double)i; break;
        case K_RANDOM: {
            /* the host backend's generator: same values for the same seed */
            uint64_t st = seed * 0x2545F4914F6CDD1Dull + (uint64_t)i;
            double u = (double)(splitmix64(&st) >> 11) * (1.0 / 9007199254740992.0);
            v = x + (y - x) * u;
            if (!is_float)
                v = floor(v);
            break;
        }
        case K_BINARY: {
            double p = load(a, offset_of(a, i)), q = load(b, offset_of(b, i));
            v = op == HN_RED_PROD ? p * q : op == HN_RED_MAX ? fmax(p, q) : op == HN_RED_MIN ? fmin(p, q) : p + q;
            if (is_float)
                v = op == HN_RED_PROD ? (double)((float)p * (float)q)
                    : op == HN_RED_MAX || op == HN_RED_MIN ? v : (double)((float)p + (float)q);
            break;
        }
        case K_SCALE: {
            double p = load(a, offset_of(a, i));
            v = is_float ? (double)((float)p * (float)x) : p * x;
            break;
        }
        }
        store(dst, offset_of(dst, i), v);
    }
}

/* sum along `axis`: a thread per output element, fp32 accumulation. */
__global__ void reduce_axis(tdesc dst, tdesc a, int64_t outer, int64_t len, int64_t inner, int is_float)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < outer * inner;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t o = i / inner, in = i % inner;
        float accf = 0;
        double accd = 0;
        for (int64_t k = 0; k < len; k++) {
            double v = load(a, offset_of(a, (o * len + k) * inner + in));
            if (is_float)
                accf += (float)v;
            else
                accd += v;
        }
        store(dst, offset_of(dst, i), is_float ? (double)accf : accd);
    }
}

/* The plain matmul: d[.., m, n] = sum_k a[.., m, k] * b[.., k, n] (+ bias[n]).
 * b is given as a logical [.., K, N] view (linear's weight already
 * transposed by strides); b_batched: b has the batch dimensions too. */
__global__ void matmul_plain(tdesc d, tdesc a, tdesc b, tdesc bias, int has_bias, int b_batched,
                             int64_t M, int64_t N, int64_t K, int64_t batches, int is_float)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < batches * M * N;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t bt = i / (M * N), m = (i / N) % M, n = i % N;
        int64_t ab = 0, bb = 0, db = 0, rem = bt;
        for (int dd = d.ndim - 3; dd >= 0; dd--) {
            int64_t idx = rem % d.shape[dd];
            rem /= d.shape[dd];
            ab += idx * a.stride[dd];
            db += idx * d.stride[dd];
            if (b_batched)
                bb += idx * b.stride[dd];
        }
        float accf = has_bias ? (float)load(bias, n * bias.stride[0]) : 0.0f;
        double accd = has_bias ? load(bias, n * bias.stride[0]) : 0.0;
        for (int64_t k = 0; k < K; k++) {
            double p = load(a, ab + m * a.stride[a.ndim - 2] + k * a.stride[a.ndim - 1]);
            double q = load(b, bb + k * b.stride[b.ndim - 2] + n * b.stride[b.ndim - 1]);
            if (is_float)
                accf += (float)p * (float)q;
            else
                accd += p * q;
        }
        store(d, db + m * d.stride[d.ndim - 2] + n * d.stride[d.ndim - 1], is_float ? (double)accf : accd);
    }
}

__global__ void flag_write(volatile uint32_t *addr, uint32_t value)
{
    __threadfence_system(); /* earlier writes of this stream's kernels first */
    *addr = value;
}

extern "C" hn_status_t hn_cuda_flag_write(hn_dstream *s, uint32_t *addr, uint32_t value)
{
    flag_write<<<1, 1, 0, s->s>>>(addr, value);
    return hn_cuda_status(cudaGetLastError(), "flag kernel", __FILE__, __LINE__);
}

/* Relative flags of captured graphs (device.h): the value is the graph's
 * epoch ep[0] plus a constant, read when the kernel runs. */
__global__ void flag_write_rel(volatile uint32_t *addr, uint32_t value, const volatile uint32_t *ep)
{
    __threadfence_system();
    *addr = value + ep[0];
}

/* Spins until the flag reaches value + ep[0], or the graph's abort word
 * ep[1] is raised (a kernel cannot time out: the host raises it) */
__global__ void flag_wait_rel(const volatile uint32_t *addr, uint32_t value, const volatile uint32_t *ep)
{
    uint32_t want = value + ep[0];
    while ((int32_t)(*addr - want) < 0 && ep[1] == 0)
        __nanosleep(64);
    __threadfence_system(); /* what the signaller wrote before the flag, after it */
}

__global__ void add_u32(uint32_t *addr, uint32_t value) { *addr += value; }

extern "C" hn_status_t hn_cuda_flag_write_rel(hn_dstream *s, uint32_t *addr, uint32_t value, const uint32_t *ep)
{
    flag_write_rel<<<1, 1, 0, s->s>>>(addr, value, ep);
    return hn_cuda_status(cudaGetLastError(), "flag kernel", __FILE__, __LINE__);
}

extern "C" hn_status_t hn_cuda_flag_wait_rel(hn_dstream *s, const uint32_t *addr, uint32_t value, const uint32_t *ep)
{
    flag_wait_rel<<<1, 1, 0, s->s>>>(addr, value, ep);
    return hn_cuda_status(cudaGetLastError(), "flag wait kernel", __FILE__, __LINE__);
}

extern "C" hn_status_t hn_cuda_add_u32(hn_dstream *s, uint32_t *addr, uint32_t value)
{
    add_u32<<<1, 1, 0, s->s>>>(addr, value);
    return hn_cuda_status(cudaGetLastError(), "add kernel", __FILE__, __LINE__);
}

__global__ void trap_kernel(void) { __trap(); }

extern "C" hn_status_t hn_cuda_trap(hn_dstream *s)
{
    trap_kernel<<<1, 1, 0, s->s>>>();
    return hn_cuda_status(cudaGetLastError(), "trap kernel", __FILE__, __LINE__);
}

static int grid_for(int64_t n)
{
    int64_t blocks = (n + 255) / 256;
    return (int)(blocks < 1 ? 1 : blocks > 65536 ? 65536 : blocks);
}

static hn_status_t launched(const char *what)
{
    return hn_cuda_status(cudaGetLastError(), what, __FILE__, __LINE__);
}

static int is_float(hn_dtype t) { return t == HN_F32 || t == HN_BF16 || t == HN_F16; }

static hn_status_t run_elementwise(hn_dstream *s, int kind, hn_redop op, const hn_tensor *dst, const hn_tensor *a,
                                   const hn_tensor *b, double x, double y, uint64_t seed)
{
    int64_t n = hn_tensor_numel(dst);
    tdesc ta, tb;
    memset(&ta, 0, sizeof(ta));
    memset(&tb, 0, sizeof(tb));
    if (n == 0)
        return HN_OK;
    if (a != NULL)
        ta = to_desc(a);
    if (b != NULL)
        tb = to_desc(b);
    elementwise<<<grid_for(n), 256, 0, s->s>>>(kind, op, to_desc(dst), ta, tb, x, y, seed, n);
    return launched("elementwise kernel");
}

static hn_status_t c_copy(hn_dstream *s, const hn_tensor *dst, const hn_tensor *src, const hn_origin *o)
{
    (void)o;
    if (dst->dtype == src->dtype && hn_tensor_is_contiguous(dst) && hn_tensor_is_contiguous(src))
        return HN_CUDA_STATUS(cudaMemcpyAsync(dst->data, src->data, hn_tensor_bytes(dst),
                                              cudaMemcpyDefault, s->s));
    return run_elementwise(s, K_COPY, HN_RED_SUM, dst, src, NULL, 0, 0, 0);
}

static hn_status_t c_fill(hn_dstream *s, const hn_tensor *dst, double v, const hn_origin *o)
{
    (void)o;
    return run_elementwise(s, K_FILL, HN_RED_SUM, dst, NULL, NULL, v, 0, 0);
}

static hn_status_t c_iota(hn_dstream *s, const hn_tensor *dst, double start, double step, const hn_origin *o)
{
    (void)o;
    return run_elementwise(s, K_IOTA, HN_RED_SUM, dst, NULL, NULL, start, step, 0);
}

static hn_status_t c_random(hn_dstream *s, const hn_tensor *dst, uint64_t seed, double lo, double hi,
                            const hn_origin *o)
{
    (void)o;
    return run_elementwise(s, K_RANDOM, HN_RED_SUM, dst, NULL, NULL, lo, hi, seed);
}

__device__ __forceinline__ float apply(hn_redop op, float p, float q)
{
    return op == HN_RED_PROD ? p * q : op == HN_RED_MAX ? fmaxf(p, q) : op == HN_RED_MIN ? fminf(p, q) : p + q;
}

/* d = a op b on contiguous buffers, 16 bytes per thread and step, fp32
 * arithmetic: the reduction of the peer-copy rings */
template <typename T>
__global__ void binary_contiguous(hn_redop op, T *d, const T *a, const T *b, int64_t n)
{
    const int V = 16 / sizeof(T);
    int64_t nv = n / V;
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x, stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t v = i; v < nv; v += stride) {
        uint4 x = ((const uint4 *)a)[v], y = ((const uint4 *)b)[v], z;
        const T *px = (const T *)&x, *py = (const T *)&y;
        T *pz = (T *)&z;
#pragma unroll
        for (int k = 0; k < V; k++)
            pz[k] = from_f<T>(apply(op, to_f<T>(px[k]), to_f<T>(py[k])));
        ((uint4 *)d)[v] = z;
    }
    for (int64_t e = nv * V + i; e < n; e += stride) /* the tail */
        d[e] = from_f<T>(apply(op, to_f<T>(a[e]), to_f<T>(b[e])));
}

static int aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

static hn_status_t c_binary(hn_dstream *s, hn_redop op, const hn_tensor *dst, const hn_tensor *a,
                            const hn_tensor *b, const hn_origin *o)
{
    int64_t n = hn_tensor_numel(dst);
    (void)o;
    if (is_float(dst->dtype) && dst->dtype == a->dtype && dst->dtype == b->dtype && hn_tensor_is_contiguous(dst) &&
        hn_tensor_is_contiguous(a) && hn_tensor_is_contiguous(b) && aligned16(dst->data) && aligned16(a->data) &&
        aligned16(b->data)) {
        int64_t blocks = (n / 8 + 255) / 256;
        int grid = (int)(blocks < 1 ? 1 : blocks > 132 * 16 ? 132 * 16 : blocks);
        if (n == 0)
            return HN_OK;
        if (dst->dtype == HN_F32)
            binary_contiguous<float><<<grid, 256, 0, s->s>>>(op, (float *)dst->data, (const float *)a->data,
                                                             (const float *)b->data, n);
        else if (dst->dtype == HN_BF16)
            binary_contiguous<__nv_bfloat16><<<grid, 256, 0, s->s>>>(op, (__nv_bfloat16 *)dst->data,
                                                                     (const __nv_bfloat16 *)a->data,
                                                                     (const __nv_bfloat16 *)b->data, n);
        else
            binary_contiguous<__half><<<grid, 256, 0, s->s>>>(op, (__half *)dst->data, (const __half *)a->data,
                                                              (const __half *)b->data, n);
        return launched("binary kernel");
    }
    return run_elementwise(s, K_BINARY, op, dst, a, b, 0, 0, 0);
}

static hn_status_t c_scale(hn_dstream *s, const hn_tensor *dst, const hn_tensor *a, double f,
                           const hn_origin *o)
{
    (void)o;
    return run_elementwise(s, K_SCALE, HN_RED_SUM, dst, a, NULL, f, 0, 0);
}

static hn_status_t c_sum(hn_dstream *s, const hn_tensor *dst, const hn_tensor *a, int axis, const hn_origin *o)
{
    int64_t outer = 1, inner = 1, len = a->shape[axis];
    (void)o;
    for (int d = 0; d < axis; d++)
        outer *= a->shape[d];
    for (int d = axis + 1; d < a->ndim; d++)
        inner *= a->shape[d];
    if (outer * inner == 0)
        return HN_OK;
    reduce_axis<<<grid_for(outer * inner), 256, 0, s->s>>>(to_desc(dst), to_desc(a), outer, len, inner,
                                                            is_float(a->dtype));
    return launched("sum kernel");
}

/* ---- cuBLASLt ---- */

struct plan_key {
    int dtype, opa, opb, has_bias;
    int64_t m, n, k, lda, ldb, ldd, batch, sa, sb, sd;
    uint32_t align_a, align_b, align_d;
};

struct plan {
    plan_key key;
    int valid;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, ld;
    cublasLtMatmulAlgo_t algo;
};

/* Per device, touched only by its rank thread at issue time: the handle
 * and the plan cache (descriptors and layouts are read by cublasLtMatmul
 * when it enqueues, so matmuls in flight on other streams do not depend on
 * them). Workspaces, which running kernels write, are per stream
 * (hn_dstream.workspace). */
struct dev_state {
    cublasLtHandle_t lt;
    plan plans[PLAN_CACHE];
    int next;
};

static dev_state *states[MAX_DEVICES];

extern "C" hn_status_t hn_compute_cuda_thread_init(int dev)
{
    dev_state *d;
    hn_status_t st;
    if (dev < 0 || dev >= MAX_DEVICES)
        return HN_ERR_INVALID;
    d = (dev_state *)hn_calloc(1, sizeof(*d));
    if (d == NULL)
        return HN_ERR_NOMEM;
    HN_CUBLAS_CHECK_GOTO(cublasLtCreate(&d->lt), st, fail);
    states[dev] = d;
    return HN_OK;
fail:
    hn_free(d);
    return st;
}

static void plan_free(plan *p)
{
    if (!p->valid)
        return;
    cublasLtMatrixLayoutDestroy(p->la);
    cublasLtMatrixLayoutDestroy(p->lb);
    cublasLtMatrixLayoutDestroy(p->ld);
    cublasLtMatmulDescDestroy(p->desc);
    p->valid = 0;
}

extern "C" void hn_compute_cuda_thread_fini(int dev)
{
    dev_state *d = dev >= 0 && dev < MAX_DEVICES ? states[dev] : NULL;
    if (d == NULL)
        return;
    for (int i = 0; i < PLAN_CACHE; i++)
        plan_free(&d->plans[i]);
    cublasLtDestroy(d->lt);
    hn_free(d);
    states[dev] = NULL;
}

static uint32_t alignment(const void *p)
{
    uintptr_t a = (uintptr_t)p;
    uint32_t al = 256;
    while (al > 1 && a % al != 0)
        al >>= 1;
    return al;
}

static cudaDataType_t cuda_type(hn_dtype t)
{
    return t == HN_BF16 ? CUDA_R_16BF : t == HN_F16 ? CUDA_R_16F : CUDA_R_32F;
}

/* A row-major [R, C] view with strides (sr, sc) as the column-major operand
 * whose op gives its transpose: col-major [C, R] (op N) when rows are
 * contiguous, col-major [R, C] (op T) when columns are. */
struct cm_operand {
    int64_t rows, cols, ld;
    cublasOperation_t op;
};

static int as_transposed(int64_t R, int64_t C, int64_t sr, int64_t sc, cm_operand *o)
{
    if (sc == 1 || C == 1) {
        o->rows = C;
        o->cols = R;
        o->ld = sr > C ? sr : C;
        o->op = CUBLAS_OP_N;
        return 1;
    }
    if (sr == 1 || R == 1) {
        o->rows = R;
        o->cols = C;
        o->ld = sc > R ? sc : R;
        o->op = CUBLAS_OP_T;
        return 1;
    }
    return 0;
}

/* Stride of the one collapsed batch dimension of t (its first nb dims), or
 * -1 if they do not collapse. */
static int64_t batch_stride(const hn_tensor *t, int nb)
{
    for (int i = 0; i + 1 < nb; i++)
        if (t->stride[i] != t->stride[i + 1] * t->shape[i + 1] && t->shape[i] != 1)
            return -1;
    return nb > 0 ? t->stride[nb - 1] : 0;
}

static plan *get_plan(dev_state *ds, const plan_key *key, hn_status_t *st)
{
    plan *p;
    cublasLtMatmulPreference_t pref = NULL;
    cublasLtMatmulHeuristicResult_t result;
    int found = 0;
    uint64_t ws = HN_CUDA_WORKSPACE_BYTES;
    cudaDataType_t t = cuda_type((hn_dtype)key->dtype);
    cublasLtEpilogue_t epi = key->has_bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    int32_t batch = (int32_t)key->batch;
    for (int i = 0; i < PLAN_CACHE; i++)
        if (ds->plans[i].valid && memcmp(&ds->plans[i].key, key, sizeof(*key)) == 0)
            return &ds->plans[i];
    p = &ds->plans[ds->next];
    ds->next = (ds->next + 1) % PLAN_CACHE;
    plan_free(p);
    memset(p, 0, sizeof(*p));
    p->key = *key;
    HN_CUBLAS_CHECK_GOTO(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), *st, fail);
    HN_CUBLAS_CHECK_GOTO(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &key->opa,
                                                        sizeof(int)), *st, fail_desc);
    HN_CUBLAS_CHECK_GOTO(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &key->opb,
                                                        sizeof(int)), *st, fail_desc);
    HN_CUBLAS_CHECK_GOTO(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi,
                                                        sizeof(epi)), *st, fail_desc);
    /* first operand: B^T (m x k after op), second: A^T (k x n after op) */
    HN_CUBLAS_CHECK_GOTO(cublasLtMatrixLayoutCreate(&p->la, t, key->opa == CUBLAS_OP_N ? key->m : key->k,
                                                    key->opa == CUBLAS_OP_N ? key->k : key->m, key->lda),
                         *st, fail_desc);
    HN_CUBLAS_CHECK_GOTO(cublasLtMatrixLayoutCreate(&p->lb, t, key->opb == CUBLAS_OP_N ? key->k : key->n,
                                                    key->opb == CUBLAS_OP_N ? key->n : key->k, key->ldb),
                         *st, fail_la);
    HN_CUBLAS_CHECK_GOTO(cublasLtMatrixLayoutCreate(&p->ld, t, key->m, key->n, key->ldd), *st, fail_lb);
    if (batch > 1) {
        cublasLtMatrixLayout_t ls[3] = {p->la, p->lb, p->ld};
        int64_t strides[3] = {key->sa, key->sb, key->sd};
        for (int i = 0; i < 3; i++) {
            HN_CUBLAS_CHECK_GOTO(cublasLtMatrixLayoutSetAttribute(ls[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                                  &batch, sizeof(batch)), *st, fail_ld);
            HN_CUBLAS_CHECK_GOTO(cublasLtMatrixLayoutSetAttribute(ls[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                                  &strides[i], sizeof(int64_t)), *st, fail_ld);
        }
    }
    HN_CUBLAS_CHECK_GOTO(cublasLtMatmulPreferenceCreate(&pref), *st, fail_ld);
    HN_CUBLAS_CHECK_GOTO(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                                              sizeof(ws)), *st, fail_pref);
    HN_CUBLAS_CHECK_GOTO(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                                              &key->align_a, sizeof(uint32_t)), *st, fail_pref);
    HN_CUBLAS_CHECK_GOTO(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                                              &key->align_b, sizeof(uint32_t)), *st, fail_pref);
    HN_CUBLAS_CHECK_GOTO(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                                              &key->align_d, sizeof(uint32_t)), *st, fail_pref);
    HN_CUBLAS_CHECK_GOTO(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                                              &key->align_d, sizeof(uint32_t)), *st, fail_pref);
    HN_CUBLAS_CHECK_GOTO(cublasLtMatmulAlgoGetHeuristic(ds->lt, p->desc, p->la, p->lb, p->ld, p->ld, pref, 1,
                                                        &result, &found), *st, fail_pref);
    cublasLtMatmulPreferenceDestroy(pref);
    if (found == 0) {
        *st = HN_ERR_UNSUPPORTED;
        goto fail_ld;
    }
    p->algo = result.algo;
    p->valid = 1;
    *st = HN_OK;
    return p;
fail_pref:
    cublasLtMatmulPreferenceDestroy(pref);
fail_ld:
    cublasLtMatrixLayoutDestroy(p->ld);
fail_lb:
    cublasLtMatrixLayoutDestroy(p->lb);
fail_la:
    cublasLtMatrixLayoutDestroy(p->la);
fail_desc:
    cublasLtMatmulDescDestroy(p->desc);
fail:
    memset(p, 0, sizeof(*p));
    return NULL;
}

/* Tries cuBLASLt; 0 means "use the plain kernel" (layout not expressible). */
static int try_lt(hn_dstream *s, const hn_tensor *d, const hn_tensor *a, const hn_tensor *bl, const hn_tensor *bias,
                  hn_status_t *st)
{
    dev_state *ds = states[s->dev];
    int nd = d->ndim, nb = nd - 2;
    int64_t M = d->shape[nd - 2], N = d->shape[nd - 1], K = a->shape[a->ndim - 1];
    cm_operand ao, bo;
    plan_key key;
    plan *p;
    float alpha = 1.0f, beta = 0.0f;
    int64_t batch = 1;
    if (ds == NULL || !is_float(d->dtype) || d->dtype != a->dtype || d->dtype != bl->dtype ||
        (bias != NULL && (bias->dtype != d->dtype || bias->stride[0] != 1)) || M == 0 || N == 0 || K == 0)
        return 0;
    /* D = C^T (col-major N x M) = op(B^T) op(A^T) */
    if (!(d->stride[nd - 1] == 1 || N == 1) ||
        !as_transposed(bl->shape[bl->ndim - 2], bl->shape[bl->ndim - 1], bl->stride[bl->ndim - 2],
                       bl->stride[bl->ndim - 1], &bo) ||
        !as_transposed(M, K, a->stride[a->ndim - 2], a->stride[a->ndim - 1], &ao))
        return 0;
    for (int i = 0; i < nb; i++)
        batch *= d->shape[i];
    memset(&key, 0, sizeof(key));
    key.dtype = d->dtype;
    key.opa = bo.op;
    key.opb = ao.op;
    key.has_bias = bias != NULL;
    key.m = N;
    key.n = M;
    key.k = K;
    key.lda = bo.ld;
    key.ldb = ao.ld;
    key.ldd = d->stride[nd - 2] > N ? d->stride[nd - 2] : N;
    key.batch = batch;
    if (batch > 1) {
        key.sa = bl->ndim > 2 ? batch_stride(bl, nb) : 0;
        key.sb = batch_stride(a, nb);
        key.sd = batch_stride(d, nb);
        if (key.sa < 0 || key.sb < 0 || key.sd < 0)
            return 0;
    }
    key.align_a = alignment(bl->data);
    key.align_b = alignment(a->data);
    key.align_d = alignment(d->data);
    if ((p = get_plan(ds, &key, st)) == NULL)
        return *st == HN_ERR_UNSUPPORTED ? (*st = HN_OK, 0) : 1;
    if (bias != NULL)
        HN_CUBLAS_CHECK_GOTO(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias->data,
                                                            sizeof(void *)), *st, done);
    /* the stream's own workspace: matmuls on other streams may run now */
    *st = HN_CUBLAS_STATUS(cublasLtMatmul(ds->lt, p->desc, &alpha, bl->data, p->la, a->data, p->lb, &beta,
                                          d->data, p->ld, d->data, p->ld, &p->algo, s->workspace,
                                          HN_CUDA_WORKSPACE_BYTES, s->s));
done:
    return 1;
}

static hn_status_t c_matmul(hn_dstream *s, const hn_tensor *d, const hn_tensor *a, const hn_tensor *b, int transb,
                            const hn_tensor *bias, const hn_origin *o)
{
    hn_tensor bl = *b;
    int64_t M = d->shape[d->ndim - 2], N = d->shape[d->ndim - 1], K = a->shape[a->ndim - 1];
    int64_t batches = M * N > 0 ? hn_tensor_numel(d) / (M * N) : 0;
    hn_status_t st = HN_OK;
    tdesc tb;
    (void)o;
    if (transb) { /* linear: b is [N, K]; view it as [K, N] */
        bl.shape[bl.ndim - 2] = b->shape[b->ndim - 1];
        bl.shape[bl.ndim - 1] = b->shape[b->ndim - 2];
        bl.stride[bl.ndim - 2] = b->stride[b->ndim - 1];
        bl.stride[bl.ndim - 1] = b->stride[b->ndim - 2];
    }
    if (try_lt(s, d, a, &bl, bias, &st))
        return st;
    if (batches == 0)
        return HN_OK;
    memset(&tb, 0, sizeof(tb));
    if (bias != NULL)
        tb = to_desc(bias);
    matmul_plain<<<grid_for(batches * M * N), 256, 0, s->s>>>(to_desc(d), to_desc(a), to_desc(&bl), tb,
                                                              bias != NULL, bl.ndim > 2, M, N, K, batches,
                                                              is_float(d->dtype));
    return launched("matmul kernel");
}

/* A value as its dtype stores it, back in fp32. */
__device__ __forceinline__ float as_stored(int dtype, float v)
{
    return dtype == HN_BF16 ? __bfloat162float(__float2bfloat16_rn(v))
           : dtype == HN_F16 ? __half2float(__float2half_rn(v)) : v;
}

#define NORM_THREADS 256
#define NORM_BATCH 4 /* units a thread of the vector kernel loads before it adds */

/* RMSNorm (hn_compute_ops.rmsnorm): a block per row; y = a (+ r) as
 * stored, into ro; the row's sum of squares in fp32; then d = y * scale *
 * w, y read back from ro or recomputed (the same bits). The order of the
 * sum is fixed, so that both kernels below give the same bits: a row is
 * cut in units of 16 bytes (V elements of the dtype; the last may be
 * short), thread t adds the squares of units t, t + 256, ... in order,
 * each unit's elements in order; then warp shuffles, then the warps in
 * order. */
__device__ __forceinline__ int norm_unit(int dtype) { return dtype == HN_F32 ? 4 : 8; }

/* Any layout and dtypes: every element through its tensor's strides. */
__global__ void rmsnorm_rows(tdesc d, tdesc ro, tdesc a, tdesc r, tdesc w, int has_r, int has_ro, int64_t rows,
                             int64_t hidden, float eps)
{
    __shared__ float warp_sum[NORM_THREADS / 32];
    __shared__ float row_scale;
    const int V = norm_unit(a.dtype);
    const int64_t units = (hidden + V - 1) / V;
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        float part = 0;
        for (int64_t u = threadIdx.x; u < units; u += blockDim.x)
            for (int64_t i = u * V; i < (u + 1) * V && i < hidden; i++) {
                int64_t e = row * hidden + i;
                float y = (float)load(a, offset_of(a, e));
                if (has_r)
                    y = as_stored(a.dtype, y + (float)load(r, offset_of(r, e)));
                if (has_ro)
                    store(ro, offset_of(ro, e), y);
                part += y * y;
            }
        for (int off = 16; off > 0; off >>= 1)
            part += __shfl_down_sync(0xffffffffu, part, off);
        if ((threadIdx.x & 31) == 0)
            warp_sum[threadIdx.x >> 5] = part;
        __syncthreads();
        if (threadIdx.x == 0) {
            float sum = 0;
            for (int k = 0; k < NORM_THREADS / 32; k++)
                sum += warp_sum[k];
            row_scale = hn_norm_scale(sum, (size_t)hidden, eps);
        }
        __syncthreads();
        for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
            int64_t e = row * hidden + i;
            float y = has_ro ? (float)load(ro, offset_of(ro, e)) : (float)load(a, offset_of(a, e));
            if (has_r && !has_ro)
                y = as_stored(a.dtype, y + (float)load(r, offset_of(r, e)));
            store(d, offset_of(d, e), y * row_scale * (float)load(w, i * w.stride[0]));
        }
        __syncthreads(); /* the shared words are the next row's */
    }
}

/* Every tensor contiguous, of one dtype T, 16-byte aligned, rows of whole
 * units: 16-byte loads, NORM_BATCH units of a thread in flight at once (a
 * decode row of 4096 took 52 µs element by element through the strides,
 * then 17 µs with one load in flight per thread; one block, one SM). */
template <typename T>
__global__ void rmsnorm_vec(T *d, T *ro, const T *a, const T *r, const T *w, int has_r, int has_ro, int64_t rows,
                            int64_t hidden, float eps)
{
    constexpr int V = 16 / sizeof(T);
    __shared__ float warp_sum[NORM_THREADS / 32];
    __shared__ float row_scale;
    const int64_t units = hidden / V;
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const uint4 *ar = (const uint4 *)(a + row * hidden), *rr = (const uint4 *)(r + row * hidden);
        uint4 *ror = (uint4 *)(ro + row * hidden), *dr = (uint4 *)(d + row * hidden);
        const uint4 *wr = (const uint4 *)w;
        float part = 0;
        for (int64_t u0 = threadIdx.x; u0 < units; u0 += (int64_t)NORM_BATCH * blockDim.x) {
            uint4 x[NORM_BATCH], q[NORM_BATCH];
#pragma unroll
            for (int b = 0; b < NORM_BATCH; b++) {
                const int64_t u = u0 + (int64_t)b * blockDim.x;
                if (u < units) {
                    x[b] = ar[u];
                    if (has_r)
                        q[b] = rr[u];
                }
            }
#pragma unroll
            for (int b = 0; b < NORM_BATCH; b++) {
                const int64_t u = u0 + (int64_t)b * blockDim.x;
                if (u >= units)
                    continue;
                T *px = (T *)&x[b];
                const T *pq = (const T *)&q[b];
#pragma unroll
                for (int k = 0; k < V; k++) {
                    float y = to_f<T>(px[k]);
                    if (has_r)
                        y = to_f<T>(from_f<T>(y + to_f<T>(pq[k])));
                    px[k] = from_f<T>(y);
                    part += y * y;
                }
                if (has_ro)
                    ror[u] = x[b];
            }
        }
        for (int off = 16; off > 0; off >>= 1)
            part += __shfl_down_sync(0xffffffffu, part, off);
        if ((threadIdx.x & 31) == 0)
            warp_sum[threadIdx.x >> 5] = part;
        __syncthreads();
        if (threadIdx.x == 0) {
            float sum = 0;
            for (int k = 0; k < NORM_THREADS / 32; k++)
                sum += warp_sum[k];
            row_scale = hn_norm_scale(sum, (size_t)hidden, eps);
        }
        __syncthreads();
        for (int64_t u0 = threadIdx.x; u0 < units; u0 += (int64_t)NORM_BATCH * blockDim.x) {
            uint4 x[NORM_BATCH], q[NORM_BATCH], g[NORM_BATCH];
#pragma unroll
            for (int b = 0; b < NORM_BATCH; b++) {
                const int64_t u = u0 + (int64_t)b * blockDim.x;
                if (u < units) {
                    x[b] = has_ro ? ror[u] : ar[u];
                    if (has_r && !has_ro)
                        q[b] = rr[u];
                    g[b] = wr[u];
                }
            }
#pragma unroll
            for (int b = 0; b < NORM_BATCH; b++) {
                const int64_t u = u0 + (int64_t)b * blockDim.x;
                if (u >= units)
                    continue;
                T *px = (T *)&x[b];
                const T *pq = (const T *)&q[b], *pg = (const T *)&g[b];
#pragma unroll
                for (int k = 0; k < V; k++) {
                    float y = to_f<T>(px[k]);
                    if (has_r && !has_ro)
                        y = to_f<T>(from_f<T>(y + to_f<T>(pq[k])));
                    px[k] = from_f<T>(y * row_scale * to_f<T>(pg[k]));
                }
                dr[u] = x[b];
            }
        }
        __syncthreads(); /* the shared words are the next row's */
    }
}

static hn_status_t c_rmsnorm(hn_dstream *s, const hn_tensor *d, const hn_tensor *res_out, const hn_tensor *a,
                             const hn_tensor *residual, const hn_tensor *weight, float eps, const hn_origin *o)
{
    int64_t hidden = d->ndim > 0 ? d->shape[d->ndim - 1] : 0, rows;
    const hn_tensor *all[5] = {d, a, weight, residual, res_out};
    int vec = is_float(d->dtype);
    tdesc tr, tro;
    (void)o;
    if (d->ndim < 1)
        return HN_ERR_INVALID;
    rows = hidden > 0 ? hn_tensor_numel(d) / hidden : 0;
    if (rows == 0)
        return HN_OK;
    for (int i = 0; i < 5 && vec; i++)
        if (all[i] != NULL)
            vec = all[i]->dtype == d->dtype && hn_tensor_is_contiguous(all[i]) && aligned16(all[i]->data);
    vec = vec && hidden * hn_dtype_size(d->dtype) % 16 == 0;
    if (vec) {
        const int grid = (int)(rows < 65536 ? rows : 65536), hr = residual != NULL, hro = res_out != NULL;
#define NORM_VEC(T)                                                                                                  \
    rmsnorm_vec<T><<<grid, NORM_THREADS, 0, s->s>>>((T *)d->data, hro ? (T *)res_out->data : NULL, (const T *)a->data,  \
                                                    hr ? (const T *)residual->data : NULL, (const T *)weight->data,  \
                                                    hr, hro, rows, hidden, eps)
        if (d->dtype == HN_F32)
            NORM_VEC(float);
        else if (d->dtype == HN_BF16)
            NORM_VEC(__nv_bfloat16);
        else
            NORM_VEC(__half);
#undef NORM_VEC
        return launched("rmsnorm kernel");
    }
    memset(&tr, 0, sizeof(tr));
    memset(&tro, 0, sizeof(tro));
    if (residual != NULL)
        tr = to_desc(residual);
    if (res_out != NULL)
        tro = to_desc(res_out);
    rmsnorm_rows<<<(int)(rows < 65536 ? rows : 65536), NORM_THREADS, 0, s->s>>>(
        to_desc(d), tro, to_desc(a), tr, to_desc(weight), residual != NULL, res_out != NULL, rows, hidden, eps);
    return launched("rmsnorm kernel");
}

extern "C" const hn_compute_ops hn_compute_cuda = {
    c_copy, c_fill, c_iota, c_random, c_binary, c_scale, c_sum, c_matmul, c_rmsnorm,
};
