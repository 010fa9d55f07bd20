/* References of the latency path's calls for its tests (ll_ref.h). */
#include <math.h>
#include <string.h>

#include "comm/ll/ll.h"
#include "base/util.h"
#include "ll_ref.h"

void hn_llt_fill(hn_dtype dt, hn_redop redop, int raw, void *host, size_t n, uint64_t *seed)
{
    size_t es = (size_t)hn_dtype_size(dt);
    for (size_t i = 0; i < n; i++) {
        uint64_t r = hn_splitmix64(seed);
        if (raw) {
            if (i % 7 == 3)
                r = ~0ull;
            memcpy((char *)host + i * es, &r, es);
        } else if (redop == HN_RED_PROD) {
            hn_store(dt, host, (int64_t)i, (double)((r % 2 ? 1 : 2) * (r / 2 % 2 ? -1 : 1)));
        } else {
            hn_store(dt, host, (int64_t)i, (double)((int)(r % 17) - 8));
        }
    }
}

float hn_llt_reduce(hn_dtype dt, hn_redop redop, const void *const *in, int n, size_t at, const void *res, size_t i)
{
    float acc = (float)hn_load(dt, in[0], (int64_t)(at + i));
    for (int p = 1; p < n; p++)
        acc = hn_ll_combine(redop, acc, (float)hn_load(dt, in[p], (int64_t)(at + i)));
    acc = hn_ll_finish(redop, acc, n);
    if (res != NULL)
        acc += (float)hn_load(dt, res, (int64_t)i);
    return acc;
}

double hn_llt_norm_scale(hn_dtype dt, const void *yrow, size_t hidden, float eps)
{
    double ss = 0;
    for (size_t k = 0; k < hidden; k++) {
        double y = hn_load(dt, yrow, (int64_t)k);
        ss += y * y;
    }
    return 1 / sqrt(ss / (double)hidden + eps);
}

int hn_llt_same(hn_dtype dt, const void *got, size_t i, double want, int tol)
{
    double g = hn_load(dt, got, (int64_t)i), step;
    char tmp[8];
    if (isnan(want))
        return isnan(g);
    if (!tol) { /* as the dtype stores the reference; a zero's sign too */
        hn_store(dt, tmp, 0, want);
        return g == hn_load(dt, tmp, 0) && (g != 0 || signbit(g) == signbit(hn_load(dt, tmp, 0)));
    }
    step = dt == HN_BF16 ? 1.0 / 128 : dt == HN_F16 ? 1.0 / 1024 : 1e-5;
    return fabs(g - want) <= step * fabs(want) + 1e-6;
}
