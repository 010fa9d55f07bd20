/* The one translation point for CUDA runtime errors (backends only). */
#ifndef HN_CUDA_CHECK_H
#define HN_CUDA_CHECK_H

#include <cuda_runtime.h>

#include "util.h"

/* Logs `what` with CUDA's error string once, here; returns the status. */
static inline hn_status_t hn_cuda_status(cudaError_t e, const char *what, const char *file, int line)
{
    if (e == cudaSuccess)
        return HN_OK;
    (void)cudaGetLastError(); /* clear the sticky-free error */
    if (HN_LOG_ERROR <= hn_log_level())
        hn_log_emit(HN_LOG_ERROR, file, line, "%s failed: %s", what, cudaGetErrorString(e));
    return e == cudaErrorMemoryAllocation ? HN_ERR_NOMEM : HN_ERR_DEVICE;
}

#define HN_CUDA_STATUS(call) hn_cuda_status((call), #call, __FILE__, __LINE__)

/* Sets `st` and jumps to `label` when `call` fails. */
#define HN_CUDA_CHECK_GOTO(call, st, label)                                  \
    do {                                                                     \
        if (((st) = HN_CUDA_STATUS(call)) != HN_OK)                          \
            goto label;                                                      \
    } while (0)

#endif
