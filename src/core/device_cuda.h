/* What the CUDA device backend shares with the CUDA compute ops and the
 * NCCL communicator: the stream and event behind the opaque handles. */
#ifndef HN_DEVICE_CUDA_H
#define HN_DEVICE_CUDA_H

#include <cuda_runtime.h>

#include "device.h"

struct hn_dstream {
    cudaStream_t s;
    int dev;
    struct cuda_ctx *ctx;
};

struct hn_devent {
    cudaEvent_t e;
    int dev;
};

#ifdef __cplusplus
extern "C" {
#endif
/* Per-device compute state (cuBLASLt handle, workspace): made on the rank
 * thread at start, so nothing is allocated while collectives run. */
hn_status_t hn_compute_cuda_thread_init(int dev);
void hn_compute_cuda_thread_fini(int dev);
/* Stores value at addr (peer memory too) after prior work of s, from a
 * one-thread kernel: the fallback of the stream memory write. */
hn_status_t hn_cuda_flag_write(hn_dstream *s, uint32_t *addr, uint32_t value);
#ifdef __cplusplus
}
#endif

#endif
