/* What the latency path's two CUDA files share (ll_cuda.cu: the general
 * way and the launcher; ll_cuda_short.cu: the short path): volatile
 * accesses, a call's state in a block, the block's sum, the probe's
 * stamps, and what every kernel does first and last. */
#ifndef HN_LL_CUDA_CUH
#define HN_LL_CUDA_CUH

#include <stdint.h>

#include "ll.h"

#define SPINS_PER_ABORT_CHECK 1024u

__device__ __forceinline__ uint4 ld_volatile_v4(const char *p)
{
    uint4 v;
    asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p)
                 : "memory");
    return v;
}

__device__ __forceinline__ void st_volatile_v4(char *p, uint4 v)
{
    asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z),
                 "r"(v.w)
                 : "memory");
}

__device__ __forceinline__ uint32_t ld_volatile_u32(const void *p)
{
    uint32_t v;
    asm volatile("ld.volatile.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ void st_volatile_u32(void *p, uint32_t v)
{
    asm volatile("st.volatile.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ uint16_t ld_volatile_u16(const char *p)
{
    uint16_t v;
    asm volatile("ld.volatile.global.u16 %0, [%1];" : "=h"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ void st_volatile_u16(char *p, uint16_t v)
{
    asm volatile("st.volatile.global.u16 [%0], %1;" ::"l"(p), "h"(v) : "memory");
}

__device__ __forceinline__ void ld_volatile_v2u64(const char *p, uint64_t *a, uint64_t *b)
{
    asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];" : "=l"(*a), "=l"(*b) : "l"(p) : "memory");
}

__device__ __forceinline__ void st_volatile_v2u64(char *p, uint64_t a, uint64_t b)
{
    asm volatile("st.volatile.global.v2.u64 [%0], {%1, %2};" ::"l"(p), "l"(a), "l"(b) : "memory");
}

__device__ __forceinline__ uint64_t ld_volatile_u64(const char *p)
{
    uint64_t v;
    asm volatile("ld.volatile.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ void st_volatile_u64(char *p, uint64_t v)
{
    asm volatile("st.volatile.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

/* One call's state in a block. */
struct ctx {
    const hn_ll_args *a;
    hn_ll_plan P;
    uint32_t g;
    const uint32_t *abort;
    bool aborted; /* this thread gave up waiting: it writes nothing more */
    unsigned sums; /* block_sum calls so far (the same in every thread of the block) */
};

__device__ __forceinline__ bool should_leave(ctx &c, unsigned &spins)
{
    if ((++spins % SPINS_PER_ABORT_CHECK) == 0 && ld_volatile_u32(c.abort) != 0)
        c.aborted = true;
#ifdef HN_LL_KNOBS
    if (c.a->poll_ns > 0)
        __nanosleep((unsigned)c.a->poll_ns);
#endif
    return c.aborted;
}

/* The sum of every thread's v, the same bits in every thread: warp
 * shuffles, then the warps' sums in order. Every thread of the block calls
 * it, once per row; the warps' sums alternate between two arrays, so one
 * barrier per call is enough (a row's readers are past the next row's
 * barrier before the row after it writes the same array). */
__device__ __forceinline__ float block_sum(ctx &c, float v)
{
    __shared__ float part[2][HN_LL_THREADS / 32];
    float *mine = part[c.sums++ & 1u];
    const int warps = (blockDim.x + 31) / 32;
    float s = 0;
    for (int o = 16; o > 0; o /= 2)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    if (threadIdx.x % 32 == 0)
        mine[threadIdx.x / 32] = v;
    __syncthreads();
    for (int i = 0; i < warps; i++)
        s += mine[i];
    return s;
}

/* ---- what every kernel does first and last ---- */

__device__ __forceinline__ uint64_t global_ns()
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* The probe's stamps of a call (block 0's thread 0, when a.probe is set),
 * kept in registers and written once at the end. */
struct stamps {
    uint64_t v[HN_LL_PROBE_POINTS];
    bool on;
};

#define STAMP(S, I) \
    do { \
        if ((S).on) \
            (S).v[I] = (I) == HN_LL_PROBE_ENTRY_NS || (I) == HN_LL_PROBE_EXIT_NS ? global_ns() : clock64(); \
    } while (0)

/* After the previous kernel of the stream has ended: lets the next one
 * launch now if the grid is small (hn_ll_early), and reads this block's
 * generation word — thread 0, into shared memory; loads the caller issued
 * before stay in flight meanwhile. */
__device__ __forceinline__ uint32_t begin_call(const hn_ll_args &a, uint32_t *s_gen)
{
    hn_ll_signal *mine = a.sig[a.me];
    cudaGridDependencySynchronize();
    if (a.early)
        cudaTriggerProgrammaticLaunchCompletion();
    if (threadIdx.x == 0) {
        const uint32_t g = hn_ll_next_gen(ld_volatile_u32(&mine->gen[blockIdx.x]));
        *s_gen = g;
        if (blockIdx.x == 0)
            st_volatile_u32(&mine->running, g);
    }
    __syncthreads();
    return *s_gen;
}

/* The block's end, every thread of it past its last wait: the next
 * kernel may launch (if it could not already), and thread 0 stores the
 * generation words of the block (hn_ll_gen_stores; the kernel's end makes
 * them visible to the next call, which reads them after
 * cudaGridDependencySynchronize). Not earlier for a large grid: the next
 * kernel's blocks would hold SMs while this grid waits for its peers, and
 * two teams in flight could then each wait for SMs the other holds. */
__device__ __forceinline__ void end_call(const hn_ll_args &a, uint32_t g, stamps &st)
{
    if (!a.early)
        cudaTriggerProgrammaticLaunchCompletion();
    if (threadIdx.x == 0) {
        hn_ll_signal *mine = a.sig[a.me];
        int lo, hi;
        hn_ll_gen_stores((int)blockIdx.x, (int)gridDim.x, &lo, &hi);
        for (int b = lo; b < hi; b++)
            st_volatile_u32(&mine->gen[b], g);
    }
    STAMP(st, HN_LL_PROBE_EXIT_NS);
    if (st.on) {
        uint64_t *rec = a.probe + (size_t)(g % HN_LL_PROBE_CALLS) * HN_LL_PROBE_POINTS;
#pragma unroll
        for (int i = 0; i < HN_LL_PROBE_POINTS; i++)
            rec[i] = st.v[i];
    }
}

/* The short path's kernel for call a, the threads of its blocks (a
 * plain allreduce's segments are one unit per thread) and the blocks of a
 * cluster (the norm's: a row's), or fn NULL where a goes the general way
 * (ll_cuda_short.cu). */
typedef struct hn_ll_short {
    void (*fn)(hn_ll_args);
    int threads;
    int cluster;
} hn_ll_short;

/* A shape of the launch overridden from the environment, in builds made
 * to sweep shapes on a GPU (-DHN_LL_KNOBS) only; else v. */
#ifdef HN_LL_KNOBS
#include <stdlib.h>
static inline int hn_ll_knob(const char *name, int v)
{
    const char *e = getenv(name);
    return e != NULL && *e != '\0' ? atoi(e) : v;
}
#else
static inline int hn_ll_knob(const char *name, int v)
{
    (void)name;
    return v;
}
#endif
hn_ll_short hn_ll_short_kernel(const hn_ll_args *a);

#endif
