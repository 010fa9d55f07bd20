/* The one translation point for CUDA runtime errors (backends only). */
#ifndef HN_CUDA_CHECK_H
#define HN_CUDA_CHECK_H

#include <cuda_runtime.h>

#include "../base/util.h"

#ifdef __cplusplus
extern "C" {
#endif
/* Nonzero when e leaves the CUDA context unusable (an illegal address, a
 * trap, an uncorrectable ECC error): it is then recorded as the loss of the
 * calling thread's device, which the device backend's health reports.
 * 1: the device is lost now; 2: it was lost before. Any thread
 * (cuda_error.c). */
int hn_cuda_note_error(cudaError_t e);
/* The error that lost device dev's context, cudaSuccess while none. */
cudaError_t hn_cuda_lost_error(int dev);
#ifdef __cplusplus
}
#endif

/* Logs `what` with CUDA's error string once, here; returns the status. */
static inline hn_status_t hn_cuda_status(cudaError_t e, const char *what, const char *file, int line)
{
    if (e == cudaSuccess)
        return HN_OK;
    (void)cudaGetLastError(); /* clear the sticky-free error */
    int lost = hn_cuda_note_error(e);
    /* out of memory is the caller's to report (with the free memory), or
     * to recover from by giving cached buffers back; every call after a
     * lost context fails the same way, said once */
    hn_log_level_t level = e == cudaErrorMemoryAllocation ? HN_LOG_INFO : lost == 2 ? HN_LOG_DEBUG : HN_LOG_ERROR;
    if (level <= hn_log_level())
        hn_log_emit(level, file, line, "%s failed: %s", what, cudaGetErrorString(e));
    if (lost)
        return HN_ERR_DEVICE_LOST;
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
