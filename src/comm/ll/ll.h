/* The latency path's protocol (docs/INTERNALS.md "The latency path"):
 * the arguments the ll communicator hands its kernels, the state
 * each member keeps on its device, and the protocol itself — slots, lanes,
 * wire formats, generations, which block moves which bytes — as functions
 * compiled both as C (the CPU emulation, ll_host.c) and as CUDA (the
 * kernel, ll_cuda.cu), so that the two run one protocol.
 *
 * Push, with the flag in the data. Every member keeps a registered buffer
 * of two slots on its device. A call of generation g writes (pushes) each
 * member's data straight from where it lives into slot g % 2 of every
 * peer, into the lane that belongs to it as the sender; each member polls
 * its own lanes, and the data say by themselves that they have arrived —
 * no stage-in copy, no barrier, no fence between data and signal:
 *  - sentinel format (the reductions: f32, bf16, f16): a lane holds the
 *    elements themselves, and an element not yet written is all ones: a
 *    NaN of each float type, which senders never send (an all-ones element
 *    goes with its sign bit cleared: still a NaN, only its payload
 *    changes). The receiver reads each element until it is not all ones.
 *  - packet format (allgather, of any dtype by bytes: no bit pattern is
 *    free there): 8-byte packets of 4 data bytes and a 4-byte flag that
 *    holds g; a packet has arrived when its flag is g.
 *  In both, the receiver writes all ones back over what it read (it clears
 *  on read), so between calls every slot is all ones whatever format last
 *  used it. Elements (2 or 4 bytes) and packets (8) are written and read as
 *  single-copy-atomic accesses of the same width on both sides
 *  (hn_ll_unit_at: 16-byte vectors are four 4-byte words or two packets),
 *  so nothing is ever seen half written.
 *  Why per kind and not per size: sentinels move each byte once, packets
 *  twice, and with clearing on read both pay the same local write, so the
 *  reductions take sentinels at every size; only allgather must carry every
 *  bit pattern, and takes packets. LL128-style lines (a flag per 128 bytes)
 *  would halve the packets' cost, but rest on NVLink delivering a warp's
 *  128-byte store whole, which the PTX memory model does not promise; the
 *  sizes where that would pay go to NCCL and the rings.
 *
 * Algorithms (phases in order; hn_ll_phases):
 *  - one-shot allreduce (and the fused norm): PUSH the input to every peer
 *    (lane `me` of section 0); REDUCE: read the n - 1 peers' lanes and the
 *    own input, reduce in team order (fp32: every member computes the same
 *    bits), write the output.
 *  - two-shot allreduce (and norm): the range is cut in n chunks, member p
 *    owns chunk p. PUSH chunk q of the input to member q; REDUCE the own
 *    chunk from the lanes and the own input, write it and push the result
 *    to every peer (section 1); GATHER the other chunks from section 1.
 *  - reduce_scatter: PUSH chunk q to member q; REDUCE the own chunk.
 *  - allgather: PUSH the input to every peer (and copy it into the own
 *    chunk of the output); GATHER the peers' chunks.
 *  (`twoshot` of allgather and reduce_scatter is the same single push.)
 *  The fused norm (HN_LL_ALLREDUCE_NORM) is an allreduce whose segments are
 *  rows: y = reduced + residual (the residual is replicated: two-shot adds
 *  the row owner's copy), residual_out = y, out = y * rsqrt(mean(y^2) +
 *  eps) * weight, fp32 math on y as stored; a block owns whole rows
 *  (on the CUDA short path, when a member reduces one or two rows, a
 *  cluster of blocks does, as one block would: ll_cuda_short.cu).
 *  A member's range is cut in segments (the rows of the norm), and each
 *  block owns whole segments. Lanes are laid out so that a segment's place
 *  does not depend on how big the segments are or how many blocks a member
 *  runs: the members need not agree on their grids.
 *
 * Generations. Each member's signal region holds `gen`, the generation of
 * its last call on the team; a call runs as g = hn_ll_next_gen(gen) and
 * its blocks store g as they end (6 below), so the count lives on the device and
 * a captured CUDA graph replays with no host in the loop. Members issue a
 * team's calls in the same order, so they agree on g. g runs over 1 ..
 * 2^32 - 2 (never all ones, never 0: a packet's flag is never taken for a
 * cleared one), an even count, so g % 2 alternates across the wrap.
 *
 * Why this is safe under any interleaving (calls back to back with no host
 * sync, sizes and kinds changing from call to call, several teams — each
 * has its own slots —, a member's calls on several streams — the
 * communicator orders them with an event):
 *  1. A member's call g + 1 starts after its call g ended, every write of
 *     it performed (stream order; with programmatic dependent launch the
 *     next kernel touches nothing before griddepcontrol.wait, which waits
 *     for the previous grid to complete and its memory to be flushed).
 *  2. No member ends call g before every member started it: one-shot
 *     allreduce, allgather and reduce_scatter read a lane of every peer
 *     (count > 0: every lane holds data); in two-shot, chunk 0 is never
 *     empty, member 0 reduces it from every member's push, and every
 *     member reads chunk 0 from member 0.
 *  3. So when a sender s pushes into r's slot g % 2 in call g, s has ended
 *     g - 1 (1), so r has started g - 1 (2), so r has ended g - 2 (1): r
 *     has read and cleared everything pushed into that slot in g - 2, the
 *     last call that used it (each lane a receiver is pushed into, it
 *     reads whole: REDUCE and GATHER read every element of every lane).
 *     Two slots are what lets a call go with no barrier at all.
 *  4. The same-address order of r's clear (call g - 2) and s's push (call
 *     g) is the causal chain of 3: the clear, the end of r's kernel g - 2,
 *     r's pushes of g - 1, s's reads of them, the end of s's kernel g - 1,
 *     s's push — a kernel boundary on each side acts as the fence.
 *  5. Inputs are only read by their owner, outputs only written by it;
 *     in place (output = input, or the own chunk of it) is safe because a
 *     block pushes a segment before it writes over it and no other block
 *     touches that segment; a __syncthreads separates the phases.
 *  6. The generation: block b reads word b of gen when it starts and
 *     stores g there when it ends; the last block also stores the words of
 *     the block indices the call did not run (hn_ll_gen_stores). No block
 *     waits for another, and no atomic or fence sits in the kernel's tail.
 *
 * Whose memory a call touches, and why that holds across processes: a
 * member reads and writes its own input, output, residual and weight
 * (any memory of its device: no peer ever dereferences them, 5 below,
 * and nothing publishes their addresses), and every member's signal
 * region and registered buffer through the addresses in sig[] and
 * slots[], which the communicator learns by exchange when the team is
 * joined and reserved. Those two are runtime device memory (mem_alloc of
 * the member's rank), which process mode maps at the same address in
 * every process of the run: a peer's address is then as valid in this
 * process as in its own. Anything a peer is to read must be such memory;
 * a pointer into an embedder's allocation, or into a process's heap,
 * must never reach another member.
 *
 * A dead peer: a CUDA kernel cannot time out (a bounded spin could only
 * trap, which loses the context), so every wait also polls the member's
 * `abort` word. The host's stream sync has the run's deadline; the
 * watchdog's failure then makes the communicator raise every member's
 * abort word (comm_ll.c), the waiting blocks leave, and the teams are made
 * anew. The CPU emulation polls the same word and the run's abort flag,
 * and once nothing moved for the run's deadline it names the members that
 * never started the call (`running`).
 *
 * Progress: a block pushes everything of a phase before it waits for
 * anything, so a member waits only for peers' blocks that have not run
 * yet; a grid that cannot be resident at once still completes, as long as
 * the blocks it waits for get SMs (hn_ll_grid keeps grids to at most half
 * the SMs, so that two latency-path kernels fit beside each other, and the
 * next kernel of a stream is let launch early, to wait beside this one,
 * only when this one's grid is small: hn_ll_early).
 *
 * Two ways through the phases, one protocol: the CUDA kernel takes a
 * short path (ll_cuda_short.cu) where every access is a 16-byte vector of
 * aligned buffers — thread t moves unit t of each segment (an 8 KiB
 * segment is one unit per thread) or units t, t + 512, ... of a row (t
 * counted across a cluster's blocks when a cluster holds the row), in
 * every phase, so its own reads precede its own writes in place and the
 * phases need no barrier between them; any other call goes the general way
 * (hn_ll_move_at, hn_ll_unit_at). Both put the same bytes at the same
 * places of the lanes and reduce in the same order. */
#ifndef HN_LL_H
#define HN_LL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "../../device/device.h"
#ifdef __cplusplus
}
#endif
#include "../../device/norm.h"

#ifdef __CUDACC__
#define HN_LL_FN __host__ __device__ static inline
#else
#define HN_LL_FN static inline
#endif

#define HN_LL_MAX_RANKS 8
#define HN_LL_MAX_BLOCKS 64  /* most blocks of a call */
#define HN_LL_THREADS 512    /* threads of a CUDA block */
#define HN_LL_VEC 16         /* bytes of one vector access */
#define HN_LL_SLOTS 2        /* slots of a registered buffer, used by generation parity */
#define HN_LL_SEG_BYTES 8192 /* a segment of a plain collective on CUDA: a block owns whole ones */
#define HN_LL_CLEAR 0xff     /* every byte of a slot not written (or read and cleared) */
#define HN_LL_GEN_LAST 0xfffffffeu

/* kinds: the collectives, and allreduce + residual + RMSNorm fused */
enum { HN_LL_ALLREDUCE, HN_LL_ALLGATHER, HN_LL_REDUCE_SCATTER, HN_LL_ALLREDUCE_NORM };
/* wire formats */
enum { HN_LL_SENTINEL, HN_LL_PACKETS };

typedef enum hn_ll_phase { HN_LL_PUSH, HN_LL_REDUCE, HN_LL_GATHER, HN_LL_MAX_PHASES } hn_ll_phase;

/* In each member's device memory, zeroed when the team is joined. */
typedef struct hn_ll_signal {
    /* generation of the member's last call, one word per block index: all
     * equal between calls (hn_ll_gen_stores says who writes which) */
    uint32_t gen[HN_LL_MAX_BLOCKS];
    uint32_t abort;   /* raised by the host after a failure: every wait gives up */
    uint32_t running; /* generation of the call it runs (names an absent member in the emulation) */
} hn_ll_signal;

/* Diagnostics (the setting ll_probe): block 0's thread 0 stamps each call
 * at these points into a ring of HN_LL_PROBE_CALLS records, by generation;
 * the communicator prints what they add up to when the team goes. */
enum {
    HN_LL_PROBE_ENTRY_NS, /* %globaltimer when the kernel starts (before the previous kernel ended, with PDL) */
    HN_LL_PROBE_ENTRY,    /* clock64 stamps from here on */
    HN_LL_PROBE_READY,    /* the previous kernel has ended (cudaGridDependencySynchronize returned) */
    HN_LL_PROBE_LOADED,   /* the generation and the first input unit are in registers */
    HN_LL_PROBE_PUSHED,   /* every push of the thread issued */
    HN_LL_PROBE_ARRIVED,  /* the peers' data of the thread's first unit arrived */
    HN_LL_PROBE_SUMMED,   /* the norm's short path: the first row's sum known, its output stored (else as ARRIVED) */
    HN_LL_PROBE_DONE,     /* every phase done, the block agreed (its last __syncthreads) */
    HN_LL_PROBE_EXIT_NS,  /* %globaltimer after the generation's store */
    HN_LL_PROBE_POINTS
};
#define HN_LL_PROBE_CALLS 1024

/* One call, as issued by member `me` (passed by value to the kernel). */
typedef struct hn_ll_args {
    int kind;   /* HN_LL_ALLREDUCE, ... */
    hn_coll_algo algo; /* HN_ALGO_ONESHOT or HN_ALGO_TWOSHOT (allgather, reduce_scatter: ONESHOT) */
    int n, me;  /* team size, the issuing member */
    int blocks; /* the most blocks this member runs (0: by size, hn_ll_grid) */
    int pdl;    /* CUDA: programmatic dependent launch */
    int dtype;  /* hn_dtype */
    hn_redop redop; /* collective.h: sum, prod, max, min, avg */
    size_t count;  /* as hn_coll_args: allreduce all, allgather the input, reduce_scatter the output;
                      the norm: rows * hidden */
    size_t hidden; /* the norm: elements of a row */
    float eps;     /* the norm */
    const void *send;
    void *recv;
    const void *residual; /* the norm: rows x hidden, replicated */
    void *residual_out;   /* the norm: y (may be residual) */
    const void *weight;   /* the norm: hidden elements */
    hn_ll_signal *sig[HN_LL_MAX_RANKS]; /* every member's signal region */
    char *slots[HN_LL_MAX_RANKS];       /* every member's registered buffer: HN_LL_SLOTS slots */
    size_t slot;                        /* bytes of one slot */
    int ranks[HN_LL_MAX_RANKS];         /* global ranks (messages) */
    uint64_t *probe; /* HN_LL_PROBE_CALLS x HN_LL_PROBE_POINTS stamps on the member's device, or NULL */
    int early;       /* CUDA: the next kernel may launch as this one starts (hn_ll_early; set by the launcher) */
    int poll_ns;     /* CUDA builds made to sweep shapes (HN_LL_KNOBS): nanoseconds between polls; else 0 */
} hn_ll_args;

/* The shape of a call, the same on every member (but seg, which each
 * member may cut as it likes). */
typedef struct hn_ll_plan {
    int fmt;          /* HN_LL_SENTINEL or HN_LL_PACKETS */
    int sections;     /* 1, or 2 (two-shot: pushed chunks, then reduced ones) */
    size_t es;        /* bytes of an element */
    size_t part;      /* elements a lane carries: the whole range, or a chunk (two-shot) */
    size_t seg;       /* elements of a segment: a row (norm), else this member's cut */
    size_t seg_wire;  /* bytes of a whole segment in a lane */
    size_t nseg;      /* segments of a part */
    size_t lane;      /* bytes of a lane */
} hn_ll_plan;

/* What a phase does with one segment: PUSH data -> to[] (and out, the
 * allgather's own chunk); REDUCE from[p] (p != me) and data (p = me) in
 * team order -> out (and to[], two-shot); GATHER from[0] -> out. */
typedef struct hn_ll_move {
    size_t elems;
    const char *data;
    char *out;
    const char *res; /* the norm: the residual (REDUCE) */
    char *res_out;   /* the norm: y (REDUCE, GATHER) */
    char *to[HN_LL_MAX_RANKS];
    int nto;
    char *from[HN_LL_MAX_RANKS];
    int nfrom; /* REDUCE: n (from[me] unused); GATHER: 1 */
    int peer;  /* GATHER: the member whose lane it reads */
} hn_ll_move;

/* An access unit of a segment: `bytes` of data at data offset `data`, on
 * the wire at `wire` as `width` bytes: 16 (a vector of 4-byte words, or of
 * two packets), an element (2, 4: sentinel tail), 8 (one packet). */
typedef struct hn_ll_unit {
    size_t data, wire;
    int bytes, width;
} hn_ll_unit;

HN_LL_FN size_t hn_ll_min(size_t a, size_t b) { return a < b ? a : b; }
HN_LL_FN size_t hn_ll_round(size_t x, size_t m) { return (x + m - 1) / m * m; }
HN_LL_FN size_t hn_ll_div_up(size_t x, size_t m) { return (x + m - 1) / m; }

HN_LL_FN uint32_t hn_ll_next_gen(uint32_t gen) { return gen >= HN_LL_GEN_LAST ? 1u : gen + 1u; }

HN_LL_FN size_t hn_ll_es(int dtype)
{
    return dtype == HN_F32 || dtype == HN_I32 ? 4 : dtype == HN_I64 ? 8 : 2;
}

HN_LL_FN int hn_ll_fmt(int kind) { return kind == HN_LL_ALLGATHER ? HN_LL_PACKETS : HN_LL_SENTINEL; }

HN_LL_FN int hn_ll_twoshot(const hn_ll_args *a)
{
    return a->algo == HN_ALGO_TWOSHOT && (a->kind == HN_LL_ALLREDUCE || a->kind == HN_LL_ALLREDUCE_NORM);
}

/* Bytes on the wire of `bytes` of data: a multiple of 16. */
HN_LL_FN size_t hn_ll_wire(int fmt, size_t bytes)
{
    return hn_ll_round(fmt == HN_LL_PACKETS ? hn_ll_div_up(bytes, 4) * 8 : bytes, HN_LL_VEC);
}

/* The plan of a call; seg_bytes (a multiple of 16) cuts plain collectives
 * into segments. */
HN_LL_FN void hn_ll_plan_make(const hn_ll_args *a, size_t seg_bytes, hn_ll_plan *P)
{
    size_t es = hn_ll_es(a->dtype);
    int two = hn_ll_twoshot(a), n = a->n;
    P->fmt = hn_ll_fmt(a->kind);
    P->sections = two ? 2 : 1;
    P->es = es;
    if (a->kind == HN_LL_ALLREDUCE_NORM) {
        size_t rows = a->count / a->hidden;
        P->part = (two ? hn_ll_div_up(rows, (size_t)n) : rows) * a->hidden;
        P->seg = a->hidden;
        P->seg_wire = hn_ll_wire(P->fmt, a->hidden * es);
        P->nseg = P->part / a->hidden;
        P->lane = P->nseg * P->seg_wire;
        return;
    }
    /* two-shot chunks: whole vectors each, the last ones shorter or empty */
    P->part = two ? hn_ll_round(hn_ll_div_up(a->count, (size_t)n) * es, HN_LL_VEC) / es : a->count;
    P->seg = seg_bytes / es;
    P->seg_wire = hn_ll_wire(P->fmt, P->seg * es);
    P->nseg = hn_ll_div_up(P->part, P->seg);
    P->lane = hn_ll_wire(P->fmt, P->part * es);
}

/* Bytes of a slot the call needs. */
HN_LL_FN size_t hn_ll_need(const hn_ll_plan *P, int n) { return (size_t)P->sections * (size_t)n * P->lane; }

/* Bytes of a slot that holds every plain collective whose chunk (the
 * reserve of comm.h: allreduce count / n, allgather's input,
 * reduce_scatter's output) is at most `chunk` bytes, by either algorithm. */
HN_LL_FN size_t hn_ll_slot_bytes(int n, size_t chunk)
{
    size_t one = (size_t)n * hn_ll_round((size_t)n * chunk, HN_LL_VEC);                 /* one-shot allreduce */
    size_t two = 2 * (size_t)n * hn_ll_round(chunk + HN_LL_VEC, HN_LL_VEC);              /* two-shot allreduce */
    size_t ag = (size_t)n * hn_ll_wire(HN_LL_PACKETS, chunk);                            /* allgather */
    size_t most = one > two ? one : two;
    return most > ag ? most : ag;
}

/* Elements of part p (two-shot: chunk p; else every part is the range). */
HN_LL_FN size_t hn_ll_part_len(const hn_ll_args *a, const hn_ll_plan *P, int p)
{
    size_t lo;
    if (!hn_ll_twoshot(a))
        return P->part;
    lo = (size_t)p * P->part;
    return lo >= a->count ? 0 : hn_ll_min(P->part, a->count - lo);
}

/* Elements of segment k of a part of `len` elements. */
HN_LL_FN size_t hn_ll_seg_len(const hn_ll_plan *P, size_t len, size_t k)
{
    size_t lo = k * P->seg;
    return lo >= len ? 0 : hn_ll_min(P->seg, len - lo);
}

/* Blocks of a call: one per segment, at most `cap` (0: none given). */
HN_LL_FN int hn_ll_grid(const hn_ll_plan *P, int cap)
{
    size_t b = P->nseg;
    if (cap <= 0 || cap > HN_LL_MAX_BLOCKS)
        cap = HN_LL_MAX_BLOCKS;
    return b < 1 ? 1 : b > (size_t)cap ? cap : (int)b;
}

/* The default cap on a device with `sms` multiprocessors: half of them. */
HN_LL_FN int hn_ll_cap(int sms) { return sms / 2 < 1 ? 1 : sms / 2; }

/* Whether a grid of `blocks` lets the next kernel of its stream launch as
 * soon as it starts (programmatic dependent launch): only a grid of at
 * most an eighth of the multiprocessors. The next one's blocks then wait
 * beside it for its end, holding SMs; two such grids leave three quarters
 * of the device to whatever else runs, so no team waits for SMs another
 * holds (ll.h's progress rule). A larger grid lets it launch once no
 * block of it waits any more. */
HN_LL_FN int hn_ll_early(int blocks, int sms) { return blocks * 8 <= sms; }

/* The generation words block b of `blocks` stores at its end: its own,
 * and the last block also those of the block indices this call did not
 * run, [*lo, *hi). Every block reads only its own word at its start and
 * no block writes another running block's word, so the blocks need not
 * agree with each other on anything: a call's words are all g once every
 * block has ended, whatever grid the next call runs. */
HN_LL_FN void hn_ll_gen_stores(int b, int blocks, int *lo, int *hi)
{
    *lo = b;
    *hi = b == blocks - 1 ? HN_LL_MAX_BLOCKS : b + 1;
}

/* The segments block b of `blocks` owns: [*k0, *k1). */
HN_LL_FN void hn_ll_block_segs(const hn_ll_plan *P, int b, int blocks, size_t *k0, size_t *k1)
{
    *k0 = P->nseg * (size_t)b / (size_t)blocks;
    *k1 = P->nseg * (size_t)(b + 1) / (size_t)blocks;
}

/* The phases of a call into ph; their number. */
HN_LL_FN int hn_ll_phases(const hn_ll_args *a, int *ph)
{
    int k = 0;
    ph[k++] = HN_LL_PUSH;
    if (a->kind != HN_LL_ALLGATHER)
        ph[k++] = HN_LL_REDUCE;
    if (a->kind == HN_LL_ALLGATHER || hn_ll_twoshot(a))
        ph[k++] = HN_LL_GATHER;
    return k;
}

/* Lane of sender s in member r's slot g % 2, section sec. */
HN_LL_FN char *hn_ll_lane(const hn_ll_args *a, const hn_ll_plan *P, uint32_t g, int r, int sec, int s)
{
    return a->slots[r] + (size_t)(g & 1u) * a->slot + ((size_t)sec * (size_t)a->n + (size_t)s) * P->lane;
}

/* Move j of phase ph on segment k in generation g; 0 once there is none.
 * Every address a block reads or writes comes from here. */
HN_LL_FN int hn_ll_move_at(const hn_ll_args *a, const hn_ll_plan *P, uint32_t g, int ph, size_t k, int j,
                           hn_ll_move *mv)
{
    const int n = a->n, me = a->me, two = hn_ll_twoshot(a);
    const size_t es = P->es, at = k * P->seg, wire = k * P->seg_wire;
    const char *send = (const char *)a->send;
    char *recv = (char *)a->recv;
    int q = j < me ? j : j + 1; /* the j-th other member */
    size_t base = 0;            /* element offset of the part in the buffers */
    mv->nto = 0;
    mv->nfrom = 0;
    mv->out = 0;
    mv->res = 0;
    mv->res_out = 0;
    mv->peer = -1;
    if (ph == HN_LL_PUSH) {
        if (a->kind == HN_LL_REDUCE_SCATTER || two) { /* chunk q to member q */
            if (j >= n - 1)
                return 0;
            base = (size_t)q * (two ? P->part : a->count);
            mv->elems = hn_ll_seg_len(P, hn_ll_part_len(a, P, q), k);
            mv->data = send + (base + at) * es;
            mv->to[mv->nto++] = hn_ll_lane(a, P, g, q, 0, me) + wire;
            return 1;
        }
        if (j > 0)
            return 0;
        mv->elems = hn_ll_seg_len(P, P->part, k);
        mv->data = send + at * es;
        for (int p = 0; p < n; p++)
            if (p != me)
                mv->to[mv->nto++] = hn_ll_lane(a, P, g, p, 0, me) + wire;
        if (a->kind == HN_LL_ALLGATHER && recv + ((size_t)me * a->count + at) * es != mv->data)
            mv->out = recv + ((size_t)me * a->count + at) * es;
        return 1;
    }
    if (ph == HN_LL_REDUCE) {
        if (j > 0)
            return 0;
        if (two)
            base = (size_t)me * P->part;
        mv->elems = hn_ll_seg_len(P, hn_ll_part_len(a, P, me), k);
        mv->data = send + ((a->kind == HN_LL_REDUCE_SCATTER ? (size_t)me * a->count : base) + at) * es;
        mv->out = recv + (base + at) * es;
        if (a->kind == HN_LL_ALLREDUCE_NORM) {
            mv->res = (const char *)a->residual + (base + at) * es;
            mv->res_out = (char *)a->residual_out + (base + at) * es;
        }
        for (int p = 0; p < n; p++)
            mv->from[p] = p == me ? 0 : hn_ll_lane(a, P, g, me, 0, p) + wire;
        mv->nfrom = n;
        for (int p = 0; p < n && two; p++)
            if (p != me)
                mv->to[mv->nto++] = hn_ll_lane(a, P, g, p, 1, me) + wire;
        return 1;
    }
    /* GATHER: the other members' chunks */
    if (j >= n - 1)
        return 0;
    base = (size_t)q * (two ? P->part : a->count);
    mv->elems = hn_ll_seg_len(P, two ? hn_ll_part_len(a, P, q) : P->part, k);
    mv->out = recv + (base + at) * es;
    if (a->kind == HN_LL_ALLREDUCE_NORM)
        mv->res_out = (char *)a->residual_out + (base + at) * es;
    mv->from[0] = hn_ll_lane(a, P, g, me, two ? 1 : 0, q) + wire;
    mv->nfrom = 1;
    mv->peer = q;
    return 1;
}

/* Access units of a segment of `elems` elements. Sentinel: 16-byte
 * vectors, then the tail's elements one by one; packets: pairs of packets
 * (8 data bytes, the last pair maybe partly data), then a lone packet. The
 * same on sender and receiver, whatever the segments' size. */
HN_LL_FN size_t hn_ll_units(int fmt, size_t es, size_t elems)
{
    size_t bytes = elems * es;
    if (fmt == HN_LL_PACKETS) {
        size_t packets = hn_ll_div_up(bytes, 4);
        return packets / 2 + (packets & 1u);
    }
    return bytes / HN_LL_VEC + (bytes % HN_LL_VEC) / es;
}

HN_LL_FN void hn_ll_unit_at(int fmt, size_t es, size_t elems, size_t u, hn_ll_unit *U)
{
    size_t bytes = elems * es;
    if (fmt == HN_LL_PACKETS) {
        size_t pairs = hn_ll_div_up(bytes, 4) / 2;
        U->data = 8 * u;
        U->wire = 16 * u;
        U->bytes = (int)hn_ll_min(8, bytes - U->data);
        U->width = u < pairs ? 16 : 8;
        return;
    }
    if (u < bytes / HN_LL_VEC) {
        U->data = U->wire = u * HN_LL_VEC;
        U->bytes = U->width = HN_LL_VEC;
        return;
    }
    U->data = U->wire = bytes / HN_LL_VEC * HN_LL_VEC + (u - bytes / HN_LL_VEC) * es;
    U->bytes = U->width = (int)es;
}

/* Sentinel format: a 4-byte word of elements of es bytes as it is sent
 * (an all-ones element loses its sign bit), and whether a word read from a
 * lane has arrived (no element all ones). A 2-byte element alone: es 2 in
 * the low half. */
HN_LL_FN uint32_t hn_ll_fix(uint32_t w, size_t es)
{
    if (es == 4)
        return w == 0xffffffffu ? 0x7fffffffu : w;
    if ((w & 0xffffu) == 0xffffu)
        w &= ~0x8000u;
    if ((w >> 16) == 0xffffu)
        w &= ~0x80000000u;
    return w;
}

HN_LL_FN int hn_ll_arrived(uint32_t w, size_t es)
{
    return es == 4 ? w != 0xffffffffu : (w & 0xffffu) != 0xffffu && (w >> 16) != 0xffffu;
}

HN_LL_FN int hn_ll_arrived_half(uint16_t h) { return h != 0xffffu; }

/* Packet format: 4 data bytes (little-endian) and the flag g. */
HN_LL_FN uint64_t hn_ll_pack(uint32_t data, uint32_t g) { return (uint64_t)data | (uint64_t)g << 32; }
HN_LL_FN int hn_ll_packet_arrived(uint64_t p, uint32_t g) { return (uint32_t)(p >> 32) == g; }

/* fp32 accumulation of the reductions (avg divides the sum at the end) */
HN_LL_FN float hn_ll_combine(hn_redop redop, float acc, float x)
{
    switch (redop) {
    case HN_RED_PROD: return acc * x;
    case HN_RED_MAX: return acc > x ? acc : x;
    case HN_RED_MIN: return acc < x ? acc : x;
    default: return acc + x; /* sum, avg */
    }
}

HN_LL_FN float hn_ll_finish(hn_redop redop, float acc, int n) { return redop == HN_RED_AVG ? acc / (float)n : acc; }

/* The latency path's kernels, one per kind of device (hn_device_ops.kind),
 * each written for that kind's streams and memory: issue one call on s (a
 * stream of that kind) and return at once. The communicator takes the one
 * of its device backend's kind once, when it starts (hn_ll_kernel_for). */
typedef hn_status_t (*hn_ll_kernel)(hn_dstream *s, const hn_ll_args *a, const hn_origin *o);
#ifdef __cplusplus
extern "C" {
#endif
/* HN_DEVICE_KIND_HOST: a stream closure of the host backend that runs the
 * protocol on the CPU (ll_host.c) */
hn_status_t hn_ll_host(hn_dstream *s, const hn_ll_args *a, const hn_origin *o);
/* HN_DEVICE_KIND_CUDA: the SM kernel (ll_cuda.cu; CUDA builds only) */
hn_status_t hn_ll_cuda(hn_dstream *s, const hn_ll_args *a, const hn_origin *o);
/* The kernel for device backend d's kind, or NULL where this build has
 * none (comm_ll.c). */
hn_ll_kernel hn_ll_kernel_for(const hn_device_ops *d);
#ifdef __cplusplus
}
#endif

#endif
