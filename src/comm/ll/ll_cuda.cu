/* The latency path's CUDA kernels (ll.h has the protocol and why it is
 * safe): one launch per call and member, with programmatic dependent
 * launch (a kernel touches nothing the previous one wrote before
 * cudaGridDependencySynchronize; a small grid lets the next kernel launch
 * as soon as it starts, a large one once its blocks wait for nothing
 * more). Two ways through ll.h's phases: the short path (ll_short), where
 * every access is an aligned 16-byte vector and thread t moves unit t of
 * each segment (or t, t + 512, ... of a row), and the general way
 * (ll_kernel), which takes every address from hn_ll_move_at and every
 * access unit from hn_ll_unit_at. Pushes are volatile (relaxed,
 * system-scope) stores into the peers' lanes, polls volatile loads of the
 * member's own lanes, 16 bytes at a time where the unit is a vector, with
 * no fence: each element or packet says by itself that it has arrived.
 * Reductions accumulate in fp32 in team order (every member computes the
 * same bits, on either path); the fused norm reduces a row's squares
 * through warp shuffles and shared memory in a fixed order. Every wait
 * also polls the member's abort word (a kernel cannot time out; see
 * ll.h). With the setting ll_probe, block 0's thread 0 stamps each call
 * (hn_ll_args.probe). Built for sm_90. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

extern "C" {
#include "../../device/cuda_check.h"
#include "../../device/device_cuda.h"
}
#include "../../device/cuda_float.cuh"
#include "ll_cuda.cuh"

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
    const float scale = hn_norm_scale(block_sum(c, sumsq), a.hidden, a.eps);
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

/* ---- the general way: any call ---- */

template <typename T> __global__ void __launch_bounds__(HN_LL_THREADS) ll_kernel(const __grid_constant__ hn_ll_args a)
{
    __shared__ uint32_t s_gen;
    int ph[HN_LL_MAX_PHASES];
    const int nph = hn_ll_phases(&a, ph);
    stamps st;
    ctx c;
    size_t k0, k1;
    st.on = a.probe != nullptr && blockIdx.x == 0 && threadIdx.x == 0;
    STAMP(st, HN_LL_PROBE_ENTRY_NS);
    STAMP(st, HN_LL_PROBE_ENTRY);
    /* the call's shape needs nothing the previous kernel wrote */
    hn_ll_plan_make(&a, HN_LL_SEG_BYTES, &c.P);
    hn_ll_block_segs(&c.P, (int)blockIdx.x, (int)gridDim.x, &k0, &k1);
    c.a = &a;
    c.abort = &a.sig[a.me]->abort;
    c.aborted = false;
    c.sums = 0;
    c.g = begin_call(a, &s_gen);
    STAMP(st, HN_LL_PROBE_READY);
    STAMP(st, HN_LL_PROBE_LOADED);
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
        if (i == 0)
            STAMP(st, HN_LL_PROBE_PUSHED);
        else {
            STAMP(st, HN_LL_PROBE_ARRIVED);
            STAMP(st, HN_LL_PROBE_SUMMED);
        }
        /* a phase's reads of the inputs precede the next one's writes over
         * them (in place); a member whose host gave up leaves */
        if (__syncthreads_or(c.aborted))
            return;
    }
    STAMP(st, HN_LL_PROBE_DONE);
    end_call(a, c.g, st);
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
    hn_ll_args x = *a;
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[2];
    const int sms = sm_count(s->ord), bf16 = a->dtype == HN_BF16, f16 = a->dtype == HN_F16;
    const hn_ll_short sp = hn_ll_short_kernel(a);
    void (*kernel)(hn_ll_args) = sp.fn;
    int threads = sp.fn != nullptr ? sp.threads : HN_LL_THREADS;
    (void)o;
    if (kernel == nullptr)
        kernel = a->kind == HN_LL_ALLGATHER ? ll_kernel<float> /* allgather only copies bytes */
                 : bf16                     ? ll_kernel<__nv_bfloat16>
                 : f16                      ? ll_kernel<__half>
                                            : ll_kernel<float>;
    /* the grid: one block per segment (a plain allreduce's short path: of one unit per thread) */
    hn_ll_plan_make(a, a->kind == HN_LL_ALLREDUCE_NORM || sp.fn == nullptr ? HN_LL_SEG_BYTES
                                                                            : (size_t)threads * HN_LL_VEC, &P);
    {
        /* a norm's row is a cluster's (hn_ll_short): whole clusters, a row each */
        const int per = sp.fn != nullptr ? sp.cluster : 1, cap = a->blocks > 0 ? a->blocks : hn_ll_cap(sms);
        cfg.gridDim = dim3((unsigned)(hn_ll_grid(&P, cap / per > 0 ? cap / per : 1) * per));
        cfg.blockDim = dim3((unsigned)threads);
        cfg.stream = s->s;
        x.early = a->pdl && hn_ll_knob("HN_LL_EARLY", hn_ll_early((int)cfg.gridDim.x, sms));
        x.poll_ns = hn_ll_knob("HN_LL_POLL_NS", 0);
        cfg.attrs = attr;
        cfg.numAttrs = 0;
        if (a->pdl) {
            attr[cfg.numAttrs].id = cudaLaunchAttributeProgrammaticStreamSerialization;
            attr[cfg.numAttrs++].val.programmaticStreamSerializationAllowed = 1;
        }
        if (per > 1) {
            attr[cfg.numAttrs].id = cudaLaunchAttributeClusterDimension;
            attr[cfg.numAttrs].val.clusterDim.x = (unsigned)per;
            attr[cfg.numAttrs].val.clusterDim.y = 1;
            attr[cfg.numAttrs++].val.clusterDim.z = 1;
        }
    }
    return HN_CUDA_STATUS(cudaLaunchKernelEx(&cfg, kernel, x));
}
