/* Tests of src/device/compute_host.c against float64 references computed
 * here, on strided views and every floating dtype. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "device/device.h"
#include "../test.h"

static const hn_device_ops *D = &hn_device_host;
static const hn_compute_ops *C = &hn_compute_host;

static hn_tensor make(hn_dtype t, int ndim, const int64_t *shape)
{
    hn_tensor x;
    int64_t s = 1;
    memset(&x, 0, sizeof(x));
    x.dtype = t;
    x.ndim = ndim;
    for (int i = ndim - 1; i >= 0; i--) {
        x.shape[i] = shape[i];
        x.stride[i] = s;
        s *= shape[i];
    }
    x.data = calloc((size_t)s + 1, (size_t)hn_dtype_size(t));
    return x;
}

static void randomize(hn_tensor *x, uint64_t seed)
{
    int64_t n = hn_tensor_numel(x);
    for (int64_t i = 0; i < n; i++)
        hn_store(x->dtype, x->data, i, (double)(hn_splitmix64(&seed) >> 11) / 9007199254740992.0 * 2 - 1);
}

static double at2(const hn_tensor *x, int64_t i, int64_t j)
{
    return hn_load(x->dtype, x->data, i * x->stride[0] + j * x->stride[1]);
}

static hn_dstream *S;
static void *CTX;

static int setup(void)
{
    hn_device_setup ds = {1, 0, 1, NULL, 0, NULL, 0, NULL, 0};
    return D->init(&ds, &CTX) != HN_OK || D->stream_create(CTX, 0, &S) != HN_OK;
}

static int teardown(void)
{
    D->stream_destroy(S);
    D->fini(CTX);
    return 0;
}

static double tol_of(hn_dtype t) { return t == HN_F32 ? 1e-5 : t == HN_F16 ? 2e-3 : 1.6e-2; }

/* dst = a @ b^T + bias with b given transposed (a strided view). */
static void check_matmul(hn_dtype t, int linear)
{
    int64_t M = 33, K = 70, N = 17;
    hn_tensor a = make(t, 2, (int64_t[]){M, K});
    hn_tensor w = make(t, 2, (int64_t[]){N, K}); /* b = w^T, strided */
    hn_tensor bias = make(t, 1, (int64_t[]){N});
    hn_tensor d = make(t, 2, (int64_t[]){M, N});
    hn_tensor b = w;
    double num = 0, den = 0;
    randomize(&a, 1);
    randomize(&w, 2);
    randomize(&bias, 3);
    b.shape[0] = K;
    b.shape[1] = N;
    b.stride[0] = 1;
    b.stride[1] = K;
    if (linear) {
        CU_ASSERT_EQUAL(C->matmul(S, &d, &a, &w, 1, &bias, NULL), HN_OK);
    } else {
        CU_ASSERT_EQUAL(C->matmul(S, &d, &a, &b, 0, NULL, NULL), HN_OK);
    }
    D->stream_sync(S);
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            double ref = linear ? hn_load(t, bias.data, n) : 0;
            for (int64_t k = 0; k < K; k++)
                ref += at2(&a, m, k) * at2(&w, n, k);
            num += pow(at2(&d, m, n) - ref, 2);
            den += ref * ref;
        }
    CU_ASSERT(sqrt(num / den) < tol_of(t));
    free(a.data);
    free(w.data);
    free(bias.data);
    free(d.data);
}

static void test_matmul(void)
{
    check_matmul(HN_F32, 0);
    check_matmul(HN_BF16, 0);
    check_matmul(HN_F16, 0);
}

static void test_linear(void)
{
    check_matmul(HN_F32, 1);
    check_matmul(HN_BF16, 1);
}

static void test_batched_matmul(void)
{
    /* [2, 3, 4] x [4, 5] -> [2, 3, 5], integers: exact */
    hn_tensor a = make(HN_I64, 3, (int64_t[]){2, 3, 4});
    hn_tensor b = make(HN_I64, 2, (int64_t[]){4, 5});
    hn_tensor d = make(HN_I64, 3, (int64_t[]){2, 3, 5});
    C->iota(S, &a, 0, 1, NULL);
    C->iota(S, &b, -7, 1, NULL);
    C->matmul(S, &d, &a, &b, 0, NULL, NULL);
    D->stream_sync(S);
    for (int bt = 0; bt < 2; bt++)
        for (int m = 0; m < 3; m++)
            for (int n = 0; n < 5; n++) {
                int64_t ref = 0;
                for (int k = 0; k < 4; k++)
                    ref += (int64_t)(bt * 12 + m * 4 + k) * (k * 5 + n - 7);
                CU_ASSERT_EQUAL(((int64_t *)d.data)[bt * 15 + m * 5 + n], ref);
            }
    free(a.data);
    free(b.data);
    free(d.data);
}

static void test_elementwise(void)
{
    hn_tensor a = make(HN_F32, 2, (int64_t[]){4, 6}), b = make(HN_F32, 2, (int64_t[]){4, 6});
    hn_tensor d = make(HN_F32, 2, (int64_t[]){6, 4}), at = a;
    float *pa = a.data, *pb = b.data, *pd = d.data;
    randomize(&a, 5);
    randomize(&b, 6);
    /* transposed view of a into d: strided read */
    at.shape[0] = 6;
    at.shape[1] = 4;
    at.stride[0] = 1;
    at.stride[1] = 6;
    C->copy(S, &d, &at, NULL);
    D->stream_sync(S);
    for (int i = 0; i < 6; i++)
        for (int j = 0; j < 4; j++)
            CU_ASSERT_EQUAL(pd[i * 4 + j], pa[j * 6 + i]);
    for (hn_redop op = HN_RED_SUM; op <= HN_RED_MIN; op++) {
        hn_tensor e = make(HN_F32, 2, (int64_t[]){4, 6});
        float *pe = e.data;
        C->binary(S, op, &e, &a, &b, NULL);
        D->stream_sync(S);
        for (int i = 0; i < 24; i++) {
            float want = op == HN_RED_SUM ? pa[i] + pb[i] : op == HN_RED_PROD ? pa[i] * pb[i] : op == HN_RED_MAX ? fmaxf(pa[i], pb[i]) : fminf(pa[i], pb[i]);
            CU_ASSERT_EQUAL(pe[i], want);
        }
        free(e.data);
    }
    C->scale(S, &b, &a, 0.5, NULL);
    D->stream_sync(S);
    for (int i = 0; i < 24; i++)
        CU_ASSERT_EQUAL(pb[i], pa[i] * 0.5f);
    free(a.data);
    free(b.data);
    free(d.data);
}

static void test_sum_and_cast(void)
{
    hn_tensor a = make(HN_F32, 3, (int64_t[]){3, 4, 5});
    hn_tensor s = make(HN_F32, 2, (int64_t[]){3, 5});
    hn_tensor h = make(HN_BF16, 3, (int64_t[]){3, 4, 5});
    float *pa = a.data, *ps = s.data;
    randomize(&a, 9);
    C->sum(S, &s, &a, 1, NULL);
    C->copy(S, &h, &a, NULL); /* cast rounds to nearest even */
    D->stream_sync(S);
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 5; k++) {
            double ref = 0;
            for (int j = 0; j < 4; j++)
                ref += pa[i * 20 + j * 5 + k];
            CU_ASSERT_DOUBLE_EQUAL(ps[i * 5 + k], ref, 1e-5);
        }
    for (int i = 0; i < 60; i++)
        CU_ASSERT_EQUAL(((uint16_t *)h.data)[i], hn_f32_to_bf16(pa[i]));
    free(a.data);
    free(s.data);
    free(h.data);
}

static void test_random_fill_iota(void)
{
    hn_tensor a = make(HN_F32, 1, (int64_t[]){1000}), b = make(HN_F32, 1, (int64_t[]){1000});
    hn_tensor i = make(HN_I32, 1, (int64_t[]){10});
    float *pa = a.data, *pb = b.data;
    double mean = 0;
    int distinct = 0;
    C->random(S, &a, 42, -1, 1, NULL);
    C->random(S, &b, 42, -1, 1, NULL);
    C->iota(S, &i, 5, -2, NULL);
    D->stream_sync(S);
    CU_ASSERT_EQUAL(memcmp(pa, pb, 4000), 0); /* a function of the seed */
    for (int k = 0; k < 1000; k++) {
        CU_ASSERT(pa[k] >= -1 && pa[k] < 1);
        mean += pa[k] / 1000;
        distinct += k > 0 && pa[k] != pa[k - 1];
    }
    CU_ASSERT(fabs(mean) < 0.1);
    CU_ASSERT(distinct > 990);
    for (int k = 0; k < 10; k++)
        CU_ASSERT_EQUAL(((int32_t *)i.data)[k], 5 - 2 * k);
    C->random(S, &b, 43, -1, 1, NULL);
    C->fill(S, &a, 2.5, NULL);
    D->stream_sync(S);
    CU_ASSERT_NOT_EQUAL(memcmp(pa, pb, 4000), 0);
    CU_ASSERT_EQUAL(pa[999], 2.5f);
    free(a.data);
    free(b.data);
    free(i.data);
}

/* Fills every element of x with NaN (a poison no norm writes). */
static void poison(hn_tensor *x)
{
    for (int64_t i = 0; i < hn_tensor_numel(x); i++)
        hn_store(x->dtype, x->data, i, NAN);
}

/* rmsnorm with a residual: y = a + r as stored, exactly; out against a
 * float64 norm of that y within the dtype's rounding; then the same in
 * place (out = a, res_out = residual) bit for bit, on a strided input
 * (a transposed view), and without a residual. */
static void check_rmsnorm(hn_dtype t)
{
    enum { ROWS = 5, H = 37 };
    double rel = t == HN_F32 ? 1e-5 : t == HN_F16 ? 1.0 / 1024 : 1.0 / 128;
    float eps = 1e-5f;
    hn_tensor at = make(t, 2, (int64_t[]){H, ROWS}), a = at; /* a: rows of at's columns */
    hn_tensor r = make(t, 2, (int64_t[]){ROWS, H}), w = make(t, 1, (int64_t[]){H});
    hn_tensor y = make(t, 2, (int64_t[]){ROWS, H}), out = make(t, 2, (int64_t[]){ROWS, H});
    hn_tensor a2 = make(t, 2, (int64_t[]){ROWS, H}), r2 = make(t, 2, (int64_t[]){ROWS, H});
    randomize(&at, 11);
    randomize(&r, 12);
    randomize(&w, 13);
    a.shape[0] = ROWS;
    a.shape[1] = H;
    a.stride[0] = 1;
    a.stride[1] = ROWS;
    poison(&y);
    poison(&out);
    CU_ASSERT_EQUAL(C->rmsnorm(S, &out, &y, &a, &r, &w, eps, NULL), HN_OK);
    D->stream_sync(S);
    for (int i = 0; i < ROWS; i++) {
        double sumsq = 0, scale;
        for (int k = 0; k < H; k++) {
            double want = hn_load(t, at.data, k * ROWS + i) + hn_load(t, r.data, i * H + k), got = at2(&y, i, k);
            float f = (float)want;
            char cell[8];
            hn_store(t, cell, 0, f);
            CU_ASSERT_EQUAL(got, hn_load(t, cell, 0)); /* fp32 add, rounded once */
            sumsq += got * got;
        }
        scale = 1 / sqrt(sumsq / H + eps);
        for (int k = 0; k < H; k++) {
            double ref = at2(&y, i, k) * scale * hn_load(t, w.data, k);
            CU_ASSERT(fabs(at2(&out, i, k) - ref) <= rel * fabs(ref) + 1e-6);
        }
    }
    /* in place: out over the input, the residual updated */
    for (int i = 0; i < ROWS; i++)
        for (int k = 0; k < H; k++) {
            hn_store(t, a2.data, i * H + k, at2(&a, i, k));
            hn_store(t, r2.data, i * H + k, at2(&r, i, k));
        }
    CU_ASSERT_EQUAL(C->rmsnorm(S, &a2, &r2, &a2, &r2, &w, eps, NULL), HN_OK);
    D->stream_sync(S);
    CU_ASSERT_EQUAL(memcmp(a2.data, out.data, hn_tensor_bytes(&out)), 0);
    CU_ASSERT_EQUAL(memcmp(r2.data, y.data, hn_tensor_bytes(&y)), 0);
    /* without a residual: the norm of y itself, the same bits */
    poison(&a2);
    CU_ASSERT_EQUAL(C->rmsnorm(S, &a2, NULL, &y, NULL, &w, eps, NULL), HN_OK);
    D->stream_sync(S);
    CU_ASSERT_EQUAL(memcmp(a2.data, out.data, hn_tensor_bytes(&out)), 0);
    /* a residual without res_out: y recomputed, the same bits */
    poison(&a2);
    CU_ASSERT_EQUAL(C->rmsnorm(S, &a2, NULL, &a, &r, &w, eps, NULL), HN_OK);
    D->stream_sync(S);
    CU_ASSERT_EQUAL(memcmp(a2.data, out.data, hn_tensor_bytes(&out)), 0);
    free(at.data);
    free(r.data);
    free(w.data);
    free(y.data);
    free(out.data);
    free(a2.data);
    free(r2.data);
}

static void test_rmsnorm(void)
{
    check_rmsnorm(HN_F32);
    check_rmsnorm(HN_BF16);
    check_rmsnorm(HN_F16);
}

static void test_half_conversions(void)
{
    /* exhaustive: every f16 and bf16 value survives f32 and back */
    for (uint32_t h = 0; h < 65536; h++) {
        float f = hn_f16_to_f32((uint16_t)h), g = hn_bf16_to_f32((uint16_t)h);
        if (!isnan(f))
            CU_ASSERT_EQUAL(hn_f32_to_f16(f), h);
        if (!isnan(g))
            CU_ASSERT_EQUAL(hn_f32_to_bf16(g), h);
    }
    CU_ASSERT_EQUAL(hn_f32_to_f16(65520.0f), 0x7c00); /* rounds to infinity */
    CU_ASSERT_EQUAL(hn_f32_to_bf16(1.00390625f), 0x3f80); /* tie to even */
}

void hn_suite_compute_host(void)
{
    static CU_TestInfo tests[] = {
        {"matmul f32/bf16/f16 on a strided operand", test_matmul},
        {"linear with bias", test_linear},
        {"batched integer matmul, exact", test_batched_matmul},
        {"copy, add, mul, maximum, minimum, scale", test_elementwise},
        {"sum along an axis, cast", test_sum_and_cast},
        {"random, fill, iota", test_random_fill_iota},
        {"rmsnorm with and without a residual, in place, strided", test_rmsnorm},
        {"bf16 and f16 conversions", test_half_conversions},
        CU_TEST_INFO_NULL,
    };
    CU_SuiteInfo suites[] = {{"device/compute_host", setup, teardown, NULL, NULL, tests}, CU_SUITE_INFO_NULL};
    CU_register_suites(suites);
}
