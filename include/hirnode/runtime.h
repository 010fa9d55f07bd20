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
    int ndev;             /* ranks, one per device */
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
} hn_runtime_config;

void hn_runtime_config_default(hn_runtime_config *cfg);

/* Starts one thread per rank and the device and comm backends. A failed
 * create leaves nothing to destroy. HN_ERR_INVALID for a backend with fewer
 * devices than ndev, or an unknown backend name. */
hn_status_t hn_runtime_create(const hn_runtime_config *cfg, hn_runtime **out);
void hn_runtime_destroy(hn_runtime *rt);
int hn_runtime_size(const hn_runtime *rt);
const char *hn_runtime_backend(const hn_runtime *rt);

/* Device memory of one rank, and synchronous copies to and from it. */
hn_status_t hn_runtime_alloc(hn_runtime *rt, int rank, size_t bytes, void **ptr);
void hn_runtime_free(hn_runtime *rt, int rank, void *ptr);
hn_status_t hn_runtime_upload(hn_runtime *rt, int rank, void *dst, const void *src, size_t n);
hn_status_t hn_runtime_download(hn_runtime *rt, int rank, void *dst, const void *src, size_t n);
/* Free and total device memory of one rank. */
hn_status_t hn_runtime_mem_info(hn_runtime *rt, int rank, size_t *free_bytes, size_t *total_bytes);

/* A tensor for each input and output, by name: one device pointer per rank,
 * contiguous, of the declared per-rank shape. */
typedef struct hn_binding {
    const char *name;
    void *const *data; /* [ndev] */
} hn_binding;

typedef struct hn_run_args {
    int nparams;                    /* parameter overrides */
    const char *const *param_names;
    const int64_t *param_values;
    int nbindings;
    const hn_binding *bindings;     /* every input and output */
} hn_run_args;

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
 * (change their contents between replays, not the pointers; the caller
 * keeps them alive while the graph lives). Replays of one graph run one
 * after another, back to back with no host sync between them.
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
 * cannot, HN_ERR_INVALID if a trace is running already. The caller keeps
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
