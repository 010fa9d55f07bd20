/* Communication layer: a table of function pointers per communicator.
 * Teams are ordered lists of global ranks; member i of a team owns chunk i. */
#ifndef HN_COMM_H
#define HN_COMM_H

#include "../device/device.h"
#include "../world/world.h"

/* what a communicator's abort returns (bits) */
enum { HN_COMM_DEAD = 1, HN_COMM_STUCK = 2 };

typedef enum hn_coll_kind {
    HN_COLL_ALLGATHER,
    HN_COLL_ALLREDUCE,
    HN_COLL_REDUCE_SCATTER,
    HN_COLL_BROADCAST,
    HN_COLL_REDUCE,
    HN_COLL_GATHER,
    HN_COLL_SCATTER,
    HN_COLL_ALL_TO_ALL,
    HN_COLL_COUNT
} hn_coll_kind;

const char *hn_coll_name(hn_coll_kind k);

typedef struct hn_coll_args {
    hn_coll_kind kind;
    const void *send;
    void *recv;
    /* Elements of one member's chunk: the send count of allgather/gather,
     * the recv count of reduce_scatter/scatter, the whole count of
     * allreduce/broadcast/reduce, one peer's block of all_to_all. */
    size_t count;
    hn_dtype dtype;
    hn_redop redop;
    int root; /* index into the team */
    /* How the communicator moves it (src/base/collective.h): p2p pushes
     * (HN_ALGO_PUSH, or auto) or pulls (HN_ALGO_PULL); the latency path
     * runs HN_ALGO_ONESHOT or HN_ALGO_TWOSHOT, or, for auto, one-shot where
     * its registered buffer holds the call (src/comm/ll/ll.h); NCCL and the
     * host communicator take auto. */
    hn_coll_algo algo;
} hn_coll_args;

typedef struct hn_p2p_op {
    int is_send;
    int peer; /* global rank */
    void *buf;
    size_t bytes;
    hn_coll_algo algo; /* p2p: the receiver pulls (HN_ALGO_PULL) or the sender pushes (push, auto) */
} hn_p2p_op;

typedef struct hn_comm_world hn_comm_world;
typedef struct hn_comm_team hn_comm_team;

typedef struct hn_comm_setup {
    int nranks;
    int blocking; /* nccl: blocking communicators (1) or abortable non-blocking ones (0) */
    int nccl_max_ctas; /* nccl: most thread blocks (SMs) a collective takes (0: NCCL's default) */
    const hn_device_ops *dev;
    void *dev_ctx;
    const hn_compute_ops *compute; /* p2p: its reduction kernels */
    int p2p_events;                /* p2p: order devices with events (1) or device flags (0) */
    int p2p_pieces;                /* p2p: most pieces per reduce-scatter ring step (0: the default) */
    int p2p_ag_pieces;             /* p2p: most pieces per allgather ring step (0, 1: whole steps) */
    int p2p_lanes;                 /* p2p: side streams that copy (0: one) */
    int p2p_graph_kernel_copy;     /* p2p: copies inside captures by SM kernels, not copy engines */
    size_t p2p_piece_min;          /* p2p: smallest piece, bytes (0: the default) */
    size_t p2p_small_max;          /* p2p: most bytes per member of a small allreduce (0: none) */
    int ll_probe;                  /* ll: stamp each call and print where the time went (diagnostics) */
    const hn_fault_sink *sink;
    /* what the ranks share (src/world/world.h): exchanges at team joins,
     * shared regions for what every member reads of the others (p2p); the
     * caller's, of nranks ranks with shared regions, outliving the
     * communicator. NULL: a communicator that needs one makes its own. */
    hn_world *world;
    /* Where a member finds a peer's buffer that peer handed it (its own
     * address of it, in rank `rank`'s process): the address in this
     * process, for buffers registered across processes
     * (hn_runtime_register, mapped here elsewhere); the address itself
     * for everything else (runtime memory is at the same address in every
     * process). NULL: the address itself. Any rank thread, during runs. */
    void *(*peer_addr)(void *ctx, int rank, void *p);
    void *peer_ctx;
} hn_comm_setup;

typedef struct hn_comm_ops {
    const char *name;
    /* The most members of a team one GPU may hold (0: any): NCCL refuses
     * two; the latency path's kernels wait for each other, so every
     * member's must be resident at once — two members on one GPU leave
     * no room for anything else there (on an H100 a decode program of
     * one-shot, two-shot and copies hung so), hence one. The runtime
     * refuses a team past it before creating it (ordinals of a GPU
     * backend; the host backend emulates a device per rank). */
    int ranks_per_device;
    /* 1: a member reads or writes the other members' buffers themselves
     * (their raw addresses travel between members), so in a world across
     * processes every buffer its calls take must be memory every process
     * maps at the same address — the runtime's device memory, not an
     * embedder's allocation; 0: a member touches only its own buffers
     * (NCCL moves the data through buffers of its own, the latency path
     * through its lanes), any memory of its device. */
    int peers_reach_buffers;
    hn_status_t (*init)(const hn_comm_setup *setup, hn_comm_world **w);
    void (*fini)(hn_comm_world *w);
    /* Once per team, from the runtime's thread, before any run uses it;
     * then team_join on the thread of every member (at once), then
     * team_warmup on every member's stream. join, warmup and reserve are
     * NULL where a communicator has nothing to do then. */
    hn_status_t (*team_create)(hn_comm_world *w, const int *ranks, int n, hn_comm_team **t);
    hn_status_t (*team_join)(hn_comm_team *t, int me, const hn_origin *o);
    hn_status_t (*team_warmup)(hn_comm_team *t, int me, hn_dstream *s, const hn_origin *o);
    /* On member `me`'s thread, between runs: room for reductions of `bytes`
     * per chunk (the dry run knows the largest). */
    hn_status_t (*team_reserve)(hn_comm_team *t, int me, size_t bytes, const hn_origin *o);
    void (*team_destroy)(hn_comm_team *t);
    /* Why this communicator cannot run a collective of `kind`, `dtype` and
     * `count` (as in hn_coll_args) over n ranks: the whole message, written
     * into why[len] ("allreduce via p2p of 6 elements: not divisible by the
     * team size 4"), or NULL when it can. NULL hook: it runs every one.
     * Pure; any thread (the dry run asks before anything is issued). */
    const char *(*refuses)(hn_coll_kind kind, hn_dtype dtype, size_t count, int n, char *why, size_t len);
    /* Issued by member `me` (team index) on its stream; returns at once. */
    hn_status_t (*collective)(hn_comm_team *t, int me, const hn_coll_args *a, hn_dstream *s,
                              const hn_origin *o);
    /* A group of sends and receives of `rank`, posted together: no order of
     * them across ranks deadlocks. */
    hn_status_t (*p2p)(hn_comm_world *w, int rank, const hn_p2p_op *ops, int n, hn_dstream *s,
                       const hn_origin *o);
    /* After a failure: wakes every waiter, which then gives up. Returns
     * HN_COMM_DEAD if the teams are unusable afterwards (destroy and
     * create them anew), with HN_COMM_STUCK if the abort itself could not
     * finish (what it left running may still use the devices). */
    int (*abort)(hn_comm_world *w);
    /* Between runs, with all streams idle: forget sequence numbers.
     * reset_shared (NULL: nothing) then resets what lives in the world's
     * shared regions, once for the world after every rank's reset. */
    void (*reset)(hn_comm_world *w);
    void (*reset_shared)(hn_comm_world *w);
    /* A stream handle of rank `rank` goes away (an embedder's stream of
     * the rank's last launch, when a launch comes on another one): nothing
     * may use it again. What ran on it is ordered before the rank's next
     * launch by the launches' own ordering. On the rank's thread; NULL
     * where a communicator keeps no handle. */
    void (*forget_stream)(hn_comm_world *w, int rank, const hn_dstream *s);
    /* Graphs (hn_graph_ctx, hn_runtime_capture); NULL where a communicator
     * needs nothing (NCCL captures itself; the latency path keeps its
     * generations on the devices). All on rank `rank`'s thread, between
     * runs: graph_begin before the capture of g makes what captured work
     * needs; graph_finish issues, on s at the end of the capture, what ends
     * each replay (p2p: barriers and a reset of its flags); graph_end,
     * after the capture, leaves the eager state as it was before it;
     * graph_free when the graph is destroyed. */
    hn_status_t (*graph_begin)(hn_comm_world *w, int rank, const hn_graph_ctx *g, const hn_origin *o);
    hn_status_t (*graph_finish)(hn_comm_world *w, int rank, const hn_graph_ctx *g, hn_dstream *s,
                                const hn_origin *o);
    void (*graph_end)(hn_comm_world *w, int rank, const hn_graph_ctx *g);
    void (*graph_free)(hn_comm_world *w, int rank, const hn_graph_ctx *g);
} hn_comm_ops;

extern const hn_comm_ops hn_comm_host;
extern const hn_comm_ops hn_comm_p2p;
extern const hn_comm_ops hn_comm_ll;
/* the host backend's collectives between nodes, over the world's link */
extern const hn_comm_ops hn_comm_net;

/* Why the latency path (via ll) cannot run a collective of this kind and
 * dtype over n ranks, or NULL when it can (the reason alone; the table's
 * `refuses` writes the message). */
const char *hn_comm_ll_refuses(hn_coll_kind kind, hn_dtype dtype, int n);

/* The decode step every transformer layer ends with, through the latency
 * path in one kernel per member (src/comm/ll/ll.h, HN_LL_ALLREDUCE_NORM):
 *   y = allreduce(send) + residual;  residual_out = y;
 *   recv = y * rsqrt(mean(y^2) + eps) * weight
 * on `rows` rows of `hidden` elements, all buffers of `dtype` (f32, bf16,
 * f16), fp32 math on y as stored; every member gets the same bits. The
 * residual is the replicated hidden state (the same on every member:
 * two-shot adds the copy of each row's owner). In place: recv may be send,
 * residual_out may be residual; recv and residual_out are two buffers.
 * All buffers on the member's device, contiguous; the caller owns them. */
typedef struct hn_norm_args {
    const void *send;     /* rows x hidden: this member's addend */
    void *recv;           /* rows x hidden: the normalized output */
    const void *residual; /* rows x hidden */
    void *residual_out;   /* rows x hidden: y */
    const void *weight;   /* hidden */
    size_t rows, hidden;
    hn_dtype dtype;
    float eps;
    hn_redop redop; /* HN_RED_SUM for the decode step; any reduction works */
    hn_coll_algo algo; /* as hn_coll_args.algo: HN_ALGO_ONESHOT, HN_ALGO_TWOSHOT, auto */
} hn_norm_args;

/* Why the latency path cannot run the fused step in dtype over n ranks, or
 * NULL when it can. */
const char *hn_comm_ll_norm_refuses(hn_dtype dtype, int n);
/* The chunk bytes to reserve (team_reserve) on a team of the latency path
 * for a fused step of rows x hidden, by either algorithm. */
size_t hn_comm_ll_norm_reserve(size_t rows, size_t hidden, hn_dtype dtype, int n);
/* Issues the fused step on member me's stream s (t: a team of hn_comm_ll,
 * reserved as above); returns at once. On that member's thread, like
 * `collective`, and ordered with its collectives on the team. */
hn_status_t hn_comm_ll_allreduce_norm(hn_comm_team *t, int me, const hn_norm_args *a, hn_dstream *s,
                                      const hn_origin *o);
#ifdef HN_HAVE_CUDA
extern const hn_comm_ops hn_comm_nccl;
#endif

/* One measurement of `hirnode bench collectives`: count is one member's
 * chunk (as in hn_coll_args); only allgather, allreduce, reduce_scatter. */
typedef struct hn_bench_case {
    hn_coll_kind kind;
    size_t count;
    hn_dtype dtype;
    int warmup, iters, reps;
    int device_timing; /* CUDA events around the calls (1) or the host clock (0) */
    int graph;         /* hirnode's side replays a graph; raw NCCL captures one (hn_nccl_raw_capture) */
} hn_bench_case;

#ifdef HN_HAVE_CUDA
/* Raw NCCL on devices 0..n-1 with communicators of its own (inputs: rank
 * + 1), for the benchmark's baseline. A repetition runs `iters` calls (or
 * a launch of their captured graph) on one thread per device after a
 * barrier and returns the slowest rank's time per call (device or host
 * clock, as the case says); close counts mismatches in rank 0's output (if
 * wrong). */
typedef struct hn_nccl_raw hn_nccl_raw;
hn_status_t hn_nccl_raw_open(int n, const hn_bench_case *c, hn_nccl_raw **out);
/* Captures `iters` calls in one CUDA graph per rank (each on its own
 * thread, at once); from then on a repetition of that many calls is one
 * launch of it (the events around the launch). */
hn_status_t hn_nccl_raw_capture(hn_nccl_raw *h, int iters);

/* NCCL's version, "2.28.3" (for the machine profile). */
void hn_nccl_version(char *buf, size_t n);
hn_status_t hn_nccl_raw_rep(hn_nccl_raw *h, int iters, double *seconds);
void hn_nccl_raw_close(hn_nccl_raw *h, long *wrong);
#endif

/* The communicator registered under `name` (host, nccl, p2p, ll), or NULL. */
const hn_comm_ops *hn_comm_find(const char *name);

/* Reduces `n` elements of src into acc (float accumulation), in place. */
void hn_reduce_into(double *acc, const void *src, hn_dtype dt, size_t n, hn_redop redop, int first);
/* The CPU's reference of a collective: member me's result, into a fresh
 * buffer (*bytes_out bytes; 0 for a gather's or reduce's non-root), from
 * every member's arguments args[0 .. n-1] (their send buffers readable
 * here); reductions in team order, fp32 accumulation for floating types.
 * NULL when out of memory. The host and net communicators compute with
 * it. */
void *hn_coll_result(const hn_coll_args *args, int n, int me, size_t *bytes_out);

#endif
