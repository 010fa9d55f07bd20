/* The latency path's CUDA kernel (ll.h has the protocol and why it is
 * safe): one launch per call and member, with programmatic dependent
 * launch (it touches nothing before griddepcontrol.wait, and lets the next
 * kernel of its stream launch once its blocks wait for nothing more). Its
 * blocks go through ll.h's phases and take every address from
 * hn_ll_move_at and every access unit from hn_ll_unit_at: pushes are volatile (relaxed, system-scope) stores
 * into the peers' lanes, polls volatile loads of the member's own lanes,
 * 16 bytes at a time where the unit is a vector, with no fence: each
 * element or packet says by itself that it has arrived. Reductions
 * accumulate in fp32 in team order (every member computes the same bits);
 * the fused norm reduces a row's squares through warp shuffles and shared
 * memory in a fixed order. Every wait also polls the member's abort word
 * (a kernel cannot time out; see ll.h). Built for sm_90. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

extern "C" {
#include "../../device/cuda_check.h"
#include "../../device/device_cuda.h"
}
#include "../../device/cuda_float.cuh"
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

/* `bytes` (1..16) of a buffer at p, at the widest access its alignment
 * allows (inputs and outputs may sit anywhere: a member's chunk of a
 * buffer in place, an odd count); the rest of the vector is zero. */
__device__ __forceinline__ uint4 load_data(const char *p, int bytes)
{
    uint4 v = make_uint4(0, 0, 0, 0);
    const uintptr_t at = (uintptr_t)p;
    if (bytes == 16 && at % 16 == 0)
        return *(const uint4 *)p;
    if (bytes % 4 == 0 && at % 4 == 0) {
        for (int i = 0; i < bytes / 4; i++)
            (&v.x)[i] = ((const uint32_t *)p)[i];
    } else if (bytes % 2 == 0 && at % 2 == 0) {
        for (int i = 0; i < bytes / 2; i++)
            ((uint16_t *)&v)[i] = ((const uint16_t *)p)[i];
    } else {
        for (int i = 0; i < bytes; i++)
            ((unsigned char *)&v)[i] = (unsigned char)p[i];
    }
    return v;
}

__device__ __forceinline__ void store_data(char *p, uint4 v, int bytes)
{
    const uintptr_t at = (uintptr_t)p;
    if (bytes == 16 && at % 16 == 0) {
        *(uint4 *)p = v;
    } else if (bytes % 4 == 0 && at % 4 == 0) {
        for (int i = 0; i < bytes / 4; i++)
            ((uint32_t *)p)[i] = (&v.x)[i];
    } else if (bytes % 2 == 0 && at % 2 == 0) {
        for (int i = 0; i < bytes / 2; i++)
            ((uint16_t *)p)[i] = ((const uint16_t *)&v)[i];
    } else {
        for (int i = 0; i < bytes; i++)
            p[i] = (char)((const unsigned char *)&v)[i];
    }
}

/* A sentinel unit as it is sent: every element that is all ones loses its
 * sign bit. A lone 2-byte element sits in the low half of v.x. */
__device__ __forceinline__ uint4 fix_unit(uint4 v, const hn_ll_unit &U, size_t es)
{
    if (U.width == 2)
        return make_uint4(hn_ll_fix(v.x, 2) & 0xffffu, 0, 0, 0);
    v.x = hn_ll_fix(v.x, es);
    v.y = hn_ll_fix(v.y, es);
    v.z = hn_ll_fix(v.z, es);
    v.w = hn_ll_fix(v.w, es);
    return v;
}

/* One call's state in a block. */
struct ctx {
    const hn_ll_args *a;
    hn_ll_plan P;
    uint32_t g;
    const uint32_t *abort;
    bool aborted; /* this thread gave up waiting: it writes nothing more */
};

__device__ __forceinline__ bool should_leave(ctx &c, unsigned &spins)
{
    if ((++spins % SPINS_PER_ABORT_CHECK) == 0 && ld_volatile_u32(c.abort) != 0)
        c.aborted = true;
    return c.aborted;
}

/* Sentinel: one look at the unit at lane p; whether all of it is there. */
__device__ __forceinline__ bool look_sentinel(const char *p, const hn_ll_unit &U, size_t es, uint4 &v)
{
    v = make_uint4(0, 0, 0, 0);
    if (U.width == 16) {
        v = ld_volatile_v4(p);
        return hn_ll_arrived(v.x, es) && hn_ll_arrived(v.y, es) && hn_ll_arrived(v.z, es) && hn_ll_arrived(v.w, es);
    }
    if (U.width == 4) {
        v.x = ld_volatile_u32(p);
        return hn_ll_arrived(v.x, 4);
    }
    v.x = ld_volatile_u16(p);
    return hn_ll_arrived_half((uint16_t)v.x);
}

/* Sentinel: waits until every element of the unit at lane p has arrived. */
__device__ __forceinline__ uint4 poll_sentinel(ctx &c, const char *p, const hn_ll_unit &U)
{
    unsigned spins = 0;
    uint4 v;
    while (!look_sentinel(p, U, c.P.es, v) && !should_leave(c, spins))
        ;
    return v;
}

/* Writes the unit's bytes to a lane (ones: a clear) at the unit's width. */
__device__ __forceinline__ void put_sentinel(char *p, uint4 v, const hn_ll_unit &U)
{
    if (U.width == 16)
        st_volatile_v4(p, v);
    else if (U.width == 4)
        st_volatile_u32(p, v.x);
    else
        st_volatile_u16(p, (uint16_t)v.x);
}

/* Packets: waits until the unit's one or two packets carry g; their data. */
__device__ __forceinline__ uint4 poll_packets(ctx &c, const char *p, const hn_ll_unit &U)
{
    unsigned spins = 0;
    for (;;) {
        uint64_t x = 0, y = 0;
        bool in;
        if (U.width == 16) {
            ld_volatile_v2u64(p, &x, &y);
            in = hn_ll_packet_arrived(x, c.g) && hn_ll_packet_arrived(y, c.g);
        } else {
            x = ld_volatile_u64(p);
            in = hn_ll_packet_arrived(x, c.g);
        }
        if (in || should_leave(c, spins))
            return make_uint4((uint32_t)x, (uint32_t)y, 0, 0);
    }
}

/* PUSH: a segment's data to every lane in to[] (and to out). */
__device__ void push(ctx &c, const hn_ll_move &mv)
{
    const size_t es = c.P.es, units = hn_ll_units(c.P.fmt, es, mv.elems);
    for (size_t u = threadIdx.x; u < units; u += blockDim.x) {
        hn_ll_unit U;
        hn_ll_unit_at(c.P.fmt, es, mv.elems, u, &U);
        uint4 v = load_data(mv.data + U.data, U.bytes);
        if (c.P.fmt == HN_LL_PACKETS) {
            const uint64_t x = hn_ll_pack(v.x, c.g), y = hn_ll_pack(v.y, c.g);
            for (int i = 0; i < mv.nto; i++) {
                if (U.width == 16)
                    st_volatile_v2u64(mv.to[i] + U.wire, x, y);
                else
                    st_volatile_u64(mv.to[i] + U.wire, x);
            }
            if (mv.out != nullptr)
                store_data(mv.out + U.data, v, U.bytes);
            continue;
        }
        v = fix_unit(v, U, es);
        for (int i = 0; i < mv.nto; i++)
            put_sentinel(mv.to[i] + U.wire, v, U);
    }
}

/* GATHER of a plain collective: one lane to the output, cleared. */
__device__ void gather(ctx &c, const hn_ll_move &mv)
{
    const size_t es = c.P.es, units = hn_ll_units(c.P.fmt, es, mv.elems);
    const uint4 ones = make_uint4(~0u, ~0u, ~0u, ~0u);
    for (size_t u = threadIdx.x; u < units && !c.aborted; u += blockDim.x) {
        hn_ll_unit U;
        hn_ll_unit_at(c.P.fmt, es, mv.elems, u, &U);
        const char *lane = mv.from[0] + U.wire;
        if (c.P.fmt == HN_LL_PACKETS) {
            uint4 v = poll_packets(c, lane, U);
            if (c.aborted)
                break;
            if (U.width == 16)
                st_volatile_v2u64((char *)lane, ~0ull, ~0ull);
            else
                st_volatile_u64((char *)lane, ~0ull);
            store_data(mv.out + U.data, v, U.bytes);
            continue;
        }
        uint4 v = poll_sentinel(c, lane, U);
        if (c.aborted)
            break;
        put_sentinel((char *)lane, ones, U);
        store_data(mv.out + U.data, v, U.bytes);
    }
}

/* The unit's elements reduced in team order: from the lanes (cleared as
 * read) and the member's own data. false if it gave up waiting. */
template <typename T>
__device__ __forceinline__ bool reduce_unit(ctx &c, const hn_ll_move &mv, const hn_ll_unit &U, float *acc)
{
    constexpr int V = HN_LL_VEC / sizeof(T);
    const hn_ll_args &a = *c.a;
    const int ne = U.bytes / (int)sizeof(T);
    const uint4 ones = make_uint4(~0u, ~0u, ~0u, ~0u);
    uint4 w[HN_LL_MAX_RANKS];
    unsigned missing = ((1u << a.n) - 1) & ~(1u << a.me), spins = 0;
    w[a.me] = fix_unit(load_data(mv.data + U.data, U.bytes), U, c.P.es);
    /* every missing peer's unit looked at in one sweep, so that the loads
     * are in flight together */
    while (missing != 0) {
#pragma unroll
        for (int p = 0; p < HN_LL_MAX_RANKS; p++)
            if ((missing >> p) & 1u && look_sentinel(mv.from[p] + U.wire, U, c.P.es, w[p]))
                missing &= ~(1u << p);
        if (missing != 0 && should_leave(c, spins))
            return false;
    }
#pragma unroll
    for (int p = 0; p < HN_LL_MAX_RANKS; p++)
        if (p < a.n && p != a.me)
            put_sentinel(mv.from[p] + U.wire, ones, U);
#pragma unroll
    for (int e = 0; e < V; e++)
        if (e < ne)
            acc[e] = to_f<T>(reinterpret_cast<const T *>(&w[0])[e]);
#pragma unroll
    for (int p = 1; p < HN_LL_MAX_RANKS; p++)
        if (p < a.n) {
#pragma unroll
            for (int e = 0; e < V; e++)
                if (e < ne)
                    acc[e] = hn_ll_combine(a.redop, acc[e], to_f<T>(reinterpret_cast<const T *>(&w[p])[e]));
        }
#pragma unroll
    for (int e = 0; e < V; e++)
        if (e < ne)
            acc[e] = hn_ll_finish(a.redop, acc[e], a.n);
    return true;
}

/* REDUCE of a plain collective: the segment reduced into the output (and
 * pushed to to[], two-shot), as sent: all-ones elements lose their sign. */
template <typename T> __device__ void reduce(ctx &c, const hn_ll_move &mv)
{
    constexpr int V = HN_LL_VEC / sizeof(T);
    const size_t es = c.P.es, units = hn_ll_units(HN_LL_SENTINEL, es, mv.elems);
    for (size_t u = threadIdx.x; u < units && !c.aborted; u += blockDim.x) {
        hn_ll_unit U;
        float acc[V];
        uint4 r = make_uint4(0, 0, 0, 0);
        hn_ll_unit_at(HN_LL_SENTINEL, es, mv.elems, u, &U);
        if (!reduce_unit<T>(c, mv, U, acc))
            break;
#pragma unroll
        for (int e = 0; e < V; e++)
            if (e < U.bytes / (int)sizeof(T))
                reinterpret_cast<T *>(&r)[e] = from_f<T>(acc[e]);
        r = fix_unit(r, U, es);
        store_data(mv.out + U.data, r, U.bytes);
        for (int i = 0; i < mv.nto; i++)
            put_sentinel(mv.to[i] + U.wire, r, U);
    }
}

/* The sum of every thread's v, the same bits in every thread: warp
 * shuffles, then the warps' sums in order. */
__device__ float block_sum(float v)
{
    __shared__ float part[HN_LL_THREADS / 32];
    const int warps = (blockDim.x + 31) / 32;
    float s = 0;
    for (int o = 16; o > 0; o /= 2)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads(); /* the last row's readers are done */
    if (threadIdx.x % 32 == 0)
        part[threadIdx.x / 32] = v;
    __syncthreads();
    for (int i = 0; i < warps; i++)
        s += part[i];
    return s;
}

/* The norm's row (a segment): REDUCE (from the lanes, plus the residual)
 * or GATHER (y from the owner's lane) gives y, stored in residual_out and
 * pushed on (two-shot REDUCE); then out = y * scale * weight from y as
 * stored. Every thread of the block comes here (block_sum). */
template <typename T> __device__ void norm_row(ctx &c, const hn_ll_move &mv, int ph)
{
    constexpr int V = HN_LL_VEC / sizeof(T);
    const hn_ll_args &a = *c.a;
    const size_t es = c.P.es, units = hn_ll_units(HN_LL_SENTINEL, es, mv.elems);
    const uint4 ones = make_uint4(~0u, ~0u, ~0u, ~0u);
    float sumsq = 0;
    for (size_t u = threadIdx.x; u < units && !c.aborted; u += blockDim.x) {
        hn_ll_unit U;
        uint4 y = make_uint4(0, 0, 0, 0);
        hn_ll_unit_at(HN_LL_SENTINEL, es, mv.elems, u, &U);
        if (ph == HN_LL_GATHER) {
            y = poll_sentinel(c, mv.from[0] + U.wire, U);
            if (c.aborted)
                break;
            put_sentinel(mv.from[0] + U.wire, ones, U);
        } else {
            float acc[V];
            uint4 res = load_data(mv.res + U.data, U.bytes);
            if (!reduce_unit<T>(c, mv, U, acc))
                break;
#pragma unroll
            for (int e = 0; e < V; e++)
                if (e < U.bytes / (int)sizeof(T))
                    reinterpret_cast<T *>(&y)[e] =
                        from_f<T>(acc[e] + to_f<T>(reinterpret_cast<const T *>(&res)[e]));
            y = fix_unit(y, U, es);
            for (int i = 0; i < mv.nto; i++)
                put_sentinel(mv.to[i] + U.wire, y, U);
        }
        store_data(mv.res_out + U.data, y, U.bytes);
#pragma unroll
        for (int e = 0; e < V; e++)
            if (e < U.bytes / (int)sizeof(T)) {
                const float f = to_f<T>(reinterpret_cast<const T *>(&y)[e]);
                sumsq += f * f;
            }
    }
    const float scale = hn_norm_scale(block_sum(sumsq), a.hidden, a.eps);
    for (size_t u = threadIdx.x; u < units && !c.aborted; u += blockDim.x) {
        hn_ll_unit U;
        uint4 out = make_uint4(0, 0, 0, 0);
        hn_ll_unit_at(HN_LL_SENTINEL, es, mv.elems, u, &U);
        const uint4 y = load_data(mv.res_out + U.data, U.bytes);     /* this thread's own store */
        const uint4 w = load_data((const char *)a.weight + U.data, U.bytes); /* a row starts the weight */
#pragma unroll
        for (int e = 0; e < V; e++)
            if (e < U.bytes / (int)sizeof(T))
                reinterpret_cast<T *>(&out)[e] = from_f<T>(to_f<T>(reinterpret_cast<const T *>(&y)[e]) * scale *
                                                           to_f<T>(reinterpret_cast<const T *>(&w)[e]));
        store_data(mv.out + U.data, out, U.bytes);
    }
}

template <typename T> __global__ void __launch_bounds__(HN_LL_THREADS) ll_kernel(const __grid_constant__ hn_ll_args a)
{
    __shared__ uint32_t s_gen;
    hn_ll_signal *mine = a.sig[a.me];
    int ph[HN_LL_MAX_PHASES];
    const int nph = hn_ll_phases(&a, ph);
    ctx c;
    size_t k0, k1;
    /* the previous work of the stream has ended, its writes visible (the
     * generation its last call stored) */
    cudaGridDependencySynchronize();
    if (threadIdx.x == 0) {
        s_gen = hn_ll_next_gen(ld_volatile_u32(&mine->gen));
        if (blockIdx.x == 0)
            st_volatile_u32(&mine->running, s_gen);
    }
    __syncthreads();
    c.a = &a;
    c.g = s_gen;
    c.abort = &mine->abort;
    c.aborted = false;
    hn_ll_plan_make(&a, HN_LL_SEG_BYTES, &c.P);
    hn_ll_block_segs(&c.P, (int)blockIdx.x, (int)gridDim.x, &k0, &k1);
    for (int i = 0; i < nph; i++) {
        for (size_t k = k0; k < k1; k++) {
            hn_ll_move mv;
            for (int j = 0; hn_ll_move_at(&a, &c.P, c.g, ph[i], k, j, &mv); j++) {
                if (ph[i] == HN_LL_PUSH)
                    push(c, mv);
                else if (a.kind == HN_LL_ALLREDUCE_NORM)
                    norm_row<T>(c, mv, ph[i]);
                else if (ph[i] == HN_LL_REDUCE)
                    reduce<T>(c, mv);
                else
                    gather(c, mv);
            }
        }
        /* a phase's reads of the inputs precede the next one's writes over
         * them (in place); a member whose host gave up leaves */
        if (__syncthreads_or(c.aborted))
            return;
    }
    /* Nothing of this block waits any more: the next kernel of the stream
     * may launch once every block is here (it waits for this grid's end
     * before it touches anything). Not earlier: its blocks would hold SMs
     * while this grid waits for its peers, and two teams in flight could
     * then each wait for SMs the other holds. */
    cudaTriggerProgrammaticLaunchCompletion();
    /* the last block to finish stores the generation for the next call,
     * after every block read it */
    if (threadIdx.x == 0) {
        __threadfence();
        if (atomicAdd(&mine->done, 1u) == gridDim.x - 1) {
            st_volatile_u32(&mine->done, 0);
            st_volatile_u32(&mine->gen, c.g);
        }
    }
}

/* Multiprocessors of device dev, asked once. */
static int sm_count(int dev)
{
    static int known[64];
    int v = dev >= 0 && dev < 64 ? __atomic_load_n(&known[dev], __ATOMIC_RELAXED) : 0;
    if (v > 0)
        return v;
    if (cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || v <= 0) {
        (void)cudaGetLastError();
        return 2 * HN_LL_MAX_BLOCKS;
    }
    if (dev >= 0 && dev < 64)
        __atomic_store_n(&known[dev], v, __ATOMIC_RELAXED);
    return v;
}

extern "C" hn_status_t hn_ll_cuda(hn_dstream *s, const hn_ll_args *a, const hn_origin *o)
{
    hn_ll_plan P;
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    void (*kernel)(hn_ll_args) = ll_kernel<float>; /* f32 reductions; allgather only copies bytes */
    (void)o;
    hn_ll_plan_make(a, HN_LL_SEG_BYTES, &P);
    if (a->kind != HN_LL_ALLGATHER && a->dtype == HN_BF16)
        kernel = ll_kernel<__nv_bfloat16>;
    else if (a->kind != HN_LL_ALLGATHER && a->dtype == HN_F16)
        kernel = ll_kernel<__half>;
    cfg.gridDim = dim3((unsigned)hn_ll_grid(&P, a->blocks > 0 ? a->blocks : hn_ll_cap(sm_count(s->ord))));
    cfg.blockDim = dim3(HN_LL_THREADS);
    cfg.stream = s->s;
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = a->pdl ? 1 : 0;
    return HN_CUDA_STATUS(cudaLaunchKernelEx(&cfg, kernel, *a));
}
