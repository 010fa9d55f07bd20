/* References of the latency path's calls for its tests (tests/comm/ll_cuda_test.c,
 * tests/comm/comm_ll_test.c): random inputs kept on the host, the results
 * a call must give computed from them, and the checks. */
#ifndef HN_LL_REF_H
#define HN_LL_REF_H

#include <stddef.h>
#include <stdint.h>

#include "base/collective.h"
#include "base/dtype.h"

/* n random inputs of dtype dt: small integers (every sum, max, min exact
 * in bf16), or +-1 and +-2 for products (powers of two); for an allgather
 * of integers (raw = 1), any bits, every 7th element all ones (the
 * sentinel pattern and a packet flag's look-alikes must pass unchanged). */
void hn_llt_fill(hn_dtype dt, hn_redop redop, int raw, void *host, size_t n, uint64_t *seed);

/* Element i of the reduction of the n members' inputs in[p] (host copies,
 * elements of dt from offset `at`), as the latency path computes it: fp32
 * in team order, avg divided at the end; plus res (NULL: nothing) before
 * it is stored, as the fused norm does. */
float hn_llt_reduce(hn_dtype dt, hn_redop redop, const void *const *in, int n, size_t at, const void *res, size_t i);

/* The fused norm's factor of a row of y as stored (hidden elements of
 * dt), in double: out[j] = y[j] * factor * weight[j]. */
double hn_llt_norm_scale(hn_dtype dt, const void *yrow, size_t hidden, float eps);

/* got (an element of dt) against a float reference: bit-exact after
 * rounding to dt, NaN for NaN; the norm's out (tol = 1) within a few of
 * dt's rounding steps. 1 if it matches. */
int hn_llt_same(hn_dtype dt, const void *got, size_t i, double want, int tol);

#endif
