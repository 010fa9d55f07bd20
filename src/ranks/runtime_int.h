/* The state of a runtime, shared by the layers from src/ranks up
 * (docs/ARCHITECTURE.md lists them): the runtime, its ranks, teams,
 * caches and graphs. Each layer's functions are declared in its own
 * header; the fields below are grouped by the layer that owns them. */
#ifndef HN_SCHED_RUNTIME_INT_H
#define HN_SCHED_RUNTIME_INT_H

#include <pthread.h>

#include "../comm/comm.h"
#include "../device/device.h"
#include "../base/fault.h"
#include "../base/settings.h"
#include "../ir/ir.h"
#include "../world/world.h"
#include "hirnode/runtime.h"

#define HN_CALLER_STREAM (-1)
#define HN_VERIFIED_CONFIGS 16 /* prepared configurations (and automatic graphs) a runtime remembers */

typedef struct hn_trace hn_trace;           /* a running trace (trace.h) */
typedef struct hn_trace_rank hn_trace_rank; /* its recorder of one rank */

/* One cached device block: the same alloc returns it run after run. */
typedef struct hn_block_cache {
    uint64_t prog; /* the program's uid */
    int instr, occurrence;
    void *ptr;
    size_t bytes;
} hn_block_cache;

/* A block of device memory an embedder got from hn_runtime_alloc: bindings
 * that point into it are checked against its end (bind.c). */
typedef struct hn_user_block {
    uintptr_t base;
    size_t bytes;
} hn_user_block;
/* A job of every rank thread (pool.c), or of one rung by its doorbell. */
struct hn_rank;
typedef hn_status_t (*hn_job_fn)(struct hn_rank *r, void *arg);

/* One rank: touched by its own thread during jobs (rank.c), by the
 * caller's thread between them. */
typedef struct hn_rank {
    hn_runtime *rt;
    int rank;  /* global: what programs, teams, errors and devices name */
    int local; /* rank - rt->first: the index of every per-rank array of the runtime */
    pthread_t thread;
    hn_dstream *caller;                   /* the runtime's stream for this rank */
    hn_dstream *active;  /* the program's current_stream: caller, or the embedder's in a launch */
    hn_dstream *adopted; /* handle of the embedder's stream of the last launch, or NULL */
    /* the native stream (stream_native) of its last launch or replay in
     * flight, NULL once synced: handles of embedders' streams are freed
     * and made again when the stream changes, and a new one may get the
     * old one's address, so streams are told apart by what they wrap */
    void *follow;
    void *adopted_native;
    hn_devent *launch_start, *launch_done; /* a launch's joins with its stream */
    hn_devent *ran_done; /* the end of its last launch that runs now: not one an embedder's capture took */
    hn_dstream **user_streams; /* made by hn_runtime_stream_create */
    int nuser_streams, user_streams_cap;
    hn_dstream *streams[HN_MAX_STREAMS];  /* pool, created on first use */
    hn_devent *stream_event[HN_MAX_STREAMS + 1]; /* [0] caller, [k+1] pool k */
    hn_devent **comm_events;              /* pool, reused every run */
    int ncomm_events;
    hn_block_cache *blocks;
    int nblocks, blocks_cap;
    int current_instr; /* what the evaluator is issuing (for the watchdog) */
    /* what a sync past the deadline names: the last communication issued
     * by the rank's last run or launch (-1 none), or the graph its last
     * replay launched (0: none since) */
    int last_comm;
    uint64_t replayed;
    hn_dtimer *run_mark[2]; /* timed runs (run_timing.c): the body's start and end */
    double run_seconds;     /* ... and the time between them in the last run, or -1 */
    int capturing;          /* a capture began on `active` and has not ended (graph.c) */
    /* hn_runtime_alloc's blocks of this rank, sorted by base (bind.c);
     * the caller's thread only */
    hn_user_block *user_blocks;
    int nuser_blocks, user_blocks_cap;
    /* its doorbell (pool.c): a job of this rank alone, handed over without
     * the job handoff's lock; kept off the cache lines of the fields above
     * and of the next rank, which other threads write */
    char bell_pad0[64];
    uint64_t bell;            /* rung by the caller (atomic) ... */
    uint64_t bell_done;       /* ... answered by the rank's thread (atomic) */
    hn_job_fn bell_fn;        /* what the ring asks, set before it */
    void *bell_arg;
    hn_status_t bell_status;  /* the answer's, read after it */
    int sleeping;             /* atomic: the thread sleeps on cv_job, a ring must wake it */
    char bell_pad1[64];
} hn_rank;

/* A program captured for one configuration (graph.c; kept in the
 * configuration cache): a backend graph per rank, replayed with one
 * launch per rank from the caller's thread. */
typedef struct hn_graph_hold hn_graph_hold; /* (graph_state.c) */

struct hn_graph {
    hn_runtime *rt;
    uint64_t id;       /* never 0 */
    uint64_t prog;     /* uid of the program the caller gave */
    const hn_program *lp; /* what was captured (lowered); not to be read once the graph is unusable */
    uint64_t lp_uid;      /* its uid */
    int64_t *params;   /* [nparams] */
    int nparams, nio;
    /* per local rank (nlocal): */
    void **io;         /* [nio * nlocal]: the bindings captured, io[k * nlocal + local] */
    size_t *bytes;     /* [nio * nlocal]: their bytes as bound (0: unknown) */
    void **natives;    /* the caller's streams at capture (NULL: the runtime's) */
    hn_graph_ctx *ctx; /* epoch and abort words */
    hn_dgraph **g;
    int valid;         /* 0 once a failure, a forget or memory pressure made it unusable */
    char why[200];     /* ... and why */
    int automatic;     /* made by the setting graphs = 1: the runtime owns it */
    uint64_t used;     /* automatic: for least-recently-used replacement */
    hn_status_t *updated; /* during a rebind: [nlocal], each rank's update in place; NULL otherwise */
    const hn_moved *moving; /* during a rebind's capture: how the bindings move ([nmoving]), or NULL */
    int nmoving;
    int in_place;         /* the last rebind moved the pointers with no capture */
    /* a launch's inside a capture of the caller's (graph.c): the runtime
     * never replays it (g[] stays NULL); the caller's graphs hold it */
    struct hn_graph_hold *hold;
    struct hn_graph *next;
};

/* A team of a communicator the programs use (teams.c). */
typedef struct hn_team_entry {
    int comm; /* index into hn_runtime.comms */
    int n;
    int *ranks;
    hn_comm_team *team;
    int joined;       /* every member joined and warmed it up */
    size_t reserve;   /* bytes of reduction staging the programs need */
    size_t reserved;  /* bytes reserved on every member */
} hn_team_entry;

/* One communicator of the runtime and its state. */
/* An allocation of rank `rank` registered across processes: its address
 * in that rank's process, and where this process reaches it. */
typedef struct hn_reg {
    int rank;
    uintptr_t base;
    size_t bytes;
    void *local;
    int opened; /* local is a mapping of the backend's (ipc_open), closed when the entry goes */
    unsigned char key[HN_IPC_KEY_BYTES]; /* the key of the backend's handle (ipc_export): a new allocation
                                            at the same place has another; zero for runtime memory */
} hn_reg;

typedef struct hn_comm_slot {
    const hn_comm_ops *ops;
    hn_comm_world *world;
} hn_comm_slot;

/* What the configuration cache keeps (config_cache.c): configurations
 * (program uid, parameter values) prepared lately — a server switching
 * between a few batch sizes pays each dry run once — ... */
typedef struct hn_verified {
    uint64_t prog; /* uid; 0 = free */
    int64_t *params;
    int nparams;
    uint64_t used; /* for least-recently-used replacement */
    /* what bindings need at this configuration (bind.c): bytes of input /
     * output k on rank r at need[k * world + r], the element size of k at
     * need[nio * world + k]; NULL when it could not be worked out (then each
     * call works it out) */
    size_t *need;
    int nio;
    /* the first communication of a local rank through which the other
     * members reach its buffers themselves (hn_comm_ops.peers_reach_buffers,
     * `via` as the run resolves it eagerly or in a capture), said as
     * "FILE:LINE:COL: `STATEMENT` (via p2p)"; NULL with reach_none 1 when no
     * communication does (then, across processes, a binding may be any
     * memory of its rank's device); NULL with reach_none 0: not known */
    char *reach;
    int reach_none;
    int reach_eager; /* a communication reaches them as the run resolves it eagerly (not only in a capture) */
} hn_verified;

/* ... the lowered copy of a program for its parameter values ... */
typedef struct hn_lowered {
    const hn_program *src;
    uint64_t uid; /* src's, to tell a new program at a recycled address */
    int64_t *params;
    int nparams;
    hn_program *prog;
} hn_lowered;

/* ... and configurations run once (graphs = 1 captures the second run). */
typedef struct hn_seen {
    uint64_t prog; /* 0: free */
    uint64_t key;  /* hash of parameters, bindings and streams */
} hn_seen;

struct hn_runtime {
    /* the devices (runtime.c) */
    hn_runtime_config cfg;
    /* the world holds every rank of the program (dry runs, parameters,
     * teams see it); this runtime drives ranks first .. first+nlocal-1
     * (rt->ranks[], threads, bindings, graphs, traces are that long).
     * One process holds every rank (first 0, nlocal == world), or one
     * rank of a world of processes (procs.c). */
    int world, first, nlocal;
    /* process mode (procs.c): the rendezvous and the world's memory, NULL
     * when every rank is here; world_lost once a process died; xseq the
     * exchanges of the caller's thread so far (names them alike in every
     * process) */
    struct hn_rdv *rdv;
    /* a world across nodes (procs.c): nodes of per_node ranks each, this
     * process on node `node`; the link to the others (net), served here
     * by rank 0's process (net_server); nodes 1 and both NULL otherwise */
    int nodes, per_node, node;
    /* the first death this process heard of, as its error reads (under
     * err_mu): the cause every other failure of that run follows from */
    char death_text[1024];
    uint64_t agreed_hash; /* of what every process must agree on (build, settings) */
    struct hn_net *net;
    struct hn_net_server *net_server;
    char *made_rdv; /* the rendezvous directory hn_runtime_create_store made here: removed with it */
    int world_lost;
    uint64_t xseq;
    /* caller memory registered across processes (register.c): written by
     * the caller's thread with no launch in flight, read by the rank
     * threads as they issue */
    struct hn_reg *regs;
    int nregs, regs_cap;
    const hn_device_ops *dev;
    const hn_compute_ops *compute;
    void *dev_ctx;
    hn_rank *ranks; /* [nlocal] */
    int *all_ranks; /* 0 .. world-1: the team of point-to-point transfers */
    int *devices;   /* [nlocal]: the device ordinal of each local rank */
    int *world_devices; /* [world]: every rank's ordinal (a world across processes), or NULL */
    const struct hn_cost_profile *profile; /* the machine profile its lowering's model reads (profile.c) */

    /* the error slot and device health (run_error.c): the first error of
     * a run, decided in the world's slot and copied into err_text; work of
     * launches in flight may report while the caller's thread reads, hence
     * the lock */
    hn_world *world_state; /* what the ranks share: abort word, error slot, exchanges */
    hn_fault_sink sink;
    const int *abort_flag; /* the world's abort word */
    pthread_mutex_t err_mu;
    hn_status_t err_status;
    char err_text[1024];
    const hn_program *err_prog; /* to name instructions */
    int lost;         /* a device's context is lost: no more runs */
    char lost_text[512];

    /* rank threads and job handoff (pool.c) */
    pthread_mutex_t mu;
    pthread_cond_t cv_job, cv_done;
    uint64_t job_gen;
    int job_done;
    int quit;
    hn_job_fn job_fn;
    void *job_arg;
    hn_status_t *job_status;
    double spin_us;   /* how long idle threads spin before they sleep */
    int join_spin;    /* the caller spins until a run ends */
    double watchdog_grace_s; /* the watchdog barks at timeout + this */
    /* a rank thread (or its device's work) did not end after the watchdog
     * aborted everything: the runtime is lost (lost_text says who), and
     * teardown leaves that thread, and what it may still use, alone */
    int stuck;
    void (*on_deadline)(hn_runtime *rt); /* the watchdog's hook, after it named the busy ranks */

    /* timed runs (run_timing.c) */
    int time_runs; /* runs mark their body on the caller's stream */

    /* communicators and teams (teams.c) */
    hn_comm_slot comms[HN_VIA_COUNT]; /* the distinct communicators ... */
    int ncomms;
    int via_comm[HN_VIA_COUNT];       /* ... and which one each `via` uses */
    int default_auto; /* collectives without `via` pick NCCL or p2p like `via auto` (cuda) */
    hn_team_entry *teams;
    int nteams, teams_cap;
    int teams_dead;   /* the communicators were aborted (watchdog, a failed one) */

    /* tracing (trace.c): between hn_runtime_trace_start and _stop, else NULL */
    hn_trace *trace;

    /* injected faults (fault_inject.c, HIRNODE_FAULT) */
    hn_fault_plan faults;
    int faults_fired; /* how many took effect (atomic; for tests) */

    /* the configuration cache (config_cache.c): one clock orders its
     * entries for least-recently-used replacement */
    uint64_t cache_clock;
    hn_verified verified[HN_VERIFIED_CONFIGS];
    int preparations; /* configurations prepared (dry runs), for tests */
    hn_lowered *lowered;
    int nlowered, lowered_cap;
    /* every live graph, the caller's and the automatic ones (setting graphs) */
    struct hn_graph *graphs;
    uint64_t graph_ids;
    hn_seen seen[HN_VERIFIED_CONFIGS];
    int seen_next;

    /* runs and launches (issue.c) */
    int inflight;     /* launches issued since the last sync */
    hn_status_t pending; /* their failure, collected by a call that returns nothing (free, forget, ...):
                          * the next sync, query or call that enters returns it */
    uint64_t inflight_prog; /* the uid of their program (replays: hn_replay_key of it) */

    /* graphs (graph.c) */
    int auto_graphs; /* repeated runs and launches are captured and replayed */
    int replay;      /* how a replay launches every rank's graph: hn_replay_path (graph.h) */
};

/* Process mode is on (the world spans processes, procs.c): rt->world >
 * rt->nlocal. */
static inline int hn_procs(const hn_runtime *rt) { return rt->rdv != NULL; }

/* 1 when global rank `rank` is one this runtime drives (rt->ranks[rank -
 * rt->first]); the API's per-rank calls take only those. */
static inline int hn_runtime_drives(const hn_runtime *rt, int rank)
{
    return rank >= rt->first && rank - rt->first < rt->nlocal;
}

/* The device ordinal of global rank `rank` (in a world across processes,
 * as its process numbers its devices: told at creation), -1 when unknown. */
static inline int hn_runtime_device_of(const hn_runtime *rt, int rank)
{
    if (hn_runtime_drives(rt, rank))
        return rt->devices[rank - rt->first];
    return rt->world_devices != NULL && rank >= 0 && rank < rt->world ? rt->world_devices[rank] : -1;
}

#endif
