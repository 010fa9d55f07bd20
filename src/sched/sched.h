/* Scheduler internals: the runtime (one thread per rank), per-rank
 * contexts with their stream and event pools and caching allocator, and
 * the evaluator that issues a program's instructions onto streams. The
 * same evaluator runs in "dry" mode (shapes only, no device) to verify a
 * program for one configuration before anything is launched. */
#ifndef HN_SCHED_H
#define HN_SCHED_H

#include <pthread.h>
#include <stdio.h>

#include "../comm/comm.h"
#include "../core/device.h"
#include "../core/fault.h"
#include "../core/ir.h"
#include "../core/verify.h"
#include "comm_log.h"
#include "hirnode/runtime.h"
#include "params.h"

#define HN_MAX_STREAMS 16
#define HN_VERIFIED_CONFIGS 8 /* prepared configurations a runtime remembers */
#define HN_CALLER_STREAM (-1)
#define HN_DRY_RUN_BUDGET 20000000 /* instructions the dry runs of all ranks may execute */
#define HN_DRY_RUN_RECORDS 1000000 /* communications and allocations they may log */

typedef enum hn_vkind { HN_V_UNDEF, HN_V_INT, HN_V_TENSOR, HN_V_STREAM, HN_V_COMM } hn_vkind;

typedef struct hn_value {
    hn_vkind kind;
    hn_tensor t;   /* tensors */
    int owned;     /* tensor came from alloc (may be freed) */
    int stream;    /* streams: HN_CALLER_STREAM or pool index */
    int comm;      /* communications: event index, -1 = nothing to wait for */
} hn_value;

/* One cached device block: the same alloc returns it run after run. */
typedef struct hn_block_cache {
    uint64_t prog; /* the program's uid */
    int instr, occurrence;
    void *ptr;
    size_t bytes;
} hn_block_cache;

typedef struct hn_runtime hn_runtime;
typedef struct hn_trace hn_trace;           /* a running trace (trace.h) */
typedef struct hn_trace_rank hn_trace_rank; /* its recorder of one rank */

typedef struct hn_rank {
    hn_runtime *rt;
    int rank;
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
    hn_dstream **user_streams; /* made by hn_runtime_stream_create */
    int nuser_streams, user_streams_cap;
    hn_dstream *streams[HN_MAX_STREAMS];  /* pool, created on first use */
    hn_devent *stream_event[HN_MAX_STREAMS + 1]; /* [0] caller, [k+1] pool k */
    hn_devent **comm_events;              /* pool, reused every run */
    int ncomm_events;
    hn_block_cache *blocks;
    int nblocks, blocks_cap;
    int current_instr; /* what the evaluator is issuing (for the watchdog) */
    hn_dtimer *run_mark[2]; /* timed runs (run_timing.c): the body's start and end */
    double run_seconds;     /* ... and the time between them in the last run, or -1 */
    int capturing;          /* a capture began on `active` and has not ended (graph.c) */
} hn_rank;

/* A program captured for one configuration (graph.c): a backend graph per
 * rank, replayed with one launch per rank from the caller's thread. */
struct hn_graph {
    hn_runtime *rt;
    uint64_t id;       /* never 0 */
    uint64_t prog;     /* uid of the program the caller gave */
    const hn_program *lp; /* what was captured (lowered); not to be read once the graph is unusable */
    uint64_t lp_uid;      /* its uid */
    int64_t *params;   /* [nparams] */
    int nparams, nio;
    void **io;         /* [nio * n]: the bindings captured, io[k * n + rank] */
    void **natives;    /* [n]: the caller's streams at capture (NULL: the runtime's) */
    hn_graph_ctx *ctx; /* [n]: epoch and abort words of each rank */
    hn_dgraph **g;     /* [n] */
    int valid;         /* 0 once a failure, a forget or memory pressure made it unusable */
    char why[200];     /* ... and why */
    int automatic;     /* made by the setting graphs = 1: the runtime owns it */
    uint64_t used;     /* automatic: for least-recently-used replacement */
    struct hn_graph *next;
};

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
typedef struct hn_comm_slot {
    const hn_comm_ops *ops;
    hn_comm_world *world;
} hn_comm_slot;

struct hn_runtime {
    hn_runtime_config cfg;
    int n;
    const hn_device_ops *dev;
    const hn_compute_ops *compute;
    void *dev_ctx;
    /* the distinct communicators, and which one each `via` uses */
    hn_comm_slot comms[HN_VIA_COUNT];
    int ncomms;
    int via_comm[HN_VIA_COUNT];
    hn_fault_sink sink;
    int abort_flag;
    hn_rank *ranks;
    int *all_ranks; /* 0 .. n-1: the team of point-to-point transfers */
    /* job handoff to rank threads */
    pthread_mutex_t mu;
    pthread_cond_t cv_job, cv_done;
    uint64_t job_gen;
    int job_done;
    double spin_us;   /* how long idle threads spin before they sleep */
    int join_spin;    /* the caller spins until a run ends */
    int teams_dead;   /* the communicators were aborted (watchdog, a failed one) */
    double watchdog_grace_s; /* the watchdog barks at timeout + this */
    hn_fault_plan faults; /* injected faults (HIRNODE_FAULT) */
    int faults_fired;     /* how many took effect (atomic; for tests) */
    int lost;         /* a device's context is lost: no more runs */
    int inflight;     /* launches issued since the last sync */
    uint64_t inflight_prog; /* the uid of their program */
    char lost_text[512];
    int quit;
    hn_status_t (*job_fn)(hn_rank *r, void *arg);
    void *job_arg;
    hn_status_t *job_status;
    /* first error of a run */
    pthread_mutex_t err_mu;
    hn_status_t err_status;
    char err_text[1024];
    const hn_program *err_prog; /* to name instructions */
    /* the last configuration verified (runs of it skip the dry run) */
    /* configurations (program uid, parameter values) prepared lately: a
     * server switching between a few batch sizes pays each dry run once */
    struct hn_verified {
        uint64_t prog; /* uid; 0 = free */
        int64_t *params;
        int nparams;
        uint64_t used; /* for least-recently-used replacement */
    } verified[HN_VERIFIED_CONFIGS];
    uint64_t verified_clock;
    int preparations; /* configurations prepared (dry runs), for tests */
    /* teams the programs use */
    hn_team_entry *teams;
    int nteams, teams_cap;
    hn_trace *trace; /* between hn_runtime_trace_start and _stop, else NULL */
    /* collectives without `via` pick NCCL or p2p like `via auto` (cuda) */
    int default_auto;
    int time_runs; /* runs mark their body on the caller's stream (run_timing.c) */
    /* the programs lowered for this runtime (lower.c) */
    struct hn_lowered *lowered;
    int nlowered, lowered_cap;
    /* captured graphs (graph.c): every live one, the caller's and the
     * automatic ones (setting graphs), and configurations seen once */
    struct hn_graph *graphs;
    uint64_t graph_ids;
    int auto_graphs; /* repeated runs and launches are captured and replayed */
    int replay_threads; /* a replay launches each rank's graph on its thread (else the caller's) */
    struct hn_seen {
        uint64_t prog; /* 0: free */
        uint64_t key;  /* hash of parameters, bindings and streams */
    } seen[HN_VERIFIED_CONFIGS];
    int seen_next;
};

/* Per-run evaluation state of one rank. */
typedef struct hn_exec {
    hn_runtime *rt;       /* NULL in a dry run */
    hn_rank *r;           /* NULL in a dry run */
    const hn_program *p;
    int rank, world, nstreams;
    int dry;
    int reference;        /* running the reference block: no communication */
    int promote;          /* reference: bf16/f16 allocations become f32 */
    int poison;           /* fill fresh allocations with NaN / a pattern */
    hn_value *vals;
    int64_t *ivals;
    int cur;              /* current stream */
    int last_comm;        /* event index of the last communication, -1 none */
    int comm_next;        /* next free comm event */
    int *occurrence;      /* per instruction: allocs so far this run */
    hn_comm_log *log;     /* dry run: communications issued */
    unsigned streams_used; /* dry run: bit k, pool stream k is used */
    int fault_seen[HN_MAX_FAULTS]; /* per injected fault: matches so far */
    hn_trace_rank *trace; /* a traced run: this rank's recorder, else NULL */
    const hn_trace_hook *trace_hook; /* ... and its hook, in every origin */
    const hn_graph_ctx *graph;       /* a capture: the graph's state of this rank, in every origin */
    int64_t budget;       /* dry run: instructions left before giving up */
    int64_t records;      /* dry run: communications and allocations left to log */
    /* dry run: the first error of this rank */
    hn_status_t status;
    int err_instr;
    char err[512];
} hn_exec;

/* Evaluates the body (or the reference block) with values bound already.
 * On failure x->status/err/err_instr describe the first error. */
hn_status_t hn_exec_block(hn_exec *x, const hn_block *b);
hn_status_t hn_exec_prepare(hn_exec *x, const hn_program *p, int rank, int world, int nstreams,
                            const int64_t *param_values);
void hn_exec_release(hn_exec *x);

/* Team of one instruction as this rank sees it: members into `out`
 * (capacity `cap`), count into *n. */
hn_status_t hn_exec_team(hn_exec *x, const hn_instr *in, int *out, int cap, int *n);


/* Verifier. Static: names, kinds, dtypes (configuration-independent).
 * Dynamic: a dry run of every rank, then matching of communications.
 * Diagnostics are appended to diag, all at once. */
hn_status_t hn_verify_run(const hn_program *p, int world, int nstreams, const int64_t *params,
                          hn_strbuf *diag, hn_comm_log *logs /* world entries, or NULL */);

/* Sets off the injected faults of this rank that match instruction `in`
 * (its line; its occurrence counted in x->fault_seen) before it is issued
 * (fault_inject.c). HN_OK: issue it (perhaps after a fault was set off
 * beside it); otherwise it is not issued and msg says why (empty: the rank
 * was held until the run's abort, no error of its own). */
hn_status_t hn_faults_set_off(hn_exec *x, const hn_instr *in, char *msg, size_t cap);

/* Runtime internals used by the evaluator and check. */
hn_status_t hn_rank_stream(hn_rank *r, int idx, hn_dstream **out);
hn_status_t hn_rank_comm_event(hn_rank *r, int idx, hn_devent **out);
/* Frees this rank's cached blocks of program `prog` (all_but = 0), or of
 * every program but `prog` (all_but = 1). Between runs. */
void hn_rank_free_blocks_of(hn_rank *r, uint64_t prog, int all_but);
hn_status_t hn_rank_alloc_cached(hn_rank *r, const hn_program *p, int instr, int occurrence,
                                 size_t bytes, void **out);
/* The communicator of `via`, and its team of these ranks (NULL if none). */
const hn_comm_slot *hn_runtime_comm(const hn_runtime *rt, hn_backend_kind via);
hn_comm_team *hn_runtime_team(hn_runtime *rt, hn_backend_kind via, const int *ranks, int n);
hn_status_t hn_runtime_ensure_team(hn_runtime *rt, hn_backend_kind via, const int *ranks, int n);
/* Runs fn on every rank thread (all at once) and waits for all. */
hn_status_t hn_runtime_exec_all(hn_runtime *rt, hn_status_t (*fn)(hn_rank *r, void *arg), void *arg);
/* Replaces the injected faults (spec as HIRNODE_FAULT; NULL or "" none);
 * HN_ERR_INVALID with err set for a bad spec. Between runs only. */
hn_status_t hn_runtime_set_faults(hn_runtime *rt, const char *spec, hn_strbuf *err);
/* Records an error of a rank (first one wins) and stops everybody. */
void hn_runtime_fail(hn_runtime *rt, int rank, int instr, hn_status_t st, const char *msg);
void hn_runtime_clear_error(hn_runtime *rt);
/* Which program's instructions later errors name (under the error lock). */
void hn_runtime_set_err_prog(hn_runtime *rt, const hn_program *p);
/* Sets the error text under the error lock (launches may be in flight). */
void hn_runtime_set_error_text(hn_runtime *rt, const char *text);
/* Dry-runs p for this configuration unless just done, creates its teams
 * and sizes every rank's allocation cache. Diagnostics into diag. */
hn_status_t hn_runtime_prepare(hn_runtime *rt, const hn_program *p, const int64_t *params,
                               hn_strbuf *diag);
/* 1 when runs of p with these parameters need no preparation. */
int hn_runtime_prepared(hn_runtime *rt, const hn_program *p, const int64_t *params);
/* Forgets the prepared configurations of a program (uid; 0: all). */
void hn_runtime_forget_verified(hn_runtime *rt, uint64_t prog);
/* Runs a prepared program; io_ptrs[i][rank] for inputs then outputs. */
hn_status_t hn_runtime_run_bound(hn_runtime *rt, const hn_program *p, const int64_t *params,
                                 void *const *const *io_ptrs, int poison);
/* Parameters and bindings of a run or launch, resolved; the program
 * prepared (verified, lowered, teams and buffers made) for them. */
typedef struct hn_resolved {
    int64_t *params;
    void ***io; /* [k][rank] */
} hn_resolved;
hn_status_t hn_runtime_resolve(hn_runtime *rt, const hn_program *p, const hn_run_args *args, hn_resolved *rs);
void hn_resolved_free(hn_resolved *rs);
/* Issues lp on every rank inside a capture into g (job A: capture begun on
 * each rank's launch stream, the program issued and its streams joined;
 * the capture stays open), then ends it (job B: the communicators' end of
 * a replay, the epoch raised, the capture ended into g->g[rank]). */
hn_status_t hn_runtime_capture_issue(hn_runtime *rt, hn_graph *g, void *const *const *io, void *const *streams);
/* A launch's stream of rank r: the embedder's (native) or the runtime's. */
hn_status_t hn_rank_launch_stream(hn_rank *r, void *native, hn_dstream **out);
/* The start and end of a run (comm resets, errors, aborts). */
void hn_runtime_begin_run(hn_runtime *rt, const hn_program *p);
hn_status_t hn_runtime_finish_run(hn_runtime *rt, hn_status_t st);
hn_status_t hn_runtime_check_devices(hn_runtime *rt);
/* graph.c: makes graphs unusable (why): those of program uid `prog`
 * (that of the caller's program or the lowered one), of every program but
 * it (all_but), or all (prog 0); graphs_abort raises every graph's abort
 * words, so that their device-side waits give up, and makes them all
 * unusable; graphs_free frees them all (the runtime's end). */
void hn_runtime_graphs_invalidate(hn_runtime *rt, uint64_t prog, int all_but, const char *why);
void hn_runtime_graphs_abort(hn_runtime *rt);
/* After a failure, with every stream of the runtime idle: the backend
 * graphs go (on the host backend their own streams stop), all unusable. */
void hn_runtime_graphs_drop(hn_runtime *rt);
void hn_runtime_graphs_free(hn_runtime *rt);
/* The setting graphs = 1: a run or launch of a configuration seen before
 * is replayed from its graph (captured the second time). HN_OK with *out
 * the graph to replay, or NULL to run eagerly (also when a capture failed:
 * logged, and the configuration prepared again); an error of the launches
 * in flight or of that preparation otherwise. */
hn_status_t hn_runtime_auto_graph(hn_runtime *rt, const hn_program *p, const int64_t *params,
                                  void *const *const *io, void *const *streams, hn_graph **out);
/* Replays g on every rank's stream (streams NULL: the runtime's). */
hn_status_t hn_runtime_replay_streams(hn_runtime *rt, hn_graph *g, void *const *streams);

/* Runs the reference block on rank 0 with global tensors. */
hn_status_t hn_runtime_run_reference(hn_runtime *rt, const hn_program *p, const int64_t *params,
                                     void *const *io_ptrs);

/* Settings table (config.c). */
typedef struct hn_setting {
    const char *name, *env, *def, *help;
} hn_setting;
int hn_settings_count(void);
const hn_setting *hn_setting_at(int i);
/* Effective value: the variable if set, else the default. */
const char *hn_setting_get(const char *name);

/* The --check driver (check.c): global inputs (random or .npy), shards,
 * runs, gathers outputs and compares them with the reference block. */
typedef struct hn_check_opts {
    int iters;
    uint64_t seed;
    int check;
    const char *load_dir, *save_dir;
    int noverrides;
    const char *const *names;
    const int64_t *values;
    FILE *out; /* report; NULL: quiet */
} hn_check_opts;

typedef struct hn_check_result {
    int checked, passed;
    int64_t left; /* output elements left at the poison, all outputs */
    double worst_rel_l2;
    double median_s;
} hn_check_result;

/* HN_OK when the program ran (see res->passed); HN_ERR_VERIFY, HN_ERR_INVALID
 * or HN_ERR_IO for a bad program or bad input (diag says why); other errors
 * for failed runs (hn_runtime_error says which rank and instruction). */
hn_status_t hn_check_run(hn_runtime *rt, const hn_program *p, const hn_check_opts *o,
                         hn_check_result *res, hn_strbuf *diag);

/* Formats "file:line:col: error: rank R: <instr>: msg". */
void hn_format_fault(hn_strbuf *sb, const hn_program *p, int rank, int instr, const char *msg);

/* ---- the scheduler (lower.c, cost.c; docs/SCHEDULER.md) ---- */

/* Lowers the pipelined statements and stream-parallel loops of `src` for
 * one configuration (world, nstreams, parameter values) into the plain
 * instructions they stand for: a dry run of `src` reads its operands'
 * shapes, the cost model settles every `auto`, and each generated
 * instruction carries its statement's line, column and text. The result
 * passes the static verifier; *out is written only on success. Pure: no
 * device. Diagnostics (file:line:col: error: ...) into diag; the plan
 * chosen for each statement, one line each, into notes (may be NULL). */
hn_status_t hn_sched_lower(const hn_program *src, int world, int nstreams, const int64_t *params,
                           hn_program **out, hn_strbuf *diag, hn_strbuf *notes);
/* The runtime's lowered copy of p for these parameter values, made (and
 * kept for the runtime's life) when needed; p itself when it has nothing
 * to lower. *out NULL with diagnostics when lowering fails. */
hn_status_t hn_runtime_lowered(hn_runtime *rt, const hn_program *p, const int64_t *params,
                               const hn_program **out, hn_strbuf *diag);
/* The lowered copy made before, or p. */
const hn_program *hn_runtime_lowered_of(hn_runtime *rt, const hn_program *p, const int64_t *params);
void hn_runtime_lowered_free(hn_runtime *rt);
/* Between runs: frees what the runtime keeps for p (its lowered copies,
 * their buffers and its own), before p is destroyed. */
void hn_runtime_forget(hn_runtime *rt, const hn_program *p);

/* Timed runs (run_timing.c), for benchmarks: while on, every run records a
 * timing marker on each rank's caller stream before its body is issued and
 * after, and after the run's sync notes the time between them — the
 * device's time for the body, host gaps included. Between runs only. */
void hn_runtime_time_runs(hn_runtime *rt, int on);
/* The slowest rank's body in the last run, seconds; -1 if not timed. */
double hn_runtime_run_seconds(const hn_runtime *rt);
/* The rank's side, on its thread (runtime.c's run_on_rank, rank_fini). */
hn_status_t hn_rank_run_mark(hn_rank *r, int end);
void hn_rank_run_measure(hn_rank *r);
void hn_rank_run_timers_free(hn_rank *r);

/* The communicator a collective goes through: `via auto` (and, where
 * default_auto, `via default`) picks the latency path, NCCL or the p2p
 * rings from crossovers by kind, size, dtype and team size; any other via
 * is kept. count as in hn_coll_args. Deterministic: every member picks
 * the same. */
hn_backend_kind hn_via_resolve(hn_backend_kind via, int default_auto, hn_coll_kind kind, size_t count,
                               hn_dtype dtype, int n);
/* The latency path's algorithm for a collective `via ll` names none of:
 * HN_LL_ONESHOT (1) below the crossover, HN_LL_TWOSHOT (2) from it. */
int hn_via_ll_algo(hn_coll_kind kind, size_t count, hn_dtype dtype, int n);
/* Whether collectives without `via` pick like `via auto` on this backend. */
/* 1 when `via auto` may pick the latency path (HIRNODE_AUTO_LL=1): off
 * until its crossovers are measured on several GPUs. */
int hn_auto_picks_ll(void);
int hn_default_via_auto(const char *device_backend);

#endif
