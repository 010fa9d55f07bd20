/* Device layer: a table of function pointers per backend, shaped after
 * CUDA's model (memory, streams, events, cross-device waits, copies), and
 * the compute-op table each backend provides beside it. */
#ifndef HN_DEVICE_H
#define HN_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "../base/collective.h"
#include "../base/dtype.h"
#include "../base/shm.h"
#include "../base/tensor.h"
#include "../base/util.h"

typedef struct hn_dstream hn_dstream; /* a backend stream */
typedef struct hn_devent hn_devent;   /* a backend event */
typedef struct hn_dtimer hn_dtimer;   /* a backend timing marker (tracing) */
typedef struct hn_dgraph hn_dgraph;   /* a captured graph of stream work, ready to launch */

/* A binding moved by a rebind (capture_update, graph_repoint): what lay in
 * [from, from + bytes] now lies at the same offset from `to`. */
typedef struct hn_moved {
    uintptr_t from, to;
    size_t bytes;
} hn_moved;

/* Where asynchronous failures are reported: the runtime's error slot. */
typedef struct hn_fault_sink {
    void (*report)(void *ctx, int rank, int instr, hn_status_t st, const char *msg);
    void *ctx;
    const int *abort_flag; /* non-zero once any rank failed */
    double timeout_s;      /* deadline of any blocking wait */
    /* The world's doorbell (hn_world_bell): rung by every flag write and
     * latency-path push of the host backend, so that their waiters wake
     * wherever they run, in this process or another one mapping the
     * world. Not owned. NULL: a bell of this process's own. */
    hn_doorbell *bell;
} hn_fault_sink;

/* While a run is traced, its origins carry the rank's recorder: a
 * communicator that issues part of an instruction on a side stream of its
 * own (the p2p copy lanes) marks there where each piece of that work begins
 * (end = 0) and ends (end = 1), so the lane gets a track of its own in the
 * trace. Called only while issuing, on the issuing rank's thread; tracing
 * failures are the recorder's to note, never the run's. */
typedef struct hn_trace_hook {
    void (*lane)(void *ctx, hn_dstream *s, int lane, size_t bytes, int end);
    void *ctx;
} hn_trace_hook;

/* While a program is captured into a graph (hn_runtime_capture), its
 * origins carry the graph's replay state on the issuing rank: `ep` is four
 * words of device memory of that rank: ep[0] the graph's epoch (0 at the
 * first replay, raised by HN_GRAPH_EPOCH_SPAN at the end of each replay
 * by the graph itself), ep[1] its abort word (non-zero: device-side waits
 * of the graph give up), ep[2] always 0 and ep[3] the abort word again —
 * so ep + 2 is a base for relative flags that adds nothing (absolute
 * values with the graph's abort). Work whose values must change from
 * replay to replay (sequence numbers, barrier values) reads them relative
 * to ep[0] when it runs, never as constants fixed at capture. `id` tells
 * graphs apart (never 0). */
typedef struct hn_graph_ctx {
    uint64_t id;
    uint32_t *ep;
    /* A graph captured again to rebind its buffers (hn_runtime_graph_rebind)
     * gets a new id (sequences keyed by the id start afresh); `prev` is the
     * id it had, whose state (the p2p flags of its own) the new capture
     * takes over; 0 for a first capture. */
    uint64_t prev;
} hn_graph_ctx;

/* What one replay raises a graph's epoch by: a capture must take fewer
 * values than this from any sequence read relative to the epoch (the CPU
 * communicator's rendezvous numbers; the p2p communicator's flag values,
 * which it checks when the capture ends). */
#define HN_GRAPH_EPOCH_SPAN 65536u

/* Which rank and instruction issued a piece of asynchronous work. */
typedef struct hn_origin {
    const hn_fault_sink *sink;
    int rank;
    int instr;
    const hn_trace_hook *trace; /* NULL unless the run is traced */
    const hn_graph_ctx *graph;  /* NULL unless the work is being captured */
} hn_origin;

/* Marks the start or end of lane work of the origin's instruction on s
 * (nothing when the run is not traced). */
static inline void hn_origin_lane_mark(const hn_origin *o, hn_dstream *s, int lane, size_t bytes, int end)
{
    if (o != NULL && o->trace != NULL)
        o->trace->lane(o->trace->ctx, s, lane, bytes, end);
}

void hn_origin_fail(const hn_origin *o, hn_status_t st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline int hn_origin_aborted(const hn_origin *o)
{
    return o->sink != NULL && o->sink->abort_flag != NULL &&
           __atomic_load_n(o->sink->abort_flag, __ATOMIC_ACQUIRE);
}

typedef hn_status_t (*hn_host_fn)(void *arg, const hn_origin *origin);

typedef struct hn_device_setup {
    int ndev;
    double host_delay_us; /* host backend: max random delay per closure */
    uint64_t seed;
    const hn_fault_sink *sink;
    size_t host_mem_bytes; /* host backend: memory of each device (0: default) */
    /* [ndev]: the backend's device ordinal of each device index (NULL: index
     * i is ordinal i). The index (`dev` in the calls below) stays the rank:
     * per-rank state is kept by index; CUDA calls go to the ordinal. The
     * backend copies the array. */
    const int *ordinals;
    /* Process mode: devices first .. first + ndev - 1 are this process's
     * (the ones below are other processes' ranks: never named in calls
     * here); `dev` in the calls below is the rank. arena (NULL: the
     * backend's own allocations) gives each of this process's devices its
     * memory, arena[i] for device first + i, arena_bytes each — memory
     * every process of the world maps at the same address (hn_share_ops),
     * so a pointer into any rank's device memory means the same
     * everywhere. */
    int first;
    void *const *arena;
    size_t arena_bytes;
} hn_device_setup;

typedef struct hn_compute_ops hn_compute_ops;

/* What a world across processes shares of a backend's device memory
 * (src/world/rendezvous.c): each rank's device memory is one piece that
 * its process makes and hands to the others as a file descriptor, and
 * every process maps every rank's piece at the same address, inside a
 * range reserved at the same address in every process. ord: the device
 * ordinal of the calling process's rank. Any thread, before and after
 * the backend's init. */
typedef struct hn_share_ops {
    /* bytes of addresses reserved at `at` exactly (NULL: anywhere): their
     * start, or NULL (taken, or no room) */
    void *(*reserve)(int ord, void *at, size_t bytes);
    void (*unreserve)(int ord, void *p, size_t bytes);
    /* this device's memory of bytes (zeroed, whole 2 MiB): a descriptor
     * another process can map, or -1 (errno, or the backend's log, says
     * why); *handle keeps what unmake releases (the memory lives on while
     * mapped anywhere) */
    int (*make)(int ord, size_t bytes, uint64_t *handle);
    void (*unmake)(int ord, uint64_t handle);
    /* fd's memory at p (reserved here), readable and writable by this
     * process's device and host where the backend allows; unmap undoes */
    hn_status_t (*map)(int ord, int fd, void *p, size_t bytes);
    void (*unmap)(int ord, void *p, size_t bytes);
    /* how much of a device's memory a world of `world` processes shares
     * when HIRNODE_SHARED_MEM_MIB does not say (host_mem_bytes: the host
     * backend's setting, 0: its default) */
    size_t (*default_bytes)(int world, size_t host_mem_bytes);
    /* Caller memory handed to the other processes (hn_runtime_register),
     * on the thread of the device's rank; NULL where the backend cannot
     * (the host backend: a process's heap is its own). ipc_export: the
     * allocation p points into, or the allocations one after another that
     * hold p's `need` bytes — and those of [lo, hi) as well where they are
     * the same run of allocations (what earlier registrations of the rank
     * that overlap p's bytes covered; lo = hi: none) — (their start, their
     * bytes), and a handle of
     * HN_IPC_HANDLE_BYTES another process opens, whose first
     * HN_IPC_KEY_BYTES say which memory it is (two exports of the same
     * memory give the same key; the rest is how to open it now);
     * HN_ERR_INVALID (with why) for memory the backend cannot hand over.
     * ipc_done, once every other process opened it or gave up: what the
     * export held open for them goes. ipc_open maps another process's
     * handle here, the allocations one after another as there (at an
     * address of the driver's choosing: the peers' copies translate,
     * hn_comm_setup.peer_addr); ipc_close undoes. */
    hn_status_t (*ipc_export)(int ord, const void *p, size_t need, uintptr_t lo, uintptr_t hi, void **base,
                              size_t *bytes, void *handle, char *why, size_t len);
    void (*ipc_done)(int ord, void *handle);
    hn_status_t (*ipc_open)(int ord, const void *handle, void **local);
    void (*ipc_close)(int ord, void *local);
} hn_share_ops;

#define HN_IPC_KEY_BYTES 1024
#define HN_IPC_HANDLE_BYTES 1536

typedef struct hn_device_ops {
    /* Its name: what a user types (--backend, HIRNODE_BACKEND), found by
     * hn_device_find, and what messages print. The layers above never
     * recognise a backend by it: they read the fields below. */
    const char *name;
    /* The name of its communicator: the one collectives without `via`
     * take, and the one `via nccl` takes (NCCL on CUDA; the CPU emulation
     * of its collectives on the host backend). */
    const char *comm;
    /* What its memory and streams are: code written for one kind of
     * device (the latency path's kernels, comm/ll) is picked by it, and
     * the API tells embedders (hn_runtime_device_kind). */
    hn_device_kind kind;
    /* 1: its devices are emulated on the CPU — any number of them, and a
     * device of its own for every rank even where ranks share an ordinal
     * (no limit of ranks per device applies); no GPU model (the backend's
     * name stands for it: no profile file of its own), no driver. `auto`
     * takes it only when no other backend has the devices. */
    int emulated;
    /* 1: collectives without `via` pick like `via auto` (unless
     * HIRNODE_DEFAULT_VIA=nccl); 0: they stay on its communicator. */
    int default_via_auto;
    /* The environment variable that restricts the devices it sees and
     * renumbers its ordinals ("CUDA_VISIBLE_DEVICES"), named in messages
     * about ordinals; NULL when none does. */
    const char *visible_env;
    /* How many devices this machine has for the backend (0: none). */
    int (*device_count)(void);
    /* What device dev is, for the machine profile: its model ("NVIDIA
     * H200") and the CUDA version its driver supports, each written only
     * when known. Any thread. NULL (the host backend): the backend's name
     * is the model. */
    void (*describe)(int dev, char *model, size_t n, char *cuda, size_t cn);
    hn_status_t (*init)(const hn_device_setup *setup, void **ctx);
    void (*fini)(void *ctx);
    /* Called first on each rank thread (cudaSetDevice, peer access), and
     * last, after everything of that device is destroyed. */
    hn_status_t (*thread_init)(void *ctx, int dev);
    void (*thread_fini)(void *ctx, int dev);
    hn_status_t (*mem_alloc)(void *ctx, int dev, size_t bytes, void **ptr);
    void (*mem_free)(void *ctx, int dev, void *ptr);
    /* Synchronous copies between host memory and a device, for I/O. */
    hn_status_t (*copy_to_device)(void *ctx, int dev, void *dst, const void *src, size_t n);
    hn_status_t (*copy_to_host)(void *ctx, int dev, void *dst, const void *src, size_t n);
    hn_status_t (*stream_create)(void *ctx, int dev, hn_dstream **s);
    void (*stream_destroy)(hn_dstream *s);
    /* Blocks the calling host thread until all work issued so far is done. */
    hn_status_t (*stream_sync)(hn_dstream *s);
    /* HN_OK when every piece of work issued to s is done, HN_ERR_BUSY while
     * some runs; another error if the stream failed. Never blocks. */
    hn_status_t (*stream_query)(hn_dstream *s);
    /* The backend's own handle of a stream (CUDA: its cudaStream_t; host:
     * the stream itself), what embedders pass to launches. */
    void *(*stream_native)(hn_dstream *s);
    /* A handle for a stream an embedder made (`native`, of device dev):
     * work issued on it runs on that stream; per-stream resources (the
     * cuBLASLt workspace) are borrowed from `like`, which must not run at
     * the same time. stream_release frees the handle, not the stream. */
    hn_status_t (*stream_adopt)(void *ctx, int dev, void *native, hn_dstream *like, hn_dstream **out);
    void (*stream_release)(hn_dstream *s);
    /* 1 while s is being captured into a graph (the runtime's capture or
     * an embedder's, such as torch.cuda.graph): its work does not run now. */
    int (*stream_capturing)(hn_dstream *s);
    /* The same for a stream an embedder hands a launch (its native
     * handle), asked on the caller's thread before anything is issued (on
     * the host backend the native handle is the stream, and a capture of
     * the embedder's one begun on it with capture_begin: the tests');
     * NULL where embedders have no captures of their own. */
    int (*native_capturing)(void *native);
    /* Ties arg to the embedder's capture going on on `native` (the stream
     * a launch was handed): release(arg) runs once the graph that capture
     * makes, and every instance and launch of it, is gone (or the capture
     * failed) — on any thread, maybe the backend's own, never from inside
     * a call of this table; it must not call the backend. HN_ERR_INVALID
     * when `native` is not being captured; then release never runs. NULL
     * where embedders have no captures of their own. */
    hn_status_t (*native_capture_keep)(void *native, void (*release)(void *arg), void *arg);
    hn_status_t (*event_create)(void *ctx, int dev, hn_devent **e);
    void (*event_destroy)(hn_devent *e);
    hn_status_t (*event_record)(hn_devent *e, hn_dstream *s);
    /* HN_OK when the work before the event's last record is done (or it
     * was never recorded), HN_ERR_BUSY while it runs. Never blocks, never
     * touches the stream it was recorded on (which may be gone since). */
    hn_status_t (*event_query)(hn_devent *e);
    /* Later work on s waits for the event's last record (any device). */
    hn_status_t (*stream_wait_event)(hn_dstream *s, hn_devent *e, const hn_origin *o);
    /* Byte copy between any two device buffers (peers included). */
    hn_status_t (*memcpy_async)(void *dst, const void *src, size_t n, hn_dstream *s,
                                const hn_origin *o);
    /* Stream memory operations on 32-bit flags in device memory, for
     * readiness between devices without the host: write_flag stores `value`
     * at `addr` (any device's memory, peers included) after all prior work
     * of s; wait_flag makes later work of s wait until the flag at `addr`
     * (this device's memory) reaches `value`: (int32_t)(*addr - value) >= 0. */
    hn_status_t (*stream_write_flag)(hn_dstream *s, uint32_t *addr, uint32_t value, const hn_origin *o);
    hn_status_t (*stream_wait_flag)(hn_dstream *s, const uint32_t *addr, uint32_t value, const hn_origin *o);
    /* Relative flags, for captured graphs (hn_graph_ctx): write_flag_rel
     * stores value + base[0] (base: memory of s's device, read when the
     * write runs); wait_flag_rel waits until the flag reaches value +
     * base[0] (wrap-safe), or base[1] is raised; add_u32 adds `value` to
     * *addr (memory of s's device) in stream order. */
    hn_status_t (*stream_write_flag_rel)(hn_dstream *s, uint32_t *addr, uint32_t value, const uint32_t *base,
                                         const hn_origin *o);
    hn_status_t (*stream_wait_flag_rel)(hn_dstream *s, const uint32_t *addr, uint32_t value, const uint32_t *base,
                                        const hn_origin *o);
    hn_status_t (*stream_add_u32)(hn_dstream *s, uint32_t *addr, uint32_t value, const hn_origin *o);
    /* Graphs. capture_begin: from here, work issued on s (and on every
     * stream that waits for an event recorded by captured work) is captured
     * instead of run; capture_end (on s, once every such stream has been
     * joined back into s through events) makes the graph, ready to launch.
     * A captured wait on an event recorded outside the capture is an error.
     * graph_launch runs the whole graph after the work of s so far; later
     * work of s waits for all of it. Launches of one graph must not run at
     * the same time (launch them on one stream, or order them). Captured
     * host work keeps its argument until graph_destroy releases it.
     * graph_destroy: after its launches are done. */
    hn_status_t (*capture_begin)(hn_dstream *s);
    hn_status_t (*capture_end)(hn_dstream *s, hn_dgraph **g);
    hn_status_t (*graph_launch)(hn_dgraph *g, hn_dstream *s);
    void (*graph_destroy)(hn_dgraph *g);
    /* Ends the capture begun on s like capture_end, but instead of making
     * a graph, puts what was captured into g (made by capture_end from a
     * capture of the same work with other arguments: other buffers): g's
     * later launches run the new capture. None of g's launches may be in
     * flight. The capture is consumed in every case. HN_ERR_UNSUPPORTED
     * when its structure differs from g's (other kinds of work, streams or
     * events: capture anew), another error when the capture failed; g may
     * then hold neither capture whole and must not be launched again.
     * NULL where a backend cannot update a graph in place.
     * m (nm bindings, or NULL): how the new capture's buffers moved from
     * g's; the backend then learns from the two captures which words of
     * g's work are pointers into them (repoint.h), for graph_repoint. */
    hn_status_t (*capture_update)(hn_dstream *s, hn_dgraph *g, const hn_moved *m, int nm);
    /* Moves g's pointers into the bindings by m (the same bindings, in the
     * same order, as the last capture_update that learned), in place with
     * no capture: HN_OK; HN_ERR_UNSUPPORTED (nothing changed) when g has
     * not learned them, or m moves them in a way not learned (capture
     * again, with m, to learn it); another error when the backend failed
     * (g holds part of the move: capture again). check: only whether it
     * can (HN_OK or HN_ERR_UNSUPPORTED), nothing changed. None of g's
     * launches in flight; any thread. NULL where a backend cannot. */
    hn_status_t (*graph_repoint)(hn_dgraph *g, const hn_moved *m, int nm, int check);
    /* Runs fn(arg) in stream order; release(arg) afterwards (may be NULL).
     * The host backend runs compute and emulated communication this way. */
    hn_status_t (*launch_host)(hn_dstream *s, hn_host_fn fn, void *arg, void (*release)(void *),
                               const hn_origin *o);
    /* Drops work not yet started after an abort; streams stay usable. */
    void (*recover)(void *ctx);
    /* HN_OK, or HN_ERR_DEVICE_LOST once the device's context is lost for
     * good (a sticky error: an illegal address, a trap); `why` says what
     * was seen. */
    hn_status_t (*health)(void *ctx, int dev, char *why, size_t n);
    /* Free and total memory of a device (for out-of-memory messages). */
    hn_status_t (*mem_info)(void *ctx, int dev, size_t *free_bytes, size_t *total_bytes);
    /* Fault injection (HIRNODE_FAULT): work on s that fails when it runs,
     * after the work before it. sticky = 0: a recoverable asynchronous
     * error (a failing host closure / host function); sticky = 1: one that
     * loses the device (a trapping kernel on CUDA; the host backend marks
     * the device lost). */
    hn_status_t (*inject_fault)(hn_dstream *s, int sticky, const hn_origin *o);
    /* Timing markers, for tracing only (the events above keep timing
     * disabled, so a run that is not traced pays nothing): a record marks
     * the point of s's work where it is issued (a marker may be recorded
     * again, run after run; like other work, it is dropped after a failure
     * of o's run); once the streams of both records are synchronized,
     * elapsed is the time from one to the other, in seconds (markers of one
     * device). HN_ERR_RUNTIME if a marker was never reached. */
    hn_status_t (*timer_create)(void *ctx, int dev, hn_dtimer **t);
    void (*timer_destroy)(hn_dtimer *t);
    hn_status_t (*timer_record)(hn_dtimer *t, hn_dstream *s, const hn_origin *o);
    hn_status_t (*timer_elapsed)(const hn_dtimer *from, const hn_dtimer *to, double *seconds);
    /* When a reached marker was reached on the host's monotonic clock (the
     * one hn_now reads), in nanoseconds: backends whose streams run on the
     * host know it exactly; the others return HN_ERR_UNSUPPORTED, and their
     * markers are placed from an epoch marker with timer_elapsed. */
    hn_status_t (*timer_host_ns)(const hn_dtimer *t, int64_t *ns);
    /* device memory shared across processes (NULL: no process mode) */
    const hn_share_ops *share;
} hn_device_ops;

/* Compute ops, issued on a stream. fp32 accumulation for bf16/f16. */
struct hn_compute_ops {
    hn_status_t (*copy)(hn_dstream *s, const hn_tensor *dst, const hn_tensor *src, const hn_origin *o);
    hn_status_t (*fill)(hn_dstream *s, const hn_tensor *dst, double value, const hn_origin *o);
    hn_status_t (*iota)(hn_dstream *s, const hn_tensor *dst, double start, double step, const hn_origin *o);
    /* Uniform in [lo, hi), a function of (seed, element index) only. */
    hn_status_t (*random)(hn_dstream *s, const hn_tensor *dst, uint64_t seed, double lo, double hi,
                          const hn_origin *o);
    /* dst = a op b elementwise, op the reduction's (collective.h): sum adds,
     * prod multiplies, max and min (not avg) */
    hn_status_t (*binary)(hn_dstream *s, hn_redop op, const hn_tensor *dst, const hn_tensor *a,
                          const hn_tensor *b, const hn_origin *o);
    hn_status_t (*scale)(hn_dstream *s, const hn_tensor *dst, const hn_tensor *a, double f,
                         const hn_origin *o);
    hn_status_t (*sum)(hn_dstream *s, const hn_tensor *dst, const hn_tensor *a, int axis,
                       const hn_origin *o);
    /* dst[.., M, N] = a[.., M, K] @ b[.., K, N] (+ bias[N]); b may be 2-d
     * and shared by every batch. transb: b is [N, K] (linear's weight). */
    hn_status_t (*matmul)(hn_dstream *s, const hn_tensor *dst, const hn_tensor *a,
                          const hn_tensor *b, int transb, const hn_tensor *bias, const hn_origin *o);
    /* RMSNorm over rows of `hidden` elements (the last axis; weight is
     * [hidden]): y = a (+ residual, when not NULL), res_out = y (when not
     * NULL), dst = y * rsqrt(mean(y^2) + eps) * weight — fp32 math on y as
     * stored in the dtype (f32, bf16, f16: one for all), the factor as
     * hn_norm_scale (norm.h). dst, a, residual and res_out have one shape,
     * any strides; dst may be a, res_out may be residual; dst and res_out
     * are two buffers. Also the second half of allreduce_rmsnorm through
     * a communicator that does not fuse it. */
    hn_status_t (*rmsnorm)(hn_dstream *s, const hn_tensor *dst, const hn_tensor *res_out, const hn_tensor *a,
                           const hn_tensor *residual, const hn_tensor *weight, float eps, const hn_origin *o);
};

extern const hn_device_ops hn_device_host;
/* The host backend's launch_host for work whose argument is nbytes of
 * plain data (copied here; pointers in it are what graph_repoint moves). */
hn_status_t hn_host_launch_job(hn_dstream *s, hn_host_fn fn, const void *arg, size_t nbytes, const hn_origin *o);
extern const hn_compute_ops hn_compute_host;
#ifdef HN_HAVE_CUDA
extern const hn_device_ops hn_device_cuda;
extern const hn_compute_ops hn_compute_cuda;
#endif

/* The registered device backends, NULL-terminated, in the order `auto`
 * tries them (device_registry.c; the runtime picks: hn_runtime_pick_backend). */
const hn_device_ops *const *hn_device_backends(void);
/* The registered backend of this name (a name a user typed, or data), or
 * NULL. The one place a backend is found by its name. */
const hn_device_ops *hn_device_find(const char *name);
/* Whether name is a backend of hirnode, registered in this build or not:
 * for data that names one (a profile's machine.backend). The names,
 * NULL-terminated, for messages. */
int hn_device_name_known(const char *name);
const char *const *hn_device_known_names(void);
/* The compute ops registered with device backend d (they run on its
 * streams), or NULL for a table that is not registered. */
const hn_compute_ops *hn_device_compute(const hn_device_ops *d);

#endif
