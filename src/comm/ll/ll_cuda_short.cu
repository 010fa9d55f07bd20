/* The latency path's short path (ll.h says when a call takes it, and why
 * it is the same protocol): every access an aligned 16-byte vector, thread
 * t moving unit t of each 8 KiB segment (a plain allreduce) or units t,
 * t + 512, ... of a row (the fused norm) in every phase, so that a
 * thread's own reads precede its own writes in place and no barrier
 * separates the phases; the generation and the thread's first input unit
 * read together; nothing on the stack. */
#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

extern "C" {
#include "../../device/device_cuda.h"
}
#include "../../device/cuda_float.cuh"
#include "ll_cuda.cuh"

namespace cg = cooperative_groups;

__device__ __forceinline__ uint4 fix_vec(uint4 v, size_t es)
{
    v.x = hn_ll_fix(v.x, es);
    v.y = hn_ll_fix(v.y, es);
    v.z = hn_ll_fix(v.z, es);
    v.w = hn_ll_fix(v.w, es);
    return v;
}

__device__ __forceinline__ bool arrived_vec(uint4 v, size_t es)
{
    return hn_ll_arrived(v.x, es) && hn_ll_arrived(v.y, es) && hn_ll_arrived(v.z, es) && hn_ll_arrived(v.w, es);
}

/* Sender s's lane in member r's slot of this call, section sec (hn_ll_lane). */
__device__ __forceinline__ char *lane_of(const ctx &c, int r, int sec, int s)
{
    return hn_ll_lane(c.a, &c.P, c.g, r, sec, s);
}

/* Clears the unit at base of every peer's lane (sender p's at base + p *
 * lane) in the member's own slot, once it was read. NR: the most members
 * of the kernel's teams (its loops unrolled that far). */
template <int NR> __device__ __forceinline__ void clear_vec(const ctx &c, char *base)
{
    const hn_ll_args &a = *c.a;
#pragma unroll
    for (int p = 0; p < NR; p++)
        if (p < a.n && p != a.me)
            st_volatile_v4(base + (size_t)p * c.P.lane, make_uint4(~0u, ~0u, ~0u, ~0u));
}

/* One unit from every peer's lane in the member's own slot (sender p's at
 * base + p * lane), own (as sent) for the member itself; reduced in team
 * order into acc; the lanes cleared, unless CLEAR is false (the caller
 * then clears them with clear_vec). false if it gave up waiting. */
template <typename T, int NR, bool CLEAR = true>
__device__ __forceinline__ bool reduce_vec(ctx &c, uint4 own, char *base, float *acc)
{
    constexpr int V = HN_LL_VEC / sizeof(T);
    const hn_ll_args &a = *c.a;
    const size_t es = sizeof(T), stride = c.P.lane;
    uint4 w[NR];
    unsigned missing = ((1u << a.n) - 1) & ~(1u << a.me), spins = 0;
#pragma unroll
    for (int p = 0; p < NR; p++)
        w[p] = own;
    /* every missing peer's unit looked at in one sweep: the loads are in flight together */
    while (missing != 0) {
#pragma unroll
        for (int p = 0; p < NR; p++)
            if ((missing >> p) & 1u) {
                const uint4 v = ld_volatile_v4(base + (size_t)p * stride);
                if (arrived_vec(v, es)) {
                    w[p] = v;
                    missing &= ~(1u << p);
                }
            }
        if (missing != 0 && should_leave(c, spins))
            return false;
    }
    if (CLEAR)
        clear_vec<NR>(c, base);
#pragma unroll
    for (int e = 0; e < V; e++)
        acc[e] = to_f<T>(reinterpret_cast<const T *>(&w[0])[e]);
#pragma unroll
    for (int p = 1; p < NR; p++)
        if (p < a.n) {
#pragma unroll
            for (int e = 0; e < V; e++)
                acc[e] = hn_ll_combine(a.redop, acc[e], to_f<T>(reinterpret_cast<const T *>(&w[p])[e]));
        }
#pragma unroll
    for (int e = 0; e < V; e++)
        acc[e] = hn_ll_finish(a.redop, acc[e], a.n);
    return true;
}

template <typename T> __device__ __forceinline__ uint4 pack_vec(const float *acc)
{
    constexpr int V = HN_LL_VEC / sizeof(T);
    uint4 r;
#pragma unroll
    for (int e = 0; e < V; e++)
        reinterpret_cast<T *>(&r)[e] = from_f<T>(acc[e]);
    return r;
}

/* Pushes a unit (as sent) to lane `sec` of member `me` in every peer's
 * slot but those of other members than `only` (-1: every peer). */
__device__ __forceinline__ void push_vec(const ctx &c, uint4 v, int sec, int only, size_t off)
{
    const hn_ll_args &a = *c.a;
    for (int p = 0; p < a.n; p++)
        if (p != a.me && (only < 0 || p == only))
            st_volatile_v4(lane_of(c, p, sec, a.me) + off, v);
}

/* Waits for the unit at a lane, clears it, returns it. */
__device__ __forceinline__ uint4 take_vec(ctx &c, char *at)
{
    unsigned spins = 0;
    uint4 v;
    while (!arrived_vec(v = ld_volatile_v4(at), c.P.es) && !should_leave(c, spins))
        ;
    if (!c.aborted)
        st_volatile_v4(at, make_uint4(~0u, ~0u, ~0u, ~0u));
    return v;
}

/* A plain allreduce, one-shot or two-shot: segments of one unit per
 * thread (seg bytes: blockDim.x x 16). `first` is this thread's unit of
 * the block's first segment (one-shot), loaded while the generation was
 * read. */
template <typename T, int NR> __device__ void allreduce_short(ctx &c, size_t k0, size_t k1, uint4 first, stamps &st)
{
    constexpr size_t es = sizeof(T);
    const hn_ll_args &a = *c.a;
    const hn_ll_plan &P = c.P;
    const int two = hn_ll_twoshot(&a), me = a.me, t = (int)threadIdx.x;
    const char *send = (const char *)a.send;
    const size_t seg = (size_t)blockDim.x * HN_LL_VEC;
    char *recv = (char *)a.recv;
    const size_t mine = two ? (size_t)me * P.part * es : 0; /* the own part's place in the buffers */
    /* PUSH: the whole range (one-shot) or chunk q to member q */
    for (int q = 0; q < a.n; q++) {
        if (two ? q == me : q > 0)
            continue;
        const size_t len = two ? hn_ll_part_len(&a, &P, q) : P.part, at = two ? (size_t)q * P.part * es : 0;
        for (size_t k = k0; k < k1; k++) {
            const size_t units = hn_ll_seg_len(&P, len, k) * es / HN_LL_VEC, off = k * seg + HN_LL_VEC * t;
            if ((size_t)t < units)
                push_vec(c, fix_vec(!two && k == k0 ? first : *(const uint4 *)(send + at + off), es), 0,
                         two ? q : -1, off);
        }
    }
    STAMP(st, HN_LL_PROBE_PUSHED);
    /* REDUCE the own part (two-shot: and push it on) */
    for (size_t k = k0; k < k1 && !c.aborted; k++) {
        const size_t units = hn_ll_seg_len(&P, hn_ll_part_len(&a, &P, me), k) * es / HN_LL_VEC;
        const size_t off = k * seg + HN_LL_VEC * t;
        float acc[HN_LL_VEC / sizeof(T)];
        if ((size_t)t >= units)
            continue;
        const uint4 own = fix_vec(!two && k == k0 ? first : *(const uint4 *)(send + mine + off), es);
        if (!reduce_vec<T, NR>(c, own, lane_of(c, me, 0, 0) + off, acc))
            break;
        if (k == k0) {
            STAMP(st, HN_LL_PROBE_ARRIVED);
            STAMP(st, HN_LL_PROBE_SUMMED);
        }
        const uint4 r = fix_vec(pack_vec<T>(acc), es);
        *(uint4 *)(recv + mine + off) = r;
        if (two)
            push_vec(c, r, 1, -1, off);
    }
    /* GATHER the other parts (two-shot) */
    for (int q = 0; two && q < a.n && !c.aborted; q++) {
        if (q == me)
            continue;
        const size_t len = hn_ll_part_len(&a, &P, q);
        for (size_t k = k0; k < k1 && !c.aborted; k++) {
            const size_t units = hn_ll_seg_len(&P, len, k) * es / HN_LL_VEC, off = k * seg + HN_LL_VEC * t;
            if ((size_t)t < units) {
                const uint4 v = take_vec(c, lane_of(c, me, 1, q) + off);
                if (!c.aborted)
                    *(uint4 *)(recv + (size_t)q * P.part * es + off) = v;
            }
        }
    }
}

/* Most units of a row a thread of the short path holds (rows of at most
 * HN_LL_SHORT_ROW_UNITS x HN_LL_THREADS units take it); a norm's kernel
 * holds U of them: 1, 2 or 4 (for_row). */
#define HN_LL_SHORT_ROW_UNITS 4

/* What a thread of the norm reads first, after the previous kernel ended
 * and while the generation is read: its unit t of the own part's first
 * row (the input, the residual) and of the weight. */
struct norm_first {
    uint4 in, res, w;
    bool row; /* in and res hold the first row's unit t (else they are read where used) */
    bool w_ok;
};

/* The norm's thread of a row: the block's place in its cluster times the
 * block's threads, plus its own; the cluster's blocks hold a row together
 * as one block of HN_LL_THREADS would (the launcher makes clusters of
 * HN_LL_THREADS / blockDim.x blocks; without one, a cluster is the block). */
template <bool CLUSTER> __device__ __forceinline__ int row_thread()
{
    return CLUSTER ? (int)(cg::this_cluster().block_rank() * blockDim.x + threadIdx.x) : (int)threadIdx.x;
}

/* A cluster's barrier in two halves: every block arrives as it starts
 * (relaxed: the only thing to publish, the row sums' mbarriers, has its
 * own fence) and waits once its pushes are out (norm_short), before its
 * first store into another block's shared memory, which may be written
 * only once that block has started. The row sums then need no barrier:
 * a cluster's barrier that publishes stores (barrier.cluster.arrive's
 * default release) is a MEMBAR.ALL.GPU in the SASS, which waits for every
 * store the thread has in flight, the pushes over NVLink included. */
__device__ __forceinline__ void cluster_arrive_relaxed() { asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory"); }
__device__ __forceinline__ void cluster_wait() { asm volatile("barrier.cluster.wait.aligned;" ::: "memory"); }

/* The warps' sums of a row, in every block of the block's cluster (or the
 * block alone): two arrays, rows alternating between them, and on a
 * cluster an mbarrier per array that counts the bytes of the sums other
 * blocks stored into it (st.async). Row j takes array j % 2, its
 * mbarrier's phase j / 2. */
struct row_sums {
    float part[2][HN_LL_THREADS / 32];
    uint64_t bar[2];
};

__device__ __forceinline__ row_sums &row_sums_of_block()
{
    __shared__ row_sums rs;
    return rs;
}

__device__ __forceinline__ uint32_t shared_at(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

/* Bytes of one row's sums a block receives: a float per warp of the row. */
__device__ __forceinline__ uint32_t row_sum_bytes()
{
    return (uint32_t)(cg::this_cluster().num_blocks() * blockDim.x / 32 * sizeof(float));
}

/* Thread 0, before the cluster's start barrier: both mbarriers set for
 * one arrival (its own, with the bytes expected) and made visible to the
 * cluster, whose blocks store into them only after that barrier. */
__device__ __forceinline__ void row_sums_init()
{
    row_sums &rs = row_sums_of_block();
    for (int b = 0; b < 2; b++) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(shared_at(&rs.bar[b])) : "memory");
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(shared_at(&rs.bar[b])),
                     "r"(row_sum_bytes())
                     : "memory");
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

/* A row's sum, first half: this thread's v summed over its warp, and the
 * warp's sum stored into every block of the cluster (st.async, counted
 * on that block's mbarrier), or into the block's array. No barrier: the
 * caller goes on with stores of its own, and row_sum_take waits. Every
 * thread of the cluster comes here, once per row. */
template <bool CLUSTER> __device__ __forceinline__ void row_sum_post(ctx &c, float v)
{
    row_sums &rs = row_sums_of_block();
    const unsigned arr = c.sums & 1u;
    for (int o = 16; o > 0; o /= 2)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    if (!CLUSTER) {
        if (threadIdx.x % 32 == 0)
            rs.part[arr][threadIdx.x / 32] = v;
        return;
    }
    cg::cluster_group cl = cg::this_cluster();
    if (threadIdx.x % 32 == 0) {
        const uint32_t at = shared_at(&rs.part[arr][row_thread<true>() / 32]), bar = shared_at(&rs.bar[arr]);
        for (unsigned b = 0; b < cl.num_blocks(); b++) {
            uint32_t rat, rbar;
            asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(rat) : "r"(at), "r"(b));
            asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(rbar) : "r"(bar), "r"(b));
            asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];" ::"r"(rat),
                         "r"(__float_as_uint(v)), "r"(rbar)
                         : "memory");
        }
    }
}

/* A row's sum, second half: once every warp's sum is in the block's
 * array, their sum in warp order — the same bits in every thread of the
 * cluster, and as one block of HN_LL_THREADS threads would give. On a
 * cluster, thread 0 then sets the array's mbarrier for the row two rows
 * on: before any sum of that row can come, as those come only after
 * every block has this block's sums of the row in between, which this
 * thread sends after this. */
template <bool CLUSTER> __device__ __forceinline__ float row_sum_take(ctx &c)
{
    row_sums &rs = row_sums_of_block();
    const unsigned arr = c.sums & 1u, parity = (c.sums >> 1) & 1u;
    const int warps = CLUSTER ? (int)(row_sum_bytes() / sizeof(float)) : (int)(blockDim.x + 31) / 32;
    float s = 0;
    c.sums++;
    if (!CLUSTER) {
        __syncthreads();
    } else {
        const uint32_t bar = shared_at(&rs.bar[arr]);
        uint32_t done = 0;
        while (!done)
            asm volatile("{\n\t.reg .pred p;\n\t"
                         "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
                         "selp.u32 %0, 1, 0, p;\n\t}"
                         : "=r"(done)
                         : "r"(bar), "r"(parity)
                         : "memory");
        if (threadIdx.x == 0)
            asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(row_sum_bytes())
                         : "memory");
    }
#pragma unroll
    for (int i = 0; i < HN_LL_THREADS / 32; i++)
        if (i < warps)
            s += rs.part[arr][i];
    return s;
}

/* y (a row's units this thread holds) to the row's output: y * scale *
 * weight, scale from the row's sum of squares (row_sum_post came first).
 * Every thread of the cluster comes here. */
template <typename T, bool CLUSTER, int U>
__device__ __forceinline__ void norm_out(ctx &c, const uint4 *y, size_t units, char *out, const norm_first &f)
{
    constexpr int V = HN_LL_VEC / sizeof(T);
    const hn_ll_args &a = *c.a;
    const float scale = hn_norm_scale(row_sum_take<CLUSTER>(c), a.hidden, a.eps);
    const int t = row_thread<CLUSTER>();
#pragma unroll
    for (int i = 0; i < U; i++) {
        const size_t u = t + (size_t)i * HN_LL_THREADS;
        uint4 o;
        if (u >= units || c.aborted)
            continue;
        const uint4 w = i == 0 && f.w_ok ? f.w : *(const uint4 *)((const char *)a.weight + HN_LL_VEC * u);
#pragma unroll
        for (int e = 0; e < V; e++)
            reinterpret_cast<T *>(&o)[e] = from_f<T>(to_f<T>(reinterpret_cast<const T *>(&y[i])[e]) * scale *
                                                     to_f<T>(reinterpret_cast<const T *>(&w)[e]));
        *(uint4 *)(out + HN_LL_VEC * u) = o;
    }
}

template <typename T> __device__ __forceinline__ float sum_squares(uint4 y)
{
    float s = 0;
#pragma unroll
    for (int e = 0; e < HN_LL_VEC / (int)sizeof(T); e++) {
        const float f = to_f<T>(reinterpret_cast<const T *>(&y)[e]);
        s += f * f;
    }
    return s;
}

/* allreduce + residual + RMSNorm, one-shot or two-shot: the segments are
 * rows, row thread t (row_thread) holds units t, t + 512, ... of a row.
 * A row's reduce reads the lanes, sends the row on (two-shot) and its sum
 * of squares (row_sum_post) first; the stores nobody waits for — the
 * lanes' clearing, residual_out — go while the other warps' sums come. */
template <typename T, bool CLUSTER, int NR, int U>
__device__ void norm_short(ctx &c, size_t k0, size_t k1, const norm_first &f, stamps &st)
{
    constexpr size_t es = sizeof(T);
    const hn_ll_args &a = *c.a;
    const hn_ll_plan &P = c.P;
    const int two = hn_ll_twoshot(&a), me = a.me, t = row_thread<CLUSTER>();
    const size_t row = a.hidden * es, units = row / HN_LL_VEC;
    const char *send = (const char *)a.send;
    for (int q = 0; q < a.n; q++) { /* PUSH */
        if (two ? q == me : q > 0)
            continue;
        const size_t len = two ? hn_ll_part_len(&a, &P, q) : P.part, at = two ? (size_t)q * P.part * es : 0;
        for (size_t k = k0; k < k1 && hn_ll_seg_len(&P, len, k) > 0; k++)
#pragma unroll
            for (int i = 0; i < U; i++) {
                const size_t u = t + (size_t)i * HN_LL_THREADS, off = k * row + HN_LL_VEC * u;
                if (u < units)
                    push_vec(c,
                             fix_vec(!two && k == k0 && i == 0 && f.row ? f.in : *(const uint4 *)(send + at + off),
                                     es),
                             0, two ? q : -1, off);
            }
    }
    STAMP(st, HN_LL_PROBE_PUSHED);
    if (CLUSTER) /* every block of the cluster has started, its mbarriers set (while the peers' data come) */
        cluster_wait();
    const size_t mine = two ? (size_t)me * P.part * es : 0;
    for (size_t k = k0; k < k1 && hn_ll_seg_len(&P, hn_ll_part_len(&a, &P, me), k) > 0; k++) { /* REDUCE */
        uint4 y[U];
        float sumsq = 0;
        char *const lanes = lane_of(c, me, 0, 0) + k * P.seg_wire;
#pragma unroll
        for (int i = 0; i < U; i++) {
            const size_t u = t + (size_t)i * HN_LL_THREADS, off = k * row + HN_LL_VEC * u;
            float acc[HN_LL_VEC / sizeof(T)];
            y[i] = make_uint4(0, 0, 0, 0);
            if (u >= units || c.aborted)
                continue;
            const bool pre = k == k0 && i == 0 && f.row;
            const uint4 own = fix_vec(pre ? f.in : *(const uint4 *)(send + mine + off), es);
            const uint4 res = pre ? f.res : *(const uint4 *)((const char *)a.residual + mine + off);
            if (!reduce_vec<T, NR, false>(c, own, lanes + HN_LL_VEC * u, acc))
                continue;
#pragma unroll
            for (int e = 0; e < HN_LL_VEC / (int)sizeof(T); e++)
                reinterpret_cast<T *>(&y[i])[e] = from_f<T>(acc[e] + to_f<T>(reinterpret_cast<const T *>(&res)[e]));
            y[i] = fix_vec(y[i], es);
            if (two)
                push_vec(c, y[i], 1, -1, k * P.seg_wire + HN_LL_VEC * u);
            sumsq += sum_squares<T>(y[i]);
        }
        if (k == k0)
            STAMP(st, HN_LL_PROBE_ARRIVED);
        row_sum_post<CLUSTER>(c, sumsq);
#pragma unroll
        for (int i = 0; i < U; i++) {
            const size_t u = t + (size_t)i * HN_LL_THREADS;
            if (u >= units || c.aborted)
                continue;
            clear_vec<NR>(c, lanes + HN_LL_VEC * u);
            *(uint4 *)((char *)a.residual_out + mine + k * row + HN_LL_VEC * u) = y[i];
        }
        norm_out<T, CLUSTER, U>(c, y, units, (char *)a.recv + mine + k * row, f);
        if (k == k0)
            STAMP(st, HN_LL_PROBE_SUMMED);
    }
    for (int q = 0; two && q < a.n; q++) { /* GATHER (two-shot) */
        if (q == me)
            continue;
        const size_t len = hn_ll_part_len(&a, &P, q), at = (size_t)q * P.part * es;
        for (size_t k = k0; k < k1 && hn_ll_seg_len(&P, len, k) > 0; k++) {
            uint4 y[U];
            float sumsq = 0;
#pragma unroll
            for (int i = 0; i < U; i++) {
                const size_t u = t + (size_t)i * HN_LL_THREADS;
                y[i] = make_uint4(0, 0, 0, 0);
                if (u >= units || c.aborted)
                    continue;
                y[i] = take_vec(c, lane_of(c, me, 1, q) + k * P.seg_wire + HN_LL_VEC * u);
                if (!c.aborted)
                    sumsq += sum_squares<T>(y[i]);
            }
            row_sum_post<CLUSTER>(c, sumsq);
#pragma unroll
            for (int i = 0; i < U; i++) {
                const size_t u = t + (size_t)i * HN_LL_THREADS;
                if (u < units && !c.aborted)
                    *(uint4 *)((char *)a.residual_out + at + k * row + HN_LL_VEC * u) = y[i];
            }
            norm_out<T, CLUSTER, U>(c, y, units, (char *)a.recv + at + k * row, f);
        }
    }
}

/* CLUSTER: a norm whose rows are clusters' (short_shape), of blocks of at
 * most half of HN_LL_THREADS, so that a thread keeps the row in registers */
template <typename T, bool NORM, bool CLUSTER, int NR, int U>
__global__ void __launch_bounds__(CLUSTER ? HN_LL_THREADS / 2 : HN_LL_THREADS, 1)
    ll_short(const __grid_constant__ hn_ll_args a)
{
    __shared__ uint32_t s_gen;
    stamps st;
    ctx c;
    size_t k0, k1;
    uint4 first = make_uint4(0, 0, 0, 0);
    const char *first_at = nullptr;
    norm_first f = {};
    if (CLUSTER) {
        if (threadIdx.x == 0)
            row_sums_init();
        __syncwarp();
        cluster_arrive_relaxed();
    }
    st.on = a.probe != nullptr && blockIdx.x == 0 && threadIdx.x == 0;
    STAMP(st, HN_LL_PROBE_ENTRY_NS);
    STAMP(st, HN_LL_PROBE_ENTRY);
    /* the norm's segments are rows, each a cluster's; a plain allreduce's one unit per thread */
    hn_ll_plan_make(&a, NORM ? HN_LL_SEG_BYTES : (size_t)blockDim.x * HN_LL_VEC, &c.P);
    if (CLUSTER) {
        const int per = (int)cg::this_cluster().num_blocks();
        hn_ll_block_segs(&c.P, (int)blockIdx.x / per, (int)gridDim.x / per, &k0, &k1);
    } else {
        hn_ll_block_segs(&c.P, (int)blockIdx.x, (int)gridDim.x, &k0, &k1);
    }
    c.a = &a;
    c.abort = &a.sig[a.me]->abort;
    c.aborted = false;
    c.sums = 0;
    /* one-shot: this thread's first unit, whose place the generation does not change */
    if (!NORM && !hn_ll_twoshot(&a) && k0 < k1 &&
        (size_t)threadIdx.x < hn_ll_seg_len(&c.P, c.P.part, k0) * sizeof(T) / HN_LL_VEC)
        first_at = (const char *)a.send + k0 * blockDim.x * HN_LL_VEC + HN_LL_VEC * threadIdx.x;
    if (NORM) {
        const size_t es = sizeof(T), units = a.hidden * es / HN_LL_VEC;
        const size_t mine = hn_ll_twoshot(&a) ? (size_t)a.me * c.P.part * es : 0, t = (size_t)row_thread<CLUSTER>();
        f.w_ok = t < units;
        f.row = f.w_ok && k0 < k1 && hn_ll_seg_len(&c.P, hn_ll_part_len(&a, &c.P, a.me), k0) > 0;
        first_at = (const char *)a.send + mine + k0 * a.hidden * es + HN_LL_VEC * t;
    }
    cudaGridDependencySynchronize();
    /* in flight while thread 0 reads the generation */
    if (!NORM && first_at != nullptr)
        first = *(const uint4 *)first_at;
    if (NORM && f.row) {
        f.in = *(const uint4 *)first_at;
        f.res = *(const uint4 *)((const char *)a.residual + (first_at - (const char *)a.send));
    }
    if (NORM && f.w_ok)
        f.w = *(const uint4 *)((const char *)a.weight + HN_LL_VEC * (size_t)row_thread<CLUSTER>());
    STAMP(st, HN_LL_PROBE_READY);
    c.g = begin_call(a, &s_gen); /* (its cudaGridDependencySynchronize returns at once) */
    STAMP(st, HN_LL_PROBE_LOADED);
    if (NORM)
        norm_short<T, CLUSTER, NR, U>(c, k0, k1, f, st);
    else
        allreduce_short<T, NR>(c, k0, k1, first, st);
    if (__syncthreads_or(c.aborted))
        return;
    STAMP(st, HN_LL_PROBE_DONE);
    end_call(a, c.g, st);
}

/* Whether a call takes the short path: a reduction of 16-byte units only
 * (the range, or a row, a multiple of 16 bytes; a row of at most
 * HN_LL_SHORT_ROW_UNITS units per thread), every buffer 16-byte aligned. */
static bool takes_short_path(const hn_ll_args *a)
{
    const size_t es = hn_ll_es(a->dtype);
    const void *bufs[] = {a->send, a->recv, a->residual, a->residual_out, a->weight};
    if (a->kind != HN_LL_ALLREDUCE && a->kind != HN_LL_ALLREDUCE_NORM)
        return false;
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
        if ((uintptr_t)bufs[i] % HN_LL_VEC != 0)
            return false;
    if (a->kind == HN_LL_ALLREDUCE)
        return a->count * es % HN_LL_VEC == 0;
    return a->hidden * es % HN_LL_VEC == 0 &&
           a->hidden * es <= (size_t)HN_LL_SHORT_ROW_UNITS * HN_LL_THREADS * HN_LL_VEC;
}

static_assert(HN_LL_SEG_BYTES == HN_LL_THREADS * HN_LL_VEC, "the short path moves one unit per thread of a segment");

/* Threads of a block of the short path, and blocks of a norm's cluster.
 * A plain allreduce's part is cut in about 16 segments of one unit per
 * thread, 128 to 512 threads, so that a small call still pushes from
 * several SMs at once. Measured on 2 H200s in graphs (one-shot, bf16, µs
 * per call, 512 / 256 / 128 threads / this choice): 8 KiB 4.2 / 3.9 /
 * 3.7 / 3.7, 16 KiB 4.2 / 4.1 / 4.0 / 3.9, 64 KiB 4.7 / 4.7 / 5.3 / 4.7,
 * 128 KiB 5.2 / 5.5 / 5.4 / 5.2. A norm's row is one block's of
 * HN_LL_THREADS threads, or, when a member reduces one or two rows of 256
 * units or more, a cluster's of two or four blocks of HN_LL_THREADS
 * threads in all (row_thread), so that its units leave from and arrive at
 * as many SMs (the cluster's barrier costs more than it saves once
 * there are more rows, and a grid of clusters per row soon gets too
 * large to let the next kernel launch early). */
static hn_ll_short short_shape(const hn_ll_args *a)
{
    hn_ll_short k = {nullptr, HN_LL_THREADS, 1};
    hn_ll_plan P;
    size_t part;
    hn_ll_plan_make(a, HN_LL_SEG_BYTES, &P);
    if (a->kind == HN_LL_ALLREDUCE_NORM) {
        const size_t units = a->hidden * P.es / HN_LL_VEC;
        k.cluster = P.nseg > 2 ? 1 : units >= 512 ? 4 : units >= 256 ? 2 : 1;
        k.cluster = hn_ll_knob("HN_LL_NORM_CLUSTER", k.cluster);
        if (k.cluster != 1 && k.cluster != 2 && k.cluster != 4 && k.cluster != 8)
            k.cluster = 1;
        k.threads = HN_LL_THREADS / k.cluster;
        return k;
    }
    part = P.part * P.es;
    while (k.threads > 128 && part < (size_t)k.threads * HN_LL_VEC * 16)
        k.threads /= 2;
    k.threads = hn_ll_knob("HN_LL_THREADS", k.threads);
    return k;
}

typedef void (*short_fn)(hn_ll_args);

/* The kernel for a team of n: its loops over members unrolled to 2, 4 or
 * HN_LL_MAX_RANKS. The code a call runs is fetched anew on every SM it
 * lands on, so a kernel's size is part of its time: unrolled for 8
 * members, the norm's kernel was 150 KB of code, and its stretch from the
 * pushes to the first unit's arrival alone 98 KB. Measured on 2 H100s in
 * graphs (one-shot, bf16, µs per call, 8 / 16 / 32 / 64 KiB), kernels
 * for 8 members and rows of up to 4 units a thread against kernels for 2
 * members and rows of one unit a thread: the plain allreduce 3.91 / 3.81
 * / 4.28 / 4.51 against 3.64 / 3.79 / 4.01 / 4.28, the norm 5.40 / 5.77
 * / 5.86 / 6.28 against 4.42 / 4.49 / 5.20 / 5.46 (the first unit's wait
 * for the peer's data 1.9 µs against 1.1). */
template <typename T, bool NORM, bool CLUSTER, int U> static short_fn for_team(int n)
{
    return n <= 2 ? ll_short<T, NORM, CLUSTER, 2, U>
           : n <= 4 ? ll_short<T, NORM, CLUSTER, 4, U>
                    : ll_short<T, NORM, CLUSTER, HN_LL_MAX_RANKS, U>;
}

/* ... and for the call's kind, the norm's cluster and its row's units a
 * thread. */
template <typename T, bool CLUSTER> static short_fn for_row(const hn_ll_args *a)
{
    const size_t units = a->hidden * sizeof(T) / HN_LL_VEC;
    static_assert(HN_LL_SHORT_ROW_UNITS == 4, "rows of 1, 2 or 4 units a thread");
    return units <= HN_LL_THREADS       ? for_team<T, true, CLUSTER, 1>(a->n)
           : units <= 2 * HN_LL_THREADS ? for_team<T, true, CLUSTER, 2>(a->n)
                                        : for_team<T, true, CLUSTER, 4>(a->n);
}

template <typename T> static short_fn for_call(const hn_ll_args *a, int cluster)
{
    if (a->kind != HN_LL_ALLREDUCE_NORM)
        return for_team<T, false, false, 1>(a->n);
    return cluster == 1 ? for_row<T, false>(a) : for_row<T, true>(a);
}

hn_ll_short hn_ll_short_kernel(const hn_ll_args *a)
{
    hn_ll_short k = {nullptr, 0, 1};
    if (!takes_short_path(a))
        return k;
    k = short_shape(a);
    k.fn = a->dtype == HN_BF16  ? for_call<__nv_bfloat16>(a, k.cluster)
           : a->dtype == HN_F16 ? for_call<__half>(a, k.cluster)
                                : for_call<float>(a, k.cluster);
    return k;
}
