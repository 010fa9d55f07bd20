/* RMSNorm's factor, one formula for every place that normalises a row:
 * the compute backends' rmsnorm (compute_host.c, compute_cuda.cu) and the
 * latency path's fused allreduce + norm (src/comm/ll), so that a norm
 * through either gives the same bits. Compiled as C and as CUDA (host and
 * device code). */
#ifndef HN_DEVICE_NORM_H
#define HN_DEVICE_NORM_H

#include <math.h>
#include <stddef.h>

#ifdef __CUDACC__
#define HN_NORM_FN __host__ __device__ static inline
#else
#define HN_NORM_FN static inline
#endif

/* The factor of a row of `hidden` elements from its sum of squares: IEEE
 * division and square root on every backend (not rsqrtf's approximation). */
HN_NORM_FN float hn_norm_scale(float sumsq, size_t hidden, float eps)
{
    return 1.0f / sqrtf(sumsq / (float)hidden + eps);
}

#endif
