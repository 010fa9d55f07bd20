/* hirnode runtime API: programs, the runtime (one thread per device), device
 * memory, and runs. Thread safety: a hn_program is immutable once parsed
 * and may be shared by any threads; a hn_runtime serves one caller thread
 * at a time (calls on one runtime must not overlap). */
#ifndef HIRNODE_RUNTIME_H
#define HIRNODE_RUNTIME_H

#include "hirnode.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hn_program hn_program;
typedef struct hn_runtime hn_runtime;
typedef struct hn_graph hn_graph;

/* Parses program text (len bytes). On success *out owns the program. On
 * failure, if diag is not NULL, *diag receives `file:line:col: error: ...`
 * lines (free with hn_string_free). The program is verified statically
 * (names, kinds, dtypes); HN_ERR_VERIFY if that fails. */
hn_status_t hn_program_parse(const char *text, size_t len, const char *filename,
                             hn_program **out, char **diag);
/* Same, reading a file: a regular file of at most HN_PROGRAM_MAX_BYTES.
 * HN_ERR_IO if it is not one or cannot be read (`file: error: ...`). */
#define HN_PROGRAM_MAX_BYTES ((size_t)64 << 20)
hn_status_t hn_program_load(const char *path, hn_program **out, char **diag);
void hn_program_destroy(hn_program *p);
/* Canonical text (what the parser reads back); free with hn_string_free. */
char *hn_program_print(const hn_program *p);
void hn_string_free(char *s);

typedef struct hn_runtime_config {
    int ndev;             /* ranks this process drives, one per device */
    const char *backend;  /* "auto" (default), "cuda" or "host" */
    int nstreams;         /* value of `nstreams` in programs (default 3) */
    double timeout_s;     /* deadline of any wait (default 60) */
    double host_delay_us; /* host backend: random delay before each piece of
                             stream work, up to this (0: off) */
    uint64_t seed;        /* for the random delays */
    int graphs;           /* 1: repeated runs and launches of one configuration
                             (program, parameters, bindings, streams) are
                             captured once and replayed (hn_runtime_capture);
                             default: $HIRNODE_GRAPHS or 0 */
    const int *devices;   /* [ndev]: the device ordinal of each rank (NULL:
                             rank r on device r). Ordinals count the devices
                             the process sees (CUDA_VISIBLE_DEVICES applies:
                             with CUDA_VISIBLE_DEVICES=2,3, ordinal 0 is GPU
                             2). Two ranks may share a device on the host
                             backend (each still emulates its own memory),
                             and on CUDA for the p2p communicator: NCCL and
                             the latency path (ll, whose kernels must all be
                             resident at once) take one rank of a team per
                             device, so a program whose collectives would go
                             through them on such a team is refused when it
                             is prepared, naming the ranks. The runtime
                             copies the array. */
    /* The world: every rank of the program, of which this process drives
     * ndev, ranks rank .. rank+ndev-1. Programs, their dry runs and
     * verification see the whole world; the per-rank arrays of the API
     * (hn_binding.data and .bytes, launch streams) hold this process's
     * ranks, entry i for rank rank+i, and the per-rank calls (alloc,
     * upload, stream_create, ...) take a rank this process drives. */
    int world;              /* ranks of the whole run; 0: ndev (all in this
                               process); default $HIRNODE_WORLD or 0 */
    int rank;               /* the first rank this process drives (0 when
                               world == ndev); default $HIRNODE_RANK or 0 */
    const char *rendezvous; /* a directory every process of the world
                               reaches, needed when world > ndev; default
                               $HIRNODE_RENDEZVOUS or NULL. The caller
                               keeps it. */
} hn_runtime_config;

/* A world across processes (world > ndev; ndev 1: one rank per process,
 * on one machine; the host and CUDA backends): every process creates its
 * runtime with the same world, its own rank, the same rendezvous
 * directory (this user's, not writable by others; rank 0 listens there on
 * a Unix socket, removed once all came), the same backend and settings
 * (compared: a difference is named). Device memory of every rank is
 * mapped at the same address in every process (CUDA: one allocation of
 * $HIRNODE_SHARED_MEM_MIB per rank, made at create; NCCL from an id handed
 * over at the first collective). The contract: every process makes the
 * same sequence of these calls with the same programs and parameters —
 * create, run, run_reference, sync and a query that finds the work done,
 * capture and rebind; each ends together in every process, and returns
 * the same first error of the world there. Launches and replays are each
 * process's own; destroy says goodbye and does not wait for the others (a
 * process still in a call with it then waits out its deadline). A process
 * that dies is named by the others at once (HN_ERR_PEER_LOST from then
 * on: destroy the runtime); one that stops is named at the deadline.
 * A binding may be any memory of its rank's device (an embedder's own
 * allocation, a torch tensor) where only `via nccl` and `via ll` move it:
 * their peers touch only their own buffers. Where a program's
 * communication goes through the peer copies (`via p2p`, also as `via
 * auto` resolves it, and the host backend's collectives), the other
 * processes read and write its buffers themselves, and every binding must
 * then be memory of hn_runtime_alloc or registered (hn_runtime_register;
 * refused otherwise, with the tensor and the statement named: the other
 * processes reach nothing else). Inside a capture the caller makes
 * (torch.cuda.graph), `via p2p` is refused across processes (its device
 * flags would replay stale): ll and nccl are captured as they are.
 *
 * A world across nodes ($HIRNODE_NODES, or torchrun's WORLD_SIZE /
 * LOCAL_WORLD_SIZE, or Slurm's SLURM_NNODES; docs/NODES.md): rank r on
 * node r / (world / nodes), every node of the same size. It meets through
 * a store (its launcher's, or hn_runtime_create_store's), each node on its
 * own as above; rank 0's process then serves a TCP link every process
 * connects to, over which exchanges between nodes, failures and deaths
 * travel (a process whose link ends or falls silent is named by the
 * others). Data between nodes moves through NCCL only: `via p2p` and `via
 * ll` on a team across nodes are refused when the program is prepared,
 * and `via auto` takes NCCL there. Rank 0's destroy waits, within the
 * deadline, for the others to leave the link. */

/* Defaults: 1 rank, the settings' values ($HIRNODE_BACKEND, ...), devices
 * NULL. */
void hn_runtime_config_default(hn_runtime_config *cfg);

/* Starts one thread per rank, the device backend and the communicators. A failed
 * create leaves nothing to destroy (and logs why). HN_ERR_INVALID for an
 * unknown backend name, a backend with fewer devices than ndev (or than an
 * ordinal of cfg->devices needs), a bad count or ordinal, a world below
 * ndev or above 256, ranks rank .. rank+ndev-1 outside the world, a world
 * larger than ndev without a rendezvous (a directory, or its launcher's
 * store: HIRNODE_STORE=host:port, else MASTER_ADDR with MASTER_PORT + 1,
 * which rank 0's process serves while the world meets; HN_ERR_IO when it
 * cannot be served or reached, named), a rendezvous directory that is
 * missing, another user's or writable by anyone. HN_ERR_UNSUPPORTED for
 * several ranks per process in a world across processes, or a backend
 * that cannot share its memory. Across processes also HN_ERR_TIMEOUT (a
 * process never came: named), HN_ERR_MISMATCH (another world size, build
 * or setting: named), HN_ERR_NOMEM (its device memory could not be made
 * or mapped: HIRNODE_SHARED_MEM_MIB). */
hn_status_t hn_runtime_create(const hn_runtime_config *cfg, hn_runtime **out);
/* Like hn_runtime_create, but on failure the reason goes to the caller,
 * not to the log: *diag (when diag is not NULL) receives one line without
 * a source location, e.g. "backend 'cuda' has 1 device, 2 ranks asked"
 * (free with hn_string_free; NULL when there is nothing to say or no memory
 * for it). On success *diag is NULL. */
hn_status_t hn_runtime_create_ex(const hn_runtime_config *cfg, hn_runtime **out, char **diag);
/* A store every process of a world reaches (torch.distributed's, Ray's, a
 * TCP store, a shared file system): how processes a launcher started meet
 * without a directory named in advance. set publishes value (a
 * NUL-terminated string) under key; get waits up to timeout_s for key's
 * value and copies it, NUL-terminated, into value (cap bytes). Each
 * returns 0 on success. Called on the creating thread only. */
typedef struct hn_world_store {
    int (*set)(void *ctx, const char *key, const char *value);
    int (*get)(void *ctx, const char *key, char *value, size_t cap, double timeout_s);
    void *ctx;
} hn_world_store;
/* Like hn_runtime_create_ex, for one process of a world (cfg->world >
 * cfg->ndev) whose cfg->rendezvous is NULL: rank 0 makes a fresh directory
 * (0700, under $TMPDIR, else /tmp), publishes its path through the store
 * under "hirnode/rendezvous/<world>/<k>" — the k-th such runtime of the
 * process, so every process makes its runtimes in the same order — and
 * the others read it (within cfg->timeout_s); the world then meets there.
 * Rank 0's runtime removes the directory when destroyed. Otherwise
 * (rendezvous given, or every rank in this process) the store is unused. */
hn_status_t hn_runtime_create_store(const hn_runtime_config *cfg, const hn_world_store *store, hn_runtime **out,
                                    char **diag);
void hn_runtime_destroy(hn_runtime *rt);
/* The ranks this runtime drives (ndev): the length of every per-rank
 * array of the API (0 for rt NULL). Any thread. */
int hn_runtime_size(const hn_runtime *rt);
/* The ranks of the whole run (world; hn_runtime_size in one process), and
 * the first rank this runtime drives (0 in one process); for rt NULL 0 and
 * -1. Any thread. */
int hn_runtime_world(const hn_runtime *rt);
int hn_runtime_first_rank(const hn_runtime *rt);
/* The device backend's name ("cuda", "host"; "none" for rt NULL), for
 * messages. Any thread. */
const char *hn_runtime_backend(const hn_runtime *rt);
/* What the backend's memory and streams are (hn_device_kind): test this,
 * not the backend's name, to place tensors or pick streams
 * (HN_DEVICE_KIND_NONE for rt NULL). Any thread. */
hn_device_kind hn_runtime_device_kind(const hn_runtime *rt);
/* The device ordinal rank `rank` runs on (hn_runtime_config.devices), or
 * -1 for a rank out of range (or rt NULL). Any thread. */
int hn_runtime_device(const hn_runtime *rt, int rank);

/* Device memory of one rank (on its device, hn_runtime_device), and
 * synchronous copies to and from it. The runtime remembers each block it
 * allocated until hn_runtime_free: a binding that points into one is also
 * checked against the block's end (see hn_binding). */
hn_status_t hn_runtime_alloc(hn_runtime *rt, int rank, size_t bytes, void **ptr);
void hn_runtime_free(hn_runtime *rt, int rank, void *ptr);
/* Memory of rank `rank`'s device that the caller allocated (torch's
 * caching allocator, cudaMalloc), handed to the other processes of a
 * world across processes, so that the peer copies (`via p2p`) reach it:
 * the whole allocation ptr points into (bytes from ptr must lie in it) is
 * opened by every other process (CUDA IPC), or, for memory cuMem mapped
 * (torch's expandable segments), the allocations that hold the bytes from
 * ptr, each handed over as a file descriptor the others take with
 * pidfd_getfd (which needs the permission to trace this process: the
 * kernel's Yama setting may forbid it) and map one after another as here;
 * it stays open until the
 * runtime is destroyed, or until the same rank registers an allocation
 * that overlaps it (the old one was freed: register anew after a free).
 * Then the old mappings are closed and every prepared configuration and
 * graph is forgotten in every process (a graph captured before refuses
 * to replay, named). A binding inside a registered allocation is then
 * taken everywhere (and bounded by its end). Collective: every process
 * calls it, each for its own rank, in the same order; registering the
 * same allocation again (same place, size and handle) costs two exchanges
 * and opens nothing. The table changes only when every process mapped
 * every other's allocation. In one process it only checks its arguments
 * (every rank's memory is reached as it is). A block of hn_runtime_alloc
 * registers on any backend and opens nothing: it is at the same address
 * in every process already. HN_ERR_INVALID (named, in
 * hn_runtime_error, in every process: a bad argument too) for memory the
 * backend cannot hand over (CUDA: not of this rank's device, or cuMem
 * memory made without file descriptors to hand over, or spanning more
 * than 60 such allocations); HN_ERR_DEVICE when a process could not map
 * another's (its log says why); HN_ERR_UNSUPPORTED on a backend that
 * cannot share a process's memory (the host backend). */
hn_status_t hn_runtime_register(hn_runtime *rt, int rank, void *ptr, size_t bytes);
hn_status_t hn_runtime_upload(hn_runtime *rt, int rank, void *dst, const void *src, size_t n);
hn_status_t hn_runtime_download(hn_runtime *rt, int rank, void *dst, const void *src, size_t n);
/* Free and total device memory of one rank. */
hn_status_t hn_runtime_mem_info(hn_runtime *rt, int rank, size_t *free_bytes, size_t *total_bytes);

/* The IR's limit on a tensor's dimensions. */
#define HN_MAX_DIMS 8

/* A tensor for each input and output, by name: one device pointer per
 * rank, contiguous, of the declared per-rank shape (hn_program_io says
 * which, and its bytes), and the bytes the caller vouches for behind it.
 *
 * Checked for every rank before anything is issued (runs, launches,
 * captures, rebinds), each a HN_ERR_INVALID whose hn_runtime_error names
 * the tensor, the rank, the bytes needed and given, e.g.
 *   "binding 'X' on rank 1: 4096 bytes needed (f32[32, 32]), 32 given":
 * - data or bytes NULL;
 * - a NULL pointer (allowed only for a tensor of no elements);
 * - bytes[r] smaller than the tensor needs at this configuration
 *   (parameter overrides, world, nstreams);
 * - a pointer not aligned to the element size (4 bytes for f32, 2 for
 *   bf16 and f16, 8 for i64);
 * - a pointer inside a block from hn_runtime_alloc whose end comes before
 *   the tensor's, whatever bytes[r] says (the runtime knows its blocks).
 * Any other device memory of the rank's device may be bound: cudaMalloc,
 * cudaMallocAsync pools (the memory must stay allocated while the work
 * runs: not freed to the pool before the launch's stream passed it),
 * another library's (PyTorch's caching allocator): it is taken on the
 * caller's word (bytes). The check costs a few compares per binding and
 * rank: the needed sizes are worked out once per configuration. */
typedef struct hn_binding {
    const char *name;
    void *const *data;   /* [ndev]: the tensor of each rank, on its device */
    const size_t *bytes; /* [ndev]: bytes usable from data[r]; required */
} hn_binding;

typedef struct hn_run_args {
    int nparams;                    /* parameter overrides */
    const char *const *param_names;
    const int64_t *param_values;
    int nbindings;
    const hn_binding *bindings;     /* every input and output (others are ignored) */
} hn_run_args;

/* One input or output of a program at one configuration, as rank `rank`
 * holds it (the shape a binding must have there). */
typedef struct hn_io_info {
    const char *name;    /* points into the program (lives as long as it) */
    int is_output;       /* 0: an input */
    hn_dtype_code dtype;
    int ndim;
    int64_t shape[HN_MAX_DIMS]; /* [ndim], the rank's shard */
    size_t bytes;        /* what a binding needs on that rank */
    int shard_axis;      /* the axis the ranks' shards split, -1: replicated */
} hn_io_info;

/* The inputs, then the outputs, of p at a configuration: `world` ranks,
 * `nstreams` (the value of `nstreams` in the program, 1..16), the
 * parameter overrides of args (args NULL: the defaults; its bindings are
 * ignored), as rank `rank` (0 .. world-1) holds them. Writes the first
 * min(cap, count) of them into out[] (out may be NULL when cap is 0) and
 * their count into *n, also when cap is smaller: ask with cap 0 first.
 * HN_ERR_INVALID for a bad argument (world < 1, rank out of range, an
 * unknown parameter name), HN_ERR_VERIFY for a parameter or shape that
 * does not evaluate (or overflows); then *diag (when diag is not NULL)
 * says why (free with hn_string_free); NULL on success. Thread-safe: it
 * only reads p; no runtime is needed. */
hn_status_t hn_program_io(const hn_program *p, int world, int nstreams, const hn_run_args *args, int rank,
                          hn_io_info *out, int cap, int *n, char **diag);

/* Verifies the program for this configuration (cached), then runs it on
 * every rank and waits for the end. On failure hn_runtime_error() says which
 * rank and instruction failed; the runtime stays usable. */
hn_status_t hn_runtime_run(hn_runtime *rt, const hn_program *p, const hn_run_args *args);
/* Text of the last failure ("" if none); owned by the runtime. */
const char *hn_runtime_error(const hn_runtime *rt);

/* ---- Launches on the caller's streams (servers) ----
 *
 * hn_runtime_launch issues p once on every rank and returns as soon as
 * every rank has issued it (not finished it): streams[r] (one per rank,
 * the backend's own handle: a cudaStream_t on CUDA, a stream from
 * hn_runtime_stream_create on the host backend; NULL, or streams == NULL:
 * the runtime's own) is the program's current_stream on rank r. It is
 * ordered with that stream by stream events: work the caller enqueued on
 * it before is seen by the program, work enqueued on it after waits for
 * all of the program's streams; launches of one rank run one after
 * another, also on different streams. The caller's buffers (bindings) may
 * change from launch to launch (same shapes); they must stay valid until
 * the launch's work is done. The first launch of a configuration
 * (parameters × world × streams) verifies and prepares it (a few are
 * remembered); it first waits for the launches in flight, since it may
 * allocate. Back-to-back launches need no host sync between them.
 *
 * Errors of work that runs asynchronously are reported by the next call
 * that collects the launches in flight: hn_runtime_sync, hn_runtime_query
 * once done, a launch of another program or any other runtime call that
 * needs the devices idle (run, alloc/free... wait for them) — the next
 * launch after a failure returns that failure without issuing anything.
 * Thread safety: like every call on the runtime, from one thread at a
 * time. While tracing, a launch is synchronous. */
hn_status_t hn_runtime_launch(hn_runtime *rt, const hn_program *p, const hn_run_args *args, void *const *streams);
/* Blocks until the work of every launch issued so far is done, within the
 * runtime's deadline; HN_OK, or the first failure of those launches
 * (hn_runtime_error names rank and instruction). The runtime is usable
 * again afterwards (as after a failed run). */
hn_status_t hn_runtime_sync(hn_runtime *rt);
/* Never blocks on the devices: HN_ERR_BUSY while launched work runs;
 * otherwise what hn_runtime_sync would return (it collects the launches). */
hn_status_t hn_runtime_query(hn_runtime *rt);
/* A stream of rank `rank`'s device made by the backend, for embedders
 * without their own (CUDA: a non-blocking cudaStream_t; host backend: an
 * emulated stream). The runtime owns it: hn_runtime_stream_destroy, or
 * hn_runtime_destroy, frees it. */
hn_status_t hn_runtime_stream_create(hn_runtime *rt, int rank, void **stream);
void hn_runtime_stream_destroy(hn_runtime *rt, int rank, void *stream);
/* Frees what the runtime keeps for a program (its cached buffers, its
 * lowered copies, its prepared configurations): call it before destroying
 * a program that was run, when the runtime lives on. Between runs. Cached
 * buffers of programs not being prepared also give way by themselves when
 * a preparation or hn_runtime_alloc runs out of device memory. */
void hn_runtime_forget(hn_runtime *rt, const hn_program *p);

/* ---- Graphs: capture once, replay every step (servers) ----
 *
 * hn_runtime_capture records p for one configuration — its parameters, the
 * bindings' buffers and the streams given (as for a launch) — without
 * running it: one graph per rank (CUDA: stream capture through streams[r]
 * into a CUDA graph, NCCL, cuBLASLt and the p2p rings inside; host backend:
 * the issued work recorded). hn_runtime_replay then issues all of it on
 * every rank with one call (CUDA: one cudaGraphLaunch per rank, all at
 * once: rank 0's from the caller's thread, the others' from their rank
 * threads; HIRNODE_REPLAY picks another path), like a launch: it returns
 * once issued, is ordered with
 * streams[r] (NULL: the streams of the capture may differ; any stream of
 * the rank's device) by the same rules, and its errors come back through
 * hn_runtime_sync / hn_runtime_query. Replays compute what eager launches
 * compute, bit for bit; they read and write the buffers bound at capture
 * (change their contents between replays; new pointers of the same sizes
 * through hn_runtime_graph_rebind; the caller keeps them alive while the
 * graph may replay). Replays of one graph run one
 * after another, back to back with no host sync between them; an eager
 * launch of the program after a replay, or a replay after an eager launch
 * of it, first waits for the work in flight (the two never overlap).
 * A graph becomes unusable (replay: HN_ERR_INVALID, hn_runtime_error says
 * why) after any failed run or launch of the runtime, after
 * hn_runtime_forget of its program, or when memory pressure gave its
 * program's cached buffers back; destroy it and capture again. Not while
 * tracing or with injected faults (HN_ERR_UNSUPPORTED); replays are not
 * traced. A program with `host_sync` cannot be captured (HN_ERR_UNSUPPORTED,
 * the instruction named). The setting graphs = 1 does all of this by itself:
 * a configuration is captured the second time it runs. The caller owns the
 * graph: hn_runtime_graph_destroy (between runs) frees it; hn_runtime_destroy
 * frees those left. Thread safety: like every call on the runtime. */
hn_status_t hn_runtime_capture(hn_runtime *rt, const hn_program *p, const hn_run_args *args, void *const *streams,
                               hn_graph **out);
hn_status_t hn_runtime_replay(hn_runtime *rt, hn_graph *g, void *const *streams);
void hn_runtime_graph_destroy(hn_runtime *rt, hn_graph *g);

/* Rebinds a captured graph to new buffers of the same sizes without a new
 * capture: from the next replay on, g reads and writes the buffers of
 * args. args holds the same parameter overrides as at capture (resolving
 * to the same values) and every binding again, checked as for a launch
 * (hn_binding); the program captured must still live. The launches in
 * flight (g's replays among them) are finished first; the buffers bound
 * before are free for the caller once rebind returns. How: in place, with
 * no capture, once g has learned where its work holds the buffers — the
 * pointers in each node's parameters (CUDA: kernel arguments, copy and
 * memset addresses; host backend: the recorded work's arguments) are
 * moved to the same offsets of the new buffers. Otherwise the program is
 * captured again on every rank into a fresh backend graph, which then
 * updates the one g launches in place (CUDA: cudaGraphExecUpdate) and
 * teaches g, when every difference between the two captures is such a
 * pointer. So the first rebind captures again and later ones move
 * pointers; a rebind captures again when a buffer moves to another
 * alignment (mod 256 bytes) or (CUDA) to another kind of memory (type,
 * device, pool), when buffers overlap otherwise than before, or when a
 * buffer moves that the last learning did not see move
 * (hn_runtime_graph_in_place says which it did). Across processes every
 * process does the same, in place only where all can. Either way replays keep
 * their launch cost and g its identity.
 * HN_ERR_INVALID (hn_runtime_error says why) for other parameters, a
 * binding that does not fit (the tensor and rank named), or a graph that
 * is unusable; HN_ERR_UNSUPPORTED when the backend cannot update a graph
 * in place (a backend without the hook, or CUDA finding the new capture's
 * structure different — kernels picked for other pointer alignments can
 * do that): g is then unusable, capture again. Not while tracing or with
 * injected faults (HN_ERR_UNSUPPORTED, g unchanged). Thread safety: like
 * every call on the runtime. */
hn_status_t hn_runtime_graph_rebind(hn_runtime *rt, hn_graph *g, const hn_run_args *args);
/* 1 when g's last rebind moved its pointers in place with no capture; 0
 * when it captured again or failed, or g was never rebound. */
int hn_runtime_graph_in_place(const hn_graph *g);

/* Tracing (docs/TRACING.md). From hn_runtime_trace_start to
 * hn_runtime_trace_stop, every run of rt is recorded (not the reference
 * runs of a --check): per rank, its thread's issue of each instruction
 * (host clock), and each instruction's work on its stream, timed by
 * device markers that exist only while tracing (CUDA events with timing;
 * on the host backend, the time its stream worker reaches them), with the
 * source line and text, and for communications the bytes, team or peers
 * and communicator. The recording stays in memory; stop writes it to
 * `path` as Chrome trace-event JSON (Perfetto, chrome://tracing: a process
 * per rank, a track per stream and p2p copy lane) and frees it. Without a
 * trace, a run pays one predictable branch per instruction.
 * start opens (creates or truncates) `path` at once: HN_ERR_IO if it
 * cannot, HN_ERR_INVALID if a trace is running already; hn_runtime_error
 * says which (nothing is logged: the caller says it). The caller keeps
 * ownership of `path` (it is copied). Thread safety as for every call on
 * the runtime: between runs, from one caller thread at a time.
 * hn_runtime_destroy stops (and writes) a trace still running. */
hn_status_t hn_runtime_trace_start(hn_runtime *rt, const char *path);
/* Writes and closes the trace; HN_ERR_IO if writing failed, HN_ERR_INVALID
 * if no trace runs. The recording is freed in every case. */
hn_status_t hn_runtime_trace_stop(hn_runtime *rt);

#ifdef __cplusplus
}
#endif
#endif
