/* Tests of src/device/compute_cuda.cu: each op on the GPU against the host
 * backend's op on the same inputs (both draw them from the same seeded
 * generator). Registered only when a GPU is present. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "device/device.h"
#include "../test.h"

#ifdef HN_HAVE_CUDA
static const hn_device_ops *G = &hn_device_cuda;
static void *GCTX;
static hn_dstream *GS;

static int setup(void)
{
    hn_device_setup ds = {1, 0, 1, NULL, 0, NULL, 0, NULL, 0};
    return G->init(&ds, &GCTX) != HN_OK || G->thread_init(GCTX, 0) != HN_OK ||
           G->stream_create(GCTX, 0, &GS) != HN_OK;
}

static int teardown(void)
{
    G->stream_destroy(GS);
    G->thread_fini(GCTX, 0);
    G->fini(GCTX);
    return 0;
}

typedef struct pair {
    hn_tensor h, g; /* host tensor, GPU tensor of the same geometry */
} pair;

/* the host compute ops issue on a host stream; here they run through a
 * private one */
static hn_dstream *HS;
static void *HCTX;

static void host_sync(void) { hn_device_host.stream_sync(HS); }

static pair make_rand(hn_dtype t, int ndim, const int64_t *shape, uint64_t seed)
{
    pair p;
    int64_t s = 1;
    memset(&p, 0, sizeof(p));
    p.h.dtype = t;
    p.h.ndim = ndim;
    for (int i = ndim - 1; i >= 0; i--) {
        p.h.shape[i] = shape[i];
        p.h.stride[i] = s;
        s *= shape[i];
    }
    p.g = p.h;
    p.h.data = calloc((size_t)s + 1, 8);
    CU_ASSERT_EQUAL(G->mem_alloc(GCTX, 0, (size_t)(s + 1) * 8, &p.g.data), HN_OK);
    hn_compute_host.random(HS, &p.h, seed, -1, 1, NULL);
    hn_compute_cuda.random(GS, &p.g, seed, -1, 1, NULL);
    return p;
}

static void drop(pair *p)
{
    free(p->h.data);
    G->mem_free(GCTX, 0, p->g.data);
}

/* relative L2 distance between the host and GPU results */
static double distance(const pair *p)
{
    int64_t n = hn_tensor_numel(&p->h);
    size_t bytes = hn_tensor_bytes(&p->h);
    char *g = malloc(bytes + 1);
    double num = 0, den = 0;
    host_sync();
    G->stream_sync(GS);
    G->copy_to_host(GCTX, 0, g, p->g.data, bytes);
    for (int64_t i = 0; i < n; i++) {
        double a = hn_load(p->h.dtype, p->h.data, i), b = hn_load(p->h.dtype, g, i);
        num += (a - b) * (a - b);
        den += a * a;
    }
    free(g);
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static int host_setup(void)
{
    hn_device_setup ds = {1, 0, 1, NULL, 0, NULL, 0, NULL, 0};
    return hn_device_host.init(&ds, &HCTX) != HN_OK || hn_device_host.stream_create(HCTX, 0, &HS) != HN_OK;
}

static void test_random_is_the_hosts(void)
{
    pair a = make_rand(HN_F32, 2, (int64_t[]){37, 129}, 5), b = make_rand(HN_BF16, 1, (int64_t[]){1000}, 6);
    pair c = make_rand(HN_I32, 1, (int64_t[]){1000}, 7);
    CU_ASSERT_EQUAL(distance(&a), 0.0);
    CU_ASSERT_EQUAL(distance(&b), 0.0);
    CU_ASSERT_EQUAL(distance(&c), 0.0);
    drop(&a);
    drop(&b);
    drop(&c);
}

static void check_matmul(hn_dtype t, int64_t M, int64_t N, int64_t K, int batch, int linear, int strided_a)
{
    int64_t ashape[3] = {batch, M, K}, dshape[3] = {batch, M, N};
    int nd = batch > 1 ? 3 : 2;
    pair a = make_rand(t, nd, batch > 1 ? ashape : ashape + 1, 11);
    pair w = make_rand(t, 2, linear ? (int64_t[]){N, K} : (int64_t[]){K, N}, 12);
    pair bias = make_rand(t, 1, (int64_t[]){N}, 13);
    pair d = make_rand(t, nd, batch > 1 ? dshape : dshape + 1, 14);
    hn_tensor ah = a.h, ag = a.g;
    double dist, tol = t == HN_F32 ? 1e-5 : t == HN_F16 ? 2e-3 : 1.6e-2;
    if (strided_a && nd == 2) {
        /* A as the transpose of a [K, M] buffer: column-contiguous */
        ah.shape[0] = M;
        ah.shape[1] = K;
        ah.stride[0] = 1;
        ah.stride[1] = M;
        ag.shape[0] = M;
        ag.shape[1] = K;
        ag.stride[0] = 1;
        ag.stride[1] = M;
    }
    hn_compute_host.matmul(HS, &d.h, &ah, &w.h, linear, linear ? &bias.h : NULL, NULL);
    CU_ASSERT_EQUAL(hn_compute_cuda.matmul(GS, &d.g, &ag, &w.g, linear, linear ? &bias.g : NULL, NULL), HN_OK);
    dist = distance(&d);
    if (!(dist < tol))
        fprintf(stderr, "\n  matmul %s M=%lld N=%lld K=%lld batch=%d linear=%d strided=%d: rel l2 %g\n",
                hn_dtype_name(t), (long long)M, (long long)N, (long long)K, batch, linear, strided_a, dist);
    CU_ASSERT(dist < tol);
    drop(&a);
    drop(&w);
    drop(&bias);
    drop(&d);
}

/* Bytes of a pair's GPU tensor equal to another's (both synchronized). */
static int same_gpu_bits(const pair *a, const pair *b)
{
    size_t bytes = hn_tensor_bytes(&a->g);
    char *x = malloc(bytes + 1), *y = malloc(bytes + 1);
    int same;
    G->stream_sync(GS);
    G->copy_to_host(GCTX, 0, x, a->g.data, bytes);
    G->copy_to_host(GCTX, 0, y, b->g.data, bytes);
    same = memcmp(x, y, bytes) == 0;
    free(x);
    free(y);
    return same;
}

/* rmsnorm on the GPU against the host's: y = a + r bit for bit (one fp32
 * add, rounded once), the normalized rows within the dtype's rounding (the
 * sums of squares add in another order); in place (out over a, res_out
 * over r) the same bits as apart; a strided input; rows of fewer and more
 * elements than a block has threads; more rows than blocks. */
static void check_rmsnorm(hn_dtype t, int64_t rows, int64_t hidden, int strided)
{
    int64_t shape[2] = {rows, hidden}, tshape[2] = {hidden, rows};
    pair a = make_rand(t, 2, strided ? tshape : shape, 21), r = make_rand(t, 2, shape, 22);
    pair w = make_rand(t, 1, &hidden, 23), y = make_rand(t, 2, shape, 24), out = make_rand(t, 2, shape, 25);
    pair a2 = make_rand(t, 2, shape, 26), r2 = make_rand(t, 2, shape, 27);
    hn_tensor ah = a.h, ag = a.g;
    double tol = t == HN_F32 ? 1e-6 : t == HN_F16 ? 1e-3 : 8e-3, dist;
    if (strided) {
        ah.shape[0] = ag.shape[0] = rows;
        ah.shape[1] = ag.shape[1] = hidden;
        ah.stride[0] = ag.stride[0] = 1;
        ah.stride[1] = ag.stride[1] = rows;
    }
    hn_compute_host.rmsnorm(HS, &out.h, &y.h, &ah, &r.h, &w.h, 1e-6f, NULL);
    CU_ASSERT_EQUAL(hn_compute_cuda.rmsnorm(GS, &out.g, &y.g, &ag, &r.g, &w.g, 1e-6f, NULL), HN_OK);
    CU_ASSERT_EQUAL(distance(&y), 0.0);
    dist = distance(&out);
    if (!(dist < tol))
        fprintf(stderr, "\n  rmsnorm %s %lld x %lld strided=%d: rel l2 %g\n", hn_dtype_name(t), (long long)rows,
                (long long)hidden, strided, dist);
    CU_ASSERT(dist < tol);
    /* in place on the GPU: a2 = a, r2 = r, then a2, r2 <- a2, r2 */
    CU_ASSERT_EQUAL(hn_compute_cuda.copy(GS, &a2.g, &ag, NULL), HN_OK);
    CU_ASSERT_EQUAL(hn_compute_cuda.copy(GS, &r2.g, &r.g, NULL), HN_OK);
    CU_ASSERT_EQUAL(hn_compute_cuda.rmsnorm(GS, &a2.g, &r2.g, &a2.g, &r2.g, &w.g, 1e-6f, NULL), HN_OK);
    CU_ASSERT(same_gpu_bits(&a2, &out));
    CU_ASSERT(same_gpu_bits(&r2, &y));
    /* without a residual, of y: the same bits again */
    CU_ASSERT_EQUAL(hn_compute_cuda.fill(GS, &a2.g, NAN, NULL), HN_OK);
    CU_ASSERT_EQUAL(hn_compute_cuda.rmsnorm(GS, &a2.g, NULL, &y.g, NULL, &w.g, 1e-6f, NULL), HN_OK);
    CU_ASSERT(same_gpu_bits(&a2, &out));
    drop(&a);
    drop(&r);
    drop(&w);
    drop(&y);
    drop(&out);
    drop(&a2);
    drop(&r2);
}

static void test_rmsnorm(void)
{
    static const hn_dtype types[] = {HN_F32, HN_BF16, HN_F16};
    for (int i = 0; i < 3; i++) {
        check_rmsnorm(types[i], 4, 37, 0);
        check_rmsnorm(types[i], 33, 4096, 1);
        check_rmsnorm(types[i], 1, 8192, 0);
    }
    check_rmsnorm(HN_BF16, 70000, 8, 0);
}

static void test_matmul(void)
{
    hn_dtype types[] = {HN_F32, HN_BF16, HN_F16};
    for (int i = 0; i < 3; i++) {
        check_matmul(types[i], 128, 64, 256, 1, 0, 0);
        check_matmul(types[i], 33, 17, 70, 1, 0, 0);  /* odd sizes, unaligned rows */
        check_matmul(types[i], 96, 48, 64, 1, 1, 0);  /* linear with bias */
        check_matmul(types[i], 64, 32, 128, 4, 0, 0); /* batched, shared B */
        check_matmul(types[i], 64, 32, 128, 1, 0, 1); /* transposed A */
    }
    check_matmul(HN_I32, 16, 8, 32, 1, 0, 0); /* the plain kernel */
}

static void test_elementwise(void)
{
    pair a = make_rand(HN_BF16, 2, (int64_t[]){64, 48}, 21), b = make_rand(HN_BF16, 2, (int64_t[]){64, 48}, 22);
    pair d = make_rand(HN_BF16, 2, (int64_t[]){64, 48}, 23), s = make_rand(HN_F32, 1, (int64_t[]){48}, 24);
    pair f = make_rand(HN_F32, 2, (int64_t[]){48, 64}, 25);
    hn_tensor ath = a.h, atg = a.g;
    for (hn_redop op = HN_RED_SUM; op <= HN_RED_MIN; op++) {
        hn_compute_host.binary(HS, op, &d.h, &a.h, &b.h, NULL);
        hn_compute_cuda.binary(GS, op, &d.g, &a.g, &b.g, NULL);
        CU_ASSERT_EQUAL(distance(&d), 0.0);
    }
    hn_compute_host.scale(HS, &d.h, &a.h, 0.75, NULL);
    hn_compute_cuda.scale(GS, &d.g, &a.g, 0.75, NULL);
    CU_ASSERT_EQUAL(distance(&d), 0.0);
    /* cast of a transposed bf16 view into f32 */
    ath.shape[0] = atg.shape[0] = 48;
    ath.shape[1] = atg.shape[1] = 64;
    ath.stride[0] = atg.stride[0] = 1;
    ath.stride[1] = atg.stride[1] = 48;
    hn_compute_host.copy(HS, &f.h, &ath, NULL);
    hn_compute_cuda.copy(GS, &f.g, &atg, NULL);
    CU_ASSERT_EQUAL(distance(&f), 0.0);
    hn_compute_host.sum(HS, &s.h, &f.h, 1, NULL);
    hn_compute_cuda.sum(GS, &s.g, &f.g, 1, NULL);
    s.h.shape[0] = s.g.shape[0] = 48;
    CU_ASSERT(distance(&s) < 1e-6);
    hn_compute_host.iota(HS, &d.h, 3, 0.5, NULL);
    hn_compute_cuda.iota(GS, &d.g, 3, 0.5, NULL);
    CU_ASSERT_EQUAL(distance(&d), 0.0);
    hn_compute_host.fill(HS, &d.h, -1.25, NULL);
    hn_compute_cuda.fill(GS, &d.g, -1.25, NULL);
    CU_ASSERT_EQUAL(distance(&d), 0.0);
    drop(&a);
    drop(&b);
    drop(&d);
    drop(&s);
    drop(&f);
}

/* ---- concurrent matmuls at production sizes ----
 * GEMM libraries serve large shapes with kernels that keep partial sums in
 * the workspace (split-K, stream-K); matmuls that run at once on several
 * streams must not share it. Each case runs the same products on one
 * stream, then on S streams at once into poisoned outputs, and wants the
 * results bit for bit, nothing left at the poison, and a sample of
 * elements against a double-precision host reference. */

typedef struct gemm_case {
    const char *name;
    int64_t M, N, K; /* per stream */
    int streams;
    int shared_a;    /* every stream multiplies the same A (else chunk j of A) */
} gemm_case;

static hn_tensor dev_tensor(hn_dtype t, int64_t rows, int64_t cols, void *data)
{
    hn_tensor x;
    memset(&x, 0, sizeof(x));
    x.dtype = t;
    x.ndim = 2;
    x.shape[0] = rows;
    x.shape[1] = cols;
    x.stride[0] = cols;
    x.stride[1] = 1;
    x.data = data;
    return x;
}

static void run_gemm_case(const gemm_case *c)
{
    enum { MAX_S = 4, SAMPLES = 256 };
    hn_dstream *st[MAX_S];
    int S = c->streams, nA = c->shared_a ? 1 : S;
    size_t es = 2, abytes = (size_t)(c->M * c->K) * es, bbytes = (size_t)(c->K * c->N) * es;
    size_t dbytes = (size_t)(c->M * c->N) * es;
    void *A = NULL, *B = NULL, *D1 = NULL, *DS = NULL;
    uint16_t *h1, *hs, *ha, *hb;
    int64_t differ = 0, poisoned = 0, bad_samples = 0;
    uint64_t rng = 99;
    CU_ASSERT_EQUAL_FATAL(G->mem_alloc(GCTX, 0, abytes * (size_t)nA, &A), HN_OK);
    CU_ASSERT_EQUAL_FATAL(G->mem_alloc(GCTX, 0, bbytes, &B), HN_OK);
    CU_ASSERT_EQUAL_FATAL(G->mem_alloc(GCTX, 0, dbytes * (size_t)S, &D1), HN_OK);
    CU_ASSERT_EQUAL_FATAL(G->mem_alloc(GCTX, 0, dbytes * (size_t)S, &DS), HN_OK);
    for (int j = 0; j < S; j++)
        CU_ASSERT_EQUAL_FATAL(G->stream_create(GCTX, 0, &st[j]), HN_OK);
    {
        hn_tensor a = dev_tensor(HN_BF16, c->M * nA, c->K, A), b = dev_tensor(HN_BF16, c->K, c->N, B);
        hn_tensor d1 = dev_tensor(HN_BF16, c->M * S, c->N, D1), ds = dev_tensor(HN_BF16, c->M * S, c->N, DS);
        CU_ASSERT_EQUAL(hn_compute_cuda.random(GS, &a, 31, -1, 1, NULL), HN_OK);
        CU_ASSERT_EQUAL(hn_compute_cuda.random(GS, &b, 32, -1, 1, NULL), HN_OK);
        CU_ASSERT_EQUAL(hn_compute_cuda.fill(GS, &d1, NAN, NULL), HN_OK);
        CU_ASSERT_EQUAL(hn_compute_cuda.fill(GS, &ds, NAN, NULL), HN_OK);
        /* one stream, one product after the other */
        for (int j = 0; j < S; j++) {
            hn_tensor aj = dev_tensor(HN_BF16, c->M, c->K, (char *)A + (c->shared_a ? 0 : (size_t)j * abytes));
            hn_tensor dj = dev_tensor(HN_BF16, c->M, c->N, (char *)D1 + (size_t)j * dbytes);
            CU_ASSERT_EQUAL(hn_compute_cuda.matmul(GS, &dj, &aj, &b, 0, NULL, NULL), HN_OK);
        }
        CU_ASSERT_EQUAL(G->stream_sync(GS), HN_OK);
        /* S streams at once */
        for (int j = 0; j < S; j++) {
            hn_tensor aj = dev_tensor(HN_BF16, c->M, c->K, (char *)A + (c->shared_a ? 0 : (size_t)j * abytes));
            hn_tensor dj = dev_tensor(HN_BF16, c->M, c->N, (char *)DS + (size_t)j * dbytes);
            CU_ASSERT_EQUAL(hn_compute_cuda.matmul(st[j], &dj, &aj, &b, 0, NULL, NULL), HN_OK);
        }
        for (int j = 0; j < S; j++)
            CU_ASSERT_EQUAL(G->stream_sync(st[j]), HN_OK);
    }
    h1 = malloc(dbytes * (size_t)S);
    hs = malloc(dbytes * (size_t)S);
    ha = malloc(abytes * (size_t)nA);
    hb = malloc(bbytes);
    CU_ASSERT_FATAL(h1 != NULL && hs != NULL && ha != NULL && hb != NULL);
    G->copy_to_host(GCTX, 0, h1, D1, dbytes * (size_t)S);
    G->copy_to_host(GCTX, 0, hs, DS, dbytes * (size_t)S);
    G->copy_to_host(GCTX, 0, ha, A, abytes * (size_t)nA);
    G->copy_to_host(GCTX, 0, hb, B, bbytes);
    for (size_t i = 0; i < dbytes * (size_t)S / 2; i++) {
        differ += h1[i] != hs[i];
        /* the poison: a bf16 NaN, which no product of these inputs makes */
        poisoned += (hs[i] & 0x7f80) == 0x7f80 && (hs[i] & 0x7f) != 0;
    }
    for (int k = 0; k < SAMPLES; k++) {
        int64_t j = (int64_t)(hn_splitmix64(&rng) % (uint64_t)S), m = (int64_t)(hn_splitmix64(&rng) % (uint64_t)c->M);
        int64_t n = (int64_t)(hn_splitmix64(&rng) % (uint64_t)c->N);
        const uint16_t *arow = ha + (size_t)(c->shared_a ? 0 : j) * (size_t)(c->M * c->K) + (size_t)(m * c->K);
        double ref = 0, mag = 0, got = hn_load(HN_BF16, hs, (j * c->M + m) * c->N + n);
        for (int64_t q = 0; q < c->K; q++) {
            double x = hn_load(HN_BF16, arow, q) * hn_load(HN_BF16, hb, q * c->N + n);
            ref += x;
            mag += fabs(x);
        }
        /* bf16 output rounding plus fp32 accumulation, against the sum of magnitudes */
        bad_samples += !(fabs(got - ref) <= 8e-3 * fabs(ref) + 1e-5 * mag);
    }
    if (differ || poisoned || bad_samples)
        fprintf(stderr, "\n  %s (%d streams, M=%lld N=%lld K=%lld): %lld elements differ from one stream, "
                "%lld left at the poison, %lld of %d samples off the reference\n", c->name, S, (long long)c->M,
                (long long)c->N, (long long)c->K, (long long)differ, (long long)poisoned,
                (long long)bad_samples, SAMPLES);
    CU_ASSERT_EQUAL(differ, 0);
    CU_ASSERT_EQUAL(poisoned, 0);
    CU_ASSERT_EQUAL(bad_samples, 0);
    free(h1);
    free(hs);
    free(ha);
    free(hb);
    for (int j = 0; j < S; j++)
        G->stream_destroy(st[j]);
    G->mem_free(GCTX, 0, A);
    G->mem_free(GCTX, 0, B);
    G->mem_free(GCTX, 0, D1);
    G->mem_free(GCTX, 0, DS);
}

static void test_concurrent_matmuls(void)
{
    static const gemm_case cases[] = {
        /* the pipelines' chunks (the race was first seen here) */
        {"two chunks of a 32768-row A", 16384, 8192, 16384, 2, 0},
        /* small M, long K: split-K territory */
        {"small M, long K", 128, 4096, 32768, 4, 1},
        {"small M, long K, wide", 256, 8192, 16384, 3, 1},
        /* large squares */
        {"large squares", 8192, 8192, 8192, 3, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        run_gemm_case(&cases[i]);
}

static int setup_all(void) { return host_setup() || setup(); }

static int teardown_all(void)
{
    hn_device_host.stream_destroy(HS);
    hn_device_host.fini(HCTX);
    return teardown();
}
#endif

void hn_suite_compute_cuda(void)
{
#ifdef HN_HAVE_CUDA
    static CU_TestInfo tests[] = {
        {"random draws the host's values", test_random_is_the_hosts},
        {"matmul and linear against the host", test_matmul},
        {"elementwise, cast, sum against the host", test_elementwise},
        {"rmsnorm against the host, in place, strided", test_rmsnorm},
        {"concurrent matmuls on several streams at production sizes", test_concurrent_matmuls},
        CU_TEST_INFO_NULL,
    };
    CU_SuiteInfo suites[] = {{"device/compute_cuda", setup_all, teardown_all, NULL, NULL, tests}, CU_SUITE_INFO_NULL};
    if (hn_device_cuda.device_count() > 0)
        CU_register_suites(suites);
#endif
}
