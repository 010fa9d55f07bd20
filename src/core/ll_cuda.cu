/* The latency path's CUDA kernel (ll.h has the protocol and why it is
 * safe): one launch per call and member; its blocks go through ll.h's
 * phases, take every address from hn_ll_move_at, move data with 16-byte
 * vector loads and stores (fp32 accumulation in team order, so every
 * member computes the same bits), and meet the peers' blocks at barriers
 * of flags in the members' signal regions: stored with release and polled
 * with acquire semantics at system scope (the flags and the data cross
 * NVLink). A block's barrier is run by its first n threads, thread p for
 * member p; __syncthreads before the release makes the whole block's
 * writes precede it, __syncthreads after the acquire makes the peers'
 * writes visible to the whole block. Every wait also polls the member's
 * abort word (a kernel cannot time out; see ll.h). Built for sm_90. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

extern "C" {
#include "cuda_check.h"
#include "device_cuda.h"
}
#include "cuda_float.cuh"
#include "ll.h"

__device__ __forceinline__ void st_release_sys(uint32_t *p, uint32_t v)
{
    asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ uint32_t ld_acquire_sys(const uint32_t *p)
{
    uint32_t v;
    asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ void st_relaxed_sys_u64(uint64_t *p, uint64_t v)
{
    asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

__device__ __forceinline__ uint64_t ld_relaxed_sys_u64(const uint64_t *p)
{
    uint64_t v;
    asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ uint32_t ld_volatile(const uint32_t *p) { return *(const volatile uint32_t *)p; }

/* A copy by the whole block: 16-byte vectors where both ends are aligned
 * (slices start on whole vectors), bytes for the rest. */
__device__ void block_copy(char *dst, const char *src, size_t bytes)
{
    size_t nv = ((uintptr_t)dst | (uintptr_t)src) % HN_LL_VEC == 0 ? bytes / HN_LL_VEC : 0;
    if (dst == src)
        return;
    for (size_t i = threadIdx.x; i < nv; i += blockDim.x)
        ((uint4 *)dst)[i] = ((const uint4 *)src)[i];
    for (size_t i = nv * HN_LL_VEC + threadIdx.x; i < bytes; i += blockDim.x)
        dst[i] = src[i];
}

/* dst = src[0] op src[1] op ... in team order, fp32, by the whole block:
 * every source's vector is loaded before any is added (the loads of a
 * vector from all peers are in flight at once). */
template <typename T>
__device__ void block_reduce(const hn_ll_move &mv, int redop)
{
    constexpr int V = HN_LL_VEC / sizeof(T);
    const int n = mv.nsrc;
    uintptr_t align = (uintptr_t)mv.dst;
    for (int p = 0; p < n; p++)
        align |= (uintptr_t)mv.src[p];
    size_t nv = align % HN_LL_VEC == 0 ? mv.elems / V : 0;
    for (size_t i = threadIdx.x; i < nv; i += blockDim.x) {
        uint4 w[HN_LL_MAX_RANKS];
        float acc[V];
#pragma unroll
        for (int p = 0; p < HN_LL_MAX_RANKS; p++)
            if (p < n)
                w[p] = ((const uint4 *)mv.src[p])[i];
#pragma unroll
        for (int j = 0; j < V; j++)
            acc[j] = to_f<T>(reinterpret_cast<const T *>(&w[0])[j]);
#pragma unroll
        for (int p = 1; p < HN_LL_MAX_RANKS; p++)
            if (p < n) {
#pragma unroll
                for (int j = 0; j < V; j++)
                    acc[j] = hn_ll_combine(redop, acc[j], to_f<T>(reinterpret_cast<const T *>(&w[p])[j]));
            }
        uint4 out;
#pragma unroll
        for (int j = 0; j < V; j++)
            reinterpret_cast<T *>(&out)[j] = from_f<T>(hn_ll_finish(redop, acc[j], n));
        ((uint4 *)mv.dst)[i] = out;
    }
    for (size_t i = nv * V + threadIdx.x; i < mv.elems; i += blockDim.x) {
        float acc = to_f<T>(((const T *)mv.src[0])[i]);
        for (int p = 1; p < n; p++)
            acc = hn_ll_combine(redop, acc, to_f<T>(((const T *)mv.src[p])[i]));
        ((T *)mv.dst)[i] = from_f<T>(hn_ll_finish(redop, acc, n));
    }
}

template <typename T>
__global__ void __launch_bounds__(HN_LL_THREADS) ll_kernel(const hn_ll_args a)
{
    __shared__ uint32_t s_gen;
    __shared__ int s_abort;
    __shared__ const char *s_peer[HN_LL_MAX_RANKS];
    hn_ll_signal *mine = a.sig[a.me];
    const int b = blockIdx.x, t = threadIdx.x;
    int ph[HN_LL_MAX_PHASES];
    const int nph = hn_ll_phases(a.kind, a.algo, ph);
    if (t == 0) {
        s_gen = ld_volatile(&mine->gen) + 1; /* stored by the last call's last block */
        s_abort = 0;
    }
    if (t < HN_LL_MAX_RANKS)
        s_peer[t] = nullptr;
    __syncthreads();
    const uint32_t g = s_gen;
    for (int i = 0; i < nph; i++) {
        const int phase = ph[i], bar = hn_ll_barrier_of(phase);
        switch (phase) {
        case HN_LL_PUBLISH: /* my input's address, for block b of every member */
            if (t < a.n)
                st_relaxed_sys_u64(&a.sig[t]->ptr[g & 1u][b][a.me], (uint64_t)(uintptr_t)a.send);
            break;
        case HN_LL_SIGNAL_A:
        case HN_LL_SIGNAL_B:
            __syncthreads(); /* the block's writes so far precede the release */
            if (t < a.n)
                st_release_sys(&a.sig[t]->flag[bar][b][a.me], g);
            break;
        case HN_LL_WAIT_A:
        case HN_LL_WAIT_B:
            if (t < a.n) {
                const uint32_t *f = &mine->flag[bar][b][t];
                while (!hn_ll_reached(ld_acquire_sys(f), g))
                    if (ld_volatile(&mine->abort)) {
                        s_abort = 1;
                        break;
                    }
                if (phase == HN_LL_WAIT_A && a.algo == HN_LL_TWOSHOT)
                    s_peer[t] = (const char *)(uintptr_t)ld_relaxed_sys_u64(&mine->ptr[g & 1u][b][t]);
            }
            __syncthreads();
            if (s_abort) /* the host gave up on this call: touch no peer memory */
                return;
            break;
        default: {
            hn_ll_move mv;
            for (int k = 0; hn_ll_move_at(&a, phase, b, g, s_peer, k, &mv); k++) {
                if (mv.nsrc == 1)
                    block_copy(mv.dst, mv.src[0], mv.elems * hn_ll_es(&a));
                else
                    block_reduce<T>(mv, a.redop);
            }
            break;
        }
        }
    }
    /* the last block to finish stores the generation for the next call */
    __syncthreads();
    if (t == 0) {
        __threadfence();
        if (atomicAdd(&mine->done, 1u) == gridDim.x - 1) {
            *(volatile uint32_t *)&mine->done = 0;
            *(volatile uint32_t *)&mine->gen = g;
        }
    }
}

extern "C" hn_status_t hn_ll_cuda(hn_dstream *s, const hn_ll_args *a, const hn_origin *o)
{
    dim3 grid((unsigned)a->blocks), block(HN_LL_THREADS);
    (void)o;
    if (a->kind != HN_LL_ALLGATHER && a->dtype == HN_BF16)
        ll_kernel<__nv_bfloat16><<<grid, block, 0, s->s>>>(*a);
    else if (a->kind != HN_LL_ALLGATHER && a->dtype == HN_F16)
        ll_kernel<__half><<<grid, block, 0, s->s>>>(*a);
    else /* f32 reductions; allgather only copies */
        ll_kernel<float><<<grid, block, 0, s->s>>>(*a);
    return HN_CUDA_STATUS(cudaGetLastError());
}
