/* What the CUDA device backend shares with the CUDA compute ops and the
 * NCCL communicator: the stream and event behind the opaque handles. */
#ifndef HN_DEVICE_CUDA_H
#define HN_DEVICE_CUDA_H

#include <cuda_runtime.h>

#include "device.h"

/* cuBLASLt workspace of one stream. Kernels that run at once must share
 * nothing they write: matmuls on two streams of one device that shared a
 * workspace corrupted each other at production sizes (split-K / stream-K
 * kernels keep partial sums there), so every stream has its own, made with
 * the stream (between runs, never while collectives run). */
#define HN_CUDA_WORKSPACE_BYTES ((size_t)64 << 20)

struct hn_dstream {
    cudaStream_t s;
    int dev; /* the device index: the rank */
    int ord; /* its CUDA device ordinal */
    struct cuda_ctx *ctx;
    void *workspace; /* HN_CUDA_WORKSPACE_BYTES, for this stream's matmuls */
    int adopted;     /* an embedder's stream: the handle is ours, not the stream */
};

struct hn_devent {
    cudaEvent_t e;
    int dev; /* the device index: the rank */
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
/* One-thread kernels of the relative flags and the epoch (device.h). */
hn_status_t hn_cuda_flag_write_rel(hn_dstream *s, uint32_t *addr, uint32_t value, const uint32_t *ep);
hn_status_t hn_cuda_flag_wait_rel(hn_dstream *s, const uint32_t *addr, uint32_t value, const uint32_t *ep);
hn_status_t hn_cuda_add_u32(hn_dstream *s, uint32_t *addr, uint32_t value);
/* A one-thread kernel that traps (fault injection: loses the context). */
hn_status_t hn_cuda_trap(hn_dstream *s);
/* Graphs: capture, update in place, repoint, launch (device_cuda_graph.c;
 * device.h says what each does). */
hn_status_t hn_cuda_capture_begin(hn_dstream *s);
hn_status_t hn_cuda_native_capture_keep(void *native, void (*release)(void *arg), void *arg);
hn_status_t hn_cuda_capture_end(hn_dstream *s, hn_dgraph **out);
hn_status_t hn_cuda_capture_update(hn_dstream *s, hn_dgraph *g, const hn_moved *m, int nm);
hn_status_t hn_cuda_graph_repoint(hn_dgraph *g, const hn_moved *m, int nm, int check);
hn_status_t hn_cuda_graph_launch(hn_dgraph *g, hn_dstream *s);
void hn_cuda_graph_destroy(hn_dgraph *g);
/* Device memory shared across processes (device_cuda_share.c). */
extern const hn_share_ops hn_cuda_share;
#ifdef __cplusplus
}
#endif

#endif
