/* CUDA device backend: one device per rank thread (cudaSetDevice once, to
 * the rank's ordinal: hn_device_setup.ordinals),
 * non-blocking streams only, events without timing, peer access enabled for
 * every pair at start, waits that poll with a deadline and give up when
 * another rank failed. */
#include <sched.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda.h> /* types of the stream memory operations only: no libcuda link */

#include "arena.h"
#include "cuda_check.h"
#include "device_cuda.h"

/* cuStreamWriteValue32 / cuStreamWaitValue32, from the driver through the
 * runtime's entry points (resolved once, in thread_init) */
typedef CUresult (*stream_value_fn)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
static stream_value_fn write_value32, wait_value32;
static int write_value_broken; /* peer writes fall back to a one-thread kernel */

typedef struct cuda_ctx {
    int ndev; /* device indexes (ranks) 0 .. ndev - 1; below first: other processes' */
    int first;
    const hn_fault_sink *sink;
    cudaStream_t *io; /* per device index: synchronous copies to and from the host */
    int *ord;         /* per device index (rank): its CUDA device ordinal (-1: another process's) */
    hn_arena *arenas; /* per device index: its memory shared across processes, or NULL (cudaMalloc) */
} cuda_ctx;

static int cuda_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return n;
}

/* The model's name and the CUDA version the driver supports, for the
 * machine profile (any thread: neither needs the device current). The
 * name is asked once per device: cudaGetDeviceProperties reads every
 * property, slowly, and every runtime asks. */
static void cuda_describe(int dev, char *model, size_t n, char *cuda, size_t cn)
{
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    static char names[64][256];
    struct cudaDeviceProp prop;
    int v = 0;
    pthread_mutex_lock(&mu);
    if (dev >= 0 && dev < 64 && names[dev][0] == '\0') {
        if (cudaGetDeviceProperties(&prop, dev) == cudaSuccess)
            snprintf(names[dev], sizeof(names[dev]), "%s", prop.name);
        else
            (void)cudaGetLastError();
    }
    if (dev >= 0 && dev < 64 && names[dev][0] != '\0')
        snprintf(model, n, "%s", names[dev]);
    pthread_mutex_unlock(&mu);
    if (cudaDriverGetVersion(&v) == cudaSuccess && v > 0)
        snprintf(cuda, cn, "%d.%d", v / 1000, v % 1000 / 10);
    else
        (void)cudaGetLastError();
}

static hn_status_t cuda_init(const hn_device_setup *setup, void **out)
{
    cuda_ctx *c = hn_calloc(1, sizeof(*c));
    int n = setup->first + setup->ndev;
    if (c == NULL)
        return HN_ERR_NOMEM;
    c->io = hn_calloc((size_t)n, sizeof(cudaStream_t));
    c->ord = hn_calloc((size_t)n, sizeof(int));
    if (setup->arena != NULL)
        c->arenas = hn_calloc((size_t)n, sizeof(hn_arena));
    if (c->io == NULL || c->ord == NULL || (setup->arena != NULL && c->arenas == NULL)) {
        hn_free(c->io);
        hn_free(c->ord);
        hn_free(c->arenas);
        hn_free(c);
        return HN_ERR_NOMEM;
    }
    for (int i = 0; i < n; i++)
        c->ord[i] = i < setup->first ? -1 : setup->ordinals != NULL ? setup->ordinals[i - setup->first] : i;
    for (int i = 0; c->arenas != NULL && i < setup->ndev; i++)
        hn_arena_init(&c->arenas[setup->first + i], setup->arena[i], setup->arena_bytes);
    c->ndev = n;
    c->first = setup->first;
    c->sink = setup->sink;
    *out = c;
    return HN_OK;
}

static void cuda_fini(void *ctx)
{
    cuda_ctx *c = ctx;
    if (c == NULL)
        return;
    for (int i = c->first; c->arenas != NULL && i < c->ndev; i++)
        hn_arena_fini(&c->arenas[i]);
    hn_free(c->arenas);
    hn_free(c->io);
    hn_free(c->ord);
    hn_free(c);
}

static hn_status_t cuda_thread_init(void *ctx, int dev)
{
    cuda_ctx *c = ctx;
    int me = c->ord[dev];
    hn_status_t st;
    HN_CUDA_CHECK_GOTO(cudaSetDevice(me), st, fail);
    HN_CUDA_CHECK_GOTO(cudaStreamCreateWithFlags(&c->io[dev], cudaStreamNonBlocking), st, fail);
    /* peer access once, for every pair of distinct devices; "already
     * enabled" is success (two ranks may share a device) */
    for (int i = 0; i < c->ndev; i++) {
        int can = 0, p = c->ord[i];
        cudaError_t e;
        if (p == me || p < 0) /* another process's rank: its memory is mapped with access instead */
            continue;
        HN_CUDA_CHECK_GOTO(cudaDeviceCanAccessPeer(&can, me, p), st, fail);
        if (!can) {
            HN_WARN("device %d cannot access device %d directly: peer copies between them are "
                    "unavailable", me, p);
            continue;
        }
        e = cudaDeviceEnablePeerAccess(p, 0);
        if (e == cudaErrorPeerAccessAlreadyEnabled) {
            (void)cudaGetLastError();
            e = cudaSuccess;
        }
        HN_CUDA_CHECK_GOTO(e, st, fail);
    }
    if (wait_value32 == NULL) {
        void *w = NULL, *v = NULL;
        enum cudaDriverEntryPointQueryResult q1, q2;
        HN_CUDA_CHECK_GOTO(cudaGetDriverEntryPointByVersion("cuStreamWriteValue32", &w, 12000, cudaEnableDefault, &q1),
                           st, fail);
        HN_CUDA_CHECK_GOTO(cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &v, 12000, cudaEnableDefault, &q2),
                           st, fail);
        if (q1 != cudaDriverEntryPointSuccess || q2 != cudaDriverEntryPointSuccess) {
            HN_ERROR("the driver has no stream memory operations");
            st = HN_ERR_UNSUPPORTED;
            goto fail;
        }
        __atomic_store_n(&write_value32, (stream_value_fn)w, __ATOMIC_RELEASE);
        __atomic_store_n(&wait_value32, (stream_value_fn)v, __ATOMIC_RELEASE);
    }
    st = hn_compute_cuda_thread_init(dev);
fail:
    return st;
}

static void cuda_thread_fini(void *ctx, int dev)
{
    cuda_ctx *c = ctx;
    hn_compute_cuda_thread_fini(dev);
    if (c->io[dev] != NULL)
        (void)HN_CUDA_STATUS(cudaStreamDestroy(c->io[dev]));
    c->io[dev] = NULL;
}

static hn_status_t cuda_mem_alloc(void *ctx, int dev, size_t bytes, void **ptr)
{
    cuda_ctx *c = ctx;
    if (c->arenas != NULL) { /* memory the other processes of the world map at the same address */
        if (bytes > SIZE_MAX / 2 || dev < c->first || dev >= c->ndev ||
            (*ptr = hn_arena_take(&c->arenas[dev], (bytes + 255) / 256 * 256 + 256)) == NULL) {
            HN_INFO("cuda device %d: the shared memory has no %zu bytes free (HIRNODE_SHARED_MEM_MIB)", dev, bytes);
            return HN_ERR_NOMEM;
        }
        return HN_OK;
    }
    return HN_CUDA_STATUS(cudaMalloc(ptr, bytes ? bytes : 1));
}

static void cuda_mem_free(void *ctx, int dev, void *ptr)
{
    cuda_ctx *c = ctx;
    if (c->arenas != NULL) {
        size_t bytes;
        if (ptr != NULL && dev >= c->first && dev < c->ndev)
            hn_arena_give(&c->arenas[dev], ptr, &bytes);
        return;
    }
    (void)HN_CUDA_STATUS(cudaFree(ptr));
}

/* Polls the io stream until its copy is done: within the deadline, and
 * within a second once the run is aborted (a copy that raises an abort word
 * may queue behind a kernel that never ends, where streams share a
 * hardware queue: cudaStreamSynchronize would wait for it for ever). */
static hn_status_t io_wait(cuda_ctx *c, int dev)
{
    const hn_fault_sink *sink = c->sink;
    double start = hn_now(), timeout = sink != NULL ? sink->timeout_s : 60.0;
    for (;;) {
        cudaError_t e = cudaStreamQuery(c->io[dev]);
        double limit = timeout;
        if (e == cudaSuccess)
            return HN_OK;
        if (e != cudaErrorNotReady)
            return HN_CUDA_STATUS(e);
        if (sink != NULL && sink->abort_flag != NULL && __atomic_load_n(sink->abort_flag, __ATOMIC_ACQUIRE))
            limit = timeout < 1.0 ? timeout : 1.0;
        if (hn_now() - start > limit) {
            (void)cudaGetLastError();
            HN_ERROR("device %d: a copy to or from the host did not finish within %.0f s (its queue is blocked)",
                     c->ord[dev], limit);
            return HN_ERR_TIMEOUT;
        }
        sched_yield();
    }
}

static hn_status_t cuda_copy_sync(void *ctx, int dev, void *dst, const void *src, size_t n)
{
    cuda_ctx *c = ctx;
    hn_status_t st;
    HN_CUDA_CHECK_GOTO(cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, c->io[dev]), st, fail);
    st = io_wait(c, dev);
fail:
    return st;
}

static hn_status_t cuda_stream_create(void *ctx, int dev, hn_dstream **out)
{
    hn_dstream *s = hn_calloc(1, sizeof(*s));
    hn_status_t st;
    if (s == NULL)
        return HN_ERR_NOMEM;
    s->dev = dev;
    s->ord = ((cuda_ctx *)ctx)->ord[dev];
    s->ctx = ctx;
    HN_CUDA_CHECK_GOTO(cudaMalloc(&s->workspace, HN_CUDA_WORKSPACE_BYTES), st, fail);
    HN_CUDA_CHECK_GOTO(cudaStreamCreateWithFlags(&s->s, cudaStreamNonBlocking), st, fail_workspace);
    *out = s;
    return HN_OK;
fail_workspace:
    (void)HN_CUDA_STATUS(cudaFree(s->workspace));
fail:
    hn_free(s);
    return st;
}

static void cuda_stream_destroy(hn_dstream *s)
{
    if (s == NULL)
        return;
    (void)HN_CUDA_STATUS(cudaStreamDestroy(s->s));
    /* cudaFree waits for the device: the stream's last matmul is done */
    (void)HN_CUDA_STATUS(cudaFree(s->workspace));
    hn_free(s);
}

static hn_status_t cuda_stream_query(hn_dstream *s)
{
    cudaError_t e = cudaStreamQuery(s->s);
    if (e == cudaErrorNotReady) {
        (void)cudaGetLastError();
        return HN_ERR_BUSY;
    }
    return HN_CUDA_STATUS(e);
}

static void *cuda_stream_native(hn_dstream *s) { return (void *)s->s; }

static hn_status_t cuda_stream_adopt(void *ctx, int dev, void *native, hn_dstream *like, hn_dstream **out)
{
    hn_dstream *s;
    if (native == NULL || like == NULL || like->dev != dev) {
        HN_ERROR("device %d: a launch needs the caller's stream of that device", dev);
        return HN_ERR_INVALID;
    }
    if ((s = hn_calloc(1, sizeof(*s))) == NULL)
        return HN_ERR_NOMEM;
    s->s = (cudaStream_t)native;
    s->dev = dev;
    s->ord = like->ord;
    s->ctx = ctx;
    s->workspace = like->workspace; /* borrowed: `like` never runs beside it */
    s->adopted = 1;
    *out = s;
    return HN_OK;
}

static void cuda_stream_release(hn_dstream *s)
{
    if (s != NULL && s->adopted)
        hn_free(s);
}

/* Polls until the stream is idle, another rank failed, or the deadline. */
static hn_status_t cuda_stream_sync(hn_dstream *s)
{
    const hn_fault_sink *sink = s->ctx->sink;
    double start = hn_now(), timeout = sink != NULL ? sink->timeout_s : 60.0;
    for (;;) {
        cudaError_t e = cudaStreamQuery(s->s);
        if (e == cudaSuccess)
            return HN_OK;
        if (e != cudaErrorNotReady)
            return HN_CUDA_STATUS(e);
        if (sink != NULL && sink->abort_flag != NULL && __atomic_load_n(sink->abort_flag, __ATOMIC_ACQUIRE))
            return HN_ERR_ABORTED;
        if (hn_now() - start > timeout) {
            HN_ERROR("device %d: a stream is still busy after %.0f s", s->dev, timeout);
            return HN_ERR_TIMEOUT;
        }
        sched_yield();
    }
}

static hn_status_t cuda_event_create(void *ctx, int dev, hn_devent **out)
{
    hn_devent *e = hn_calloc(1, sizeof(*e));
    hn_status_t st;
    (void)ctx;
    if (e == NULL)
        return HN_ERR_NOMEM;
    e->dev = dev;
    HN_CUDA_CHECK_GOTO(cudaEventCreateWithFlags(&e->e, cudaEventDisableTiming), st, fail);
    *out = e;
    return HN_OK;
fail:
    hn_free(e);
    return st;
}

static void cuda_event_destroy(hn_devent *e)
{
    if (e == NULL)
        return;
    (void)HN_CUDA_STATUS(cudaEventDestroy(e->e));
    hn_free(e);
}

static hn_status_t cuda_event_record(hn_devent *e, hn_dstream *s)
{
    /* an event is recorded only on a stream of its own device */
    if (e->dev != s->dev) {
        HN_ERROR("event of device %d recorded on a stream of device %d", e->dev, s->dev);
        return HN_ERR_INVALID;
    }
    return HN_CUDA_STATUS(cudaEventRecord(e->e, s->s));
}

static int cuda_stream_capturing(hn_dstream *s)
{
    enum cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
    return cudaStreamIsCapturing(s->s, &cap) == cudaSuccess && cap != cudaStreamCaptureStatusNone;
}

static int cuda_native_capturing(void *native)
{
    enum cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
    return native != NULL && cudaStreamIsCapturing((cudaStream_t)native, &cap) == cudaSuccess &&
           cap != cudaStreamCaptureStatusNone;
}

static hn_status_t cuda_event_query(hn_devent *e)
{
    cudaError_t err = cudaEventQuery(e->e);
    return err == cudaErrorNotReady ? HN_ERR_BUSY : HN_CUDA_STATUS(err);
}

static hn_status_t cuda_stream_wait_event(hn_dstream *s, hn_devent *e, const hn_origin *o)
{
    (void)o;
    return HN_CUDA_STATUS(cudaStreamWaitEvent(s->s, e->e, 0));
}

/* The CUDA memory pool p lies in (cudaMallocAsync), or NULL. */
static cudaMemPool_t pool_of(const void *p)
{
    typedef CUresult (*attr_fn)(void *, CUpointer_attribute, CUdeviceptr);
    static attr_fn attr;
    void *fn = NULL, *pool = NULL;
    enum cudaDriverEntryPointQueryResult q;
    if (__atomic_load_n(&attr, __ATOMIC_ACQUIRE) == NULL) {
        if (cudaGetDriverEntryPointByVersion("cuPointerGetAttribute", &fn, 12000, cudaEnableDefault, &q) !=
                cudaSuccess ||
            q != cudaDriverEntryPointSuccess) {
            (void)cudaGetLastError();
            return NULL;
        }
        __atomic_store_n(&attr, (attr_fn)fn, __ATOMIC_RELEASE);
    }
    if (attr(&pool, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, (CUdeviceptr)(uintptr_t)p) != CUDA_SUCCESS)
        return NULL;
    return (cudaMemPool_t)pool;
}

/* Whether device ord may not touch p: memory of a pool that grants it no
 * access (a pool's memory is its own device's unless cudaMemPoolSetAccess
 * says otherwise; peer access between the devices does not extend to it). */
static int pool_denies(const void *p, int ord)
{
    cudaMemPool_t pool = pool_of(p);
    struct cudaPointerAttributes at;
    struct cudaMemLocation loc = {cudaMemLocationTypeDevice, ord};
    enum cudaMemAccessFlags flags = cudaMemAccessFlagsProtNone;
    if (pool == NULL || cudaPointerGetAttributes(&at, p) != cudaSuccess || at.device == ord) {
        (void)cudaGetLastError();
        return 0;
    }
    if (cudaMemPoolGetAccess(&flags, pool, &loc) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return flags != cudaMemAccessFlagsProtReadWrite; /* (a read-only grant lets no copy write) */
}

static hn_status_t cuda_memcpy_async(void *dst, const void *src, size_t n, hn_dstream *s,
                                     const hn_origin *o)
{
    const cudaError_t e = cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, s->s);
    const void *denied;
    if (e == cudaSuccess)
        return HN_OK;
    /* a copy the device may not make: memory of another device's pool */
    denied = pool_denies(dst, s->ord) ? dst : pool_denies(src, s->ord) ? src : NULL;
    if (denied == NULL)
        return HN_CUDA_STATUS(e);
    (void)cudaGetLastError();
    hn_origin_fail(o, HN_ERR_INVALID,
                   "a copy of %zu bytes from %p into %p on device %d failed (%s): %p is memory of another device's "
                   "CUDA memory pool (cudaMallocAsync), which device %d may not access; grant it "
                   "(cudaMemPoolSetAccess), allocate the buffer with cudaMalloc or hn_runtime_alloc, or take "
                   "`via nccl` or `via ll` (their peers touch only their own buffers)",
                   n, src, dst, s->ord, cudaGetErrorString(e), denied, s->ord);
    return HN_ERR_INVALID;
}

#ifdef HN_FLAG_KNOBS
/* Builds made to measure the eager flags' mechanisms on a GPU only
 * (-DHN_FLAG_KNOBS): HN_FLAG_WRITE 1 writes without the memory barrier,
 * 2 by a kernel; HN_FLAG_WAIT 1 waits in a kernel (that never gives up:
 * for measurements, not for runs that may fail). */
static int flag_knob(const char *name)
{
    const char *e = getenv(name);
    return e != NULL ? atoi(e) : 0;
}

static const uint32_t *zero_pair(int ord)
{
    static void *known[64];
    void *p = ord >= 0 && ord < 64 ? known[ord] : NULL;
    if (p == NULL && cudaMalloc(&p, 2 * sizeof(uint32_t)) == cudaSuccess) {
        (void)cudaMemset(p, 0, 2 * sizeof(uint32_t));
        (void)cudaDeviceSynchronize();
        if (ord >= 0 && ord < 64)
            known[ord] = p;
    }
    return p;
}
#endif

static hn_status_t cuda_write_flag(hn_dstream *s, uint32_t *addr, uint32_t value, const hn_origin *o)
{
    (void)o;
#ifdef HN_FLAG_KNOBS
    if (flag_knob("HN_FLAG_WRITE") == 2)
        return hn_cuda_flag_write(s, addr, value);
    if (flag_knob("HN_FLAG_WRITE") == 1)
        return write_value32((CUstream)s->s, (CUdeviceptr)(uintptr_t)addr, value,
                             CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER) == CUDA_SUCCESS
                   ? HN_OK
                   : HN_ERR_DEVICE;
#endif
    if (!__atomic_load_n(&write_value_broken, __ATOMIC_RELAXED)) {
        CUresult r = write_value32((CUstream)s->s, (CUdeviceptr)(uintptr_t)addr, value, CU_STREAM_WRITE_VALUE_DEFAULT);
        if (r == CUDA_SUCCESS)
            return HN_OK;
        HN_WARN("cuStreamWriteValue32 failed (%d): flags are written by a kernel from now on", (int)r);
        __atomic_store_n(&write_value_broken, 1, __ATOMIC_RELAXED);
    }
    return hn_cuda_flag_write(s, addr, value);
}

static hn_status_t cuda_wait_flag(hn_dstream *s, const uint32_t *addr, uint32_t value, const hn_origin *o)
{
    CUresult r;
    (void)o;
#ifdef HN_FLAG_KNOBS
    if (flag_knob("HN_FLAG_WAIT") == 1 && zero_pair(s->ord) != NULL)
        return hn_cuda_flag_wait_rel(s, addr, value, zero_pair(s->ord));
#endif
    r = wait_value32((CUstream)s->s, (CUdeviceptr)(uintptr_t)addr, value, CU_STREAM_WAIT_VALUE_GEQ);
    if (r != CUDA_SUCCESS) {
        HN_ERROR("cuStreamWaitValue32 failed (%d)", (int)r);
        return HN_ERR_DEVICE;
    }
    return HN_OK;
}

static hn_status_t cuda_write_flag_rel(hn_dstream *s, uint32_t *addr, uint32_t value, const uint32_t *ep,
                                       const hn_origin *o)
{
    (void)o;
    return hn_cuda_flag_write_rel(s, addr, value, ep);
}

static hn_status_t cuda_wait_flag_rel(hn_dstream *s, const uint32_t *addr, uint32_t value, const uint32_t *ep,
                                      const hn_origin *o)
{
    (void)o;
    return hn_cuda_flag_wait_rel(s, addr, value, ep);
}

static hn_status_t cuda_add_u32(hn_dstream *s, uint32_t *addr, uint32_t value, const hn_origin *o)
{
    (void)o;
    return hn_cuda_add_u32(s, addr, value);
}

typedef struct host_call {
    hn_host_fn fn;
    void *arg;
    void (*release)(void *);
    hn_origin origin;
} host_call;

static void CUDART_CB host_trampoline(void *p)
{
    host_call *c = p;
    if (!hn_origin_aborted(&c->origin))
        c->fn(c->arg, &c->origin);
    if (c->release != NULL)
        c->release(c->arg);
    hn_free(c);
}

static hn_status_t cuda_launch_host(hn_dstream *s, hn_host_fn fn, void *arg, void (*release)(void *),
                                    const hn_origin *o)
{
    host_call *c = hn_calloc(1, sizeof(*c));
    enum cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
    hn_status_t st;
    /* a host function frees its call when it runs: once, never in a graph */
    if (c != NULL && cudaStreamIsCapturing(s->s, &cap) == cudaSuccess && cap != cudaStreamCaptureStatusNone) {
        HN_ERROR("device %d: host work cannot be captured in a graph", s->dev);
        hn_free(c);
        if (release != NULL)
            release(arg);
        return HN_ERR_UNSUPPORTED;
    }
    if (c == NULL) {
        if (release != NULL)
            release(arg);
        return HN_ERR_NOMEM;
    }
    c->fn = fn;
    c->arg = arg;
    c->release = release;
    if (o != NULL)
        c->origin = *o;
    if ((st = HN_CUDA_STATUS(cudaLaunchHostFunc(s->s, host_trampoline, c))) != HN_OK) {
        if (release != NULL)
            release(arg);
        hn_free(c);
    }
    return st;
}

static void cuda_recover(void *ctx)
{
    (void)ctx;
    (void)cudaGetLastError();
}

static hn_status_t cuda_health(void *ctx, int dev, char *why, size_t n)
{
    cudaError_t e = hn_cuda_lost_error(((cuda_ctx *)ctx)->ord[dev]);
    if (e == cudaSuccess)
        return HN_OK;
    snprintf(why, n, "device %d: %s: its CUDA context is lost, and with it every later use of the device in "
             "this process (restart the process)", ((cuda_ctx *)ctx)->ord[dev], cudaGetErrorString(e));
    return HN_ERR_DEVICE_LOST;
}

static hn_status_t cuda_mem_info(void *ctx, int dev, size_t *free_bytes, size_t *total_bytes)
{
    hn_status_t st;
    HN_CUDA_CHECK_GOTO(cudaSetDevice(((cuda_ctx *)ctx)->ord[dev]), st, fail);
    HN_CUDA_CHECK_GOTO(cudaMemGetInfo(free_bytes, total_bytes), st, fail);
fail:
    return st;
}

static hn_status_t fail_injected(void *arg, const hn_origin *o)
{
    (void)arg;
    hn_origin_fail(o, HN_ERR_DEVICE, "an asynchronous device error (injected)");
    return HN_ERR_DEVICE;
}

static hn_status_t cuda_inject_fault(hn_dstream *s, int sticky, const hn_origin *o)
{
    if (sticky) /* a kernel that traps: the context is lost for good */
        return hn_cuda_trap(s);
    return cuda_launch_host(s, fail_injected, NULL, NULL, o);
}

/* Timing markers: events with timing enabled, made only by a traced run
 * (the pooled events above keep cudaEventDisableTiming). */
struct hn_dtimer {
    cudaEvent_t e;
    int dev;
};

static hn_status_t cuda_timer_create(void *ctx, int dev, hn_dtimer **out)
{
    hn_dtimer *t = hn_calloc(1, sizeof(*t));
    hn_status_t st;
    (void)ctx;
    if (t == NULL)
        return HN_ERR_NOMEM;
    t->dev = dev;
    HN_CUDA_CHECK_GOTO(cudaEventCreateWithFlags(&t->e, cudaEventDefault), st, fail);
    *out = t;
    return HN_OK;
fail:
    hn_free(t);
    return st;
}

static void cuda_timer_destroy(hn_dtimer *t)
{
    if (t == NULL)
        return;
    (void)HN_CUDA_STATUS(cudaEventDestroy(t->e));
    hn_free(t);
}

static hn_status_t cuda_timer_record(hn_dtimer *t, hn_dstream *s, const hn_origin *o)
{
    (void)o;
    if (t->dev != s->dev) {
        HN_ERROR("timer of device %d recorded on a stream of device %d", t->dev, s->dev);
        return HN_ERR_INVALID;
    }
    return HN_CUDA_STATUS(cudaEventRecord(t->e, s->s));
}

static hn_status_t cuda_timer_elapsed(const hn_dtimer *from, const hn_dtimer *to, double *seconds)
{
    float ms = 0;
    cudaError_t e;
    if (from->dev != to->dev) {
        HN_ERROR("timers of devices %d and %d cannot be compared", from->dev, to->dev);
        return HN_ERR_INVALID;
    }
    e = cudaEventElapsedTime(&ms, from->e, to->e);
    if (e == cudaErrorNotReady) { /* never reached: its work was dropped */
        (void)cudaGetLastError();
        return HN_ERR_RUNTIME;
    }
    if (e != cudaSuccess)
        return HN_CUDA_STATUS(e);
    *seconds = (double)ms * 1e-3;
    return HN_OK;
}

/* GPU timestamps have no host-clock reading: traces place them from an
 * epoch marker (timer_elapsed) */
static hn_status_t cuda_timer_host_ns(const hn_dtimer *t, int64_t *ns)
{
    (void)t;
    (void)ns;
    return HN_ERR_UNSUPPORTED;
}

const hn_device_ops hn_device_cuda = {
    .name = "cuda",
    .comm = "nccl",
    .kind = HN_DEVICE_KIND_CUDA,
    .emulated = 0,
    .default_via_auto = 1,
    .visible_env = "CUDA_VISIBLE_DEVICES",
    .device_count = cuda_device_count,
    .describe = cuda_describe,
    .init = cuda_init,
    .fini = cuda_fini,
    .thread_init = cuda_thread_init,
    .thread_fini = cuda_thread_fini,
    .mem_alloc = cuda_mem_alloc,
    .mem_free = cuda_mem_free,
    .copy_to_device = cuda_copy_sync,
    .copy_to_host = cuda_copy_sync,
    .stream_create = cuda_stream_create,
    .stream_destroy = cuda_stream_destroy,
    .stream_sync = cuda_stream_sync,
    .stream_query = cuda_stream_query,
    .stream_native = cuda_stream_native,
    .stream_adopt = cuda_stream_adopt,
    .stream_release = cuda_stream_release,
    .event_create = cuda_event_create,
    .event_destroy = cuda_event_destroy,
    .event_record = cuda_event_record,
    .event_query = cuda_event_query,
    .stream_capturing = cuda_stream_capturing,
    .native_capturing = cuda_native_capturing,
    .native_capture_keep = hn_cuda_native_capture_keep,
    .stream_wait_event = cuda_stream_wait_event,
    .memcpy_async = cuda_memcpy_async,
    .stream_write_flag = cuda_write_flag,
    .stream_wait_flag = cuda_wait_flag,
    .stream_write_flag_rel = cuda_write_flag_rel,
    .stream_wait_flag_rel = cuda_wait_flag_rel,
    .stream_add_u32 = cuda_add_u32,
    .capture_begin = hn_cuda_capture_begin,
    .capture_end = hn_cuda_capture_end,
    .graph_launch = hn_cuda_graph_launch,
    .graph_destroy = hn_cuda_graph_destroy,
    .capture_update = hn_cuda_capture_update,
    .graph_repoint = hn_cuda_graph_repoint,
    .launch_host = cuda_launch_host,
    .recover = cuda_recover,
    .health = cuda_health,
    .mem_info = cuda_mem_info,
    .inject_fault = cuda_inject_fault,
    .timer_create = cuda_timer_create,
    .timer_destroy = cuda_timer_destroy,
    .timer_record = cuda_timer_record,
    .timer_elapsed = cuda_timer_elapsed,
    .timer_host_ns = cuda_timer_host_ns,
    .share = &hn_cuda_share,
};
