/* The CUDA backend's device memory shared across processes (hn_share_ops,
 * device.h): each rank's memory is one cuMem allocation that its process
 * exports as a file descriptor (CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
 * every process imports every rank's and maps it at the same address,
 * inside a range reserved there with cuMemAddressReserve, with access for
 * its own device — as NCCL's and PyTorch's symmetric memory do. The
 * driver's entry points come through the runtime (no libcuda link). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cuda.h> /* the driver's types only */

#include "cuda_check.h"
#include "device_cuda.h"

typedef CUresult (*reserve_fn)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
typedef CUresult (*free_fn)(CUdeviceptr, size_t);
typedef CUresult (*create_fn)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                              unsigned long long);
typedef CUresult (*release_fn)(CUmemGenericAllocationHandle);
typedef CUresult (*export_fn)(void *, CUmemGenericAllocationHandle, CUmemAllocationHandleType, unsigned long long);
typedef CUresult (*import_fn)(CUmemGenericAllocationHandle *, void *, CUmemAllocationHandleType);
typedef CUresult (*map_fn)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
typedef CUresult (*unmap_fn)(CUdeviceptr, size_t);
typedef CUresult (*access_fn)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
typedef CUresult (*granularity_fn)(size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags);

static struct {
    reserve_fn reserve;
    free_fn addr_free;
    create_fn create;
    release_fn release;
    export_fn export_fd;
    import_fn import_fd;
    map_fn map;
    unmap_fn unmap;
    access_fn access;
    granularity_fn granularity;
    int ok;
} drv;
static pthread_once_t drv_once = PTHREAD_ONCE_INIT;

static void *entry(const char *name)
{
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess) {
        (void)cudaGetLastError();
        HN_ERROR("cuda: the driver has no %s (memory shared across processes)", name);
        return NULL;
    }
    return fn;
}

static void resolve(void)
{
    drv.reserve = (reserve_fn)entry("cuMemAddressReserve");
    drv.addr_free = (free_fn)entry("cuMemAddressFree");
    drv.create = (create_fn)entry("cuMemCreate");
    drv.release = (release_fn)entry("cuMemRelease");
    drv.export_fd = (export_fn)entry("cuMemExportToShareableHandle");
    drv.import_fd = (import_fn)entry("cuMemImportFromShareableHandle");
    drv.map = (map_fn)entry("cuMemMap");
    drv.unmap = (unmap_fn)entry("cuMemUnmap");
    drv.access = (access_fn)entry("cuMemSetAccess");
    drv.granularity = (granularity_fn)entry("cuMemGetAllocationGranularity");
    drv.ok = drv.reserve && drv.addr_free && drv.create && drv.release && drv.export_fd && drv.import_fd &&
             drv.map && drv.unmap && drv.access && drv.granularity;
}

/* The driver's entry points, with ord's context current on this thread. */
static int ready(int ord)
{
    if (cudaSetDevice(ord) != cudaSuccess || cudaFree(NULL) != cudaSuccess) {
        (void)cudaGetLastError();
        HN_ERROR("cuda: cannot use device %d", ord);
        return 0;
    }
    pthread_once(&drv_once, resolve);
    return drv.ok;
}

static int check(CUresult r, const char *what, int ord)
{
    if (r != CUDA_SUCCESS)
        HN_ERROR("cuda: %s on device %d failed (CUresult %d)", what, ord, (int)r);
    return r == CUDA_SUCCESS;
}

static void prop_of(int ord, CUmemAllocationProp *prop)
{
    memset(prop, 0, sizeof(*prop));
    prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop->location.id = ord;
    prop->requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
}

static void *share_reserve(int ord, void *at, size_t bytes)
{
    CUdeviceptr p = 0;
    if (!ready(ord) || !check(drv.reserve(&p, bytes, (size_t)2 << 20, (CUdeviceptr)(uintptr_t)at, 0),
                              "cuMemAddressReserve", ord))
        return NULL;
    if (at != NULL && p != (CUdeviceptr)(uintptr_t)at) { /* the address was a hint the driver could not take */
        (void)drv.addr_free(p, bytes);
        return NULL;
    }
    return (void *)(uintptr_t)p;
}

static void share_unreserve(int ord, void *p, size_t bytes)
{
    if (ready(ord))
        (void)check(drv.addr_free((CUdeviceptr)(uintptr_t)p, bytes), "cuMemAddressFree", ord);
}

static int share_make(int ord, size_t bytes, uint64_t *handle)
{
    CUmemAllocationProp prop;
    CUmemGenericAllocationHandle h;
    size_t gran = 0;
    int fd = -1;
    *handle = 0;
    if (!ready(ord))
        return -1;
    prop_of(ord, &prop);
    if (!check(drv.granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), "cuMemGetAllocationGranularity",
               ord))
        return -1;
    if (gran == 0 || bytes % gran != 0) {
        HN_ERROR("cuda: %zu bytes are no whole number of the device's granularity (%zu)", bytes, gran);
        return -1;
    }
    if (!check(drv.create(&h, bytes, &prop, 0), "cuMemCreate", ord))
        return -1;
    if (!check(drv.export_fd(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0), "cuMemExportToShareableHandle",
               ord)) {
        (void)drv.release(h);
        return -1;
    }
    *handle = (uint64_t)h;
    return fd;
}

static void share_unmake(int ord, uint64_t handle)
{
    if (ready(ord))
        (void)check(drv.release((CUmemGenericAllocationHandle)handle), "cuMemRelease", ord);
}

static hn_status_t share_map(int ord, int fd, void *p, size_t bytes)
{
    CUmemGenericAllocationHandle h;
    CUmemAccessDesc access;
    CUdeviceptr at = (CUdeviceptr)(uintptr_t)p;
    if (!ready(ord) ||
        !check(drv.import_fd(&h, (void *)(uintptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
               "cuMemImportFromShareableHandle", ord))
        return HN_ERR_DEVICE;
    if (!check(drv.map(at, bytes, 0, h, 0), "cuMemMap", ord)) {
        (void)drv.release(h);
        return HN_ERR_DEVICE;
    }
    (void)drv.release(h); /* the mapping keeps the memory */
    memset(&access, 0, sizeof(access));
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = ord;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    if (!check(drv.access(at, bytes, &access, 1), "cuMemSetAccess", ord)) {
        (void)drv.unmap(at, bytes);
        return HN_ERR_DEVICE;
    }
    return HN_OK;
}

static void share_unmap(int ord, void *p, size_t bytes)
{
    if (ready(ord))
        (void)check(drv.unmap((CUdeviceptr)(uintptr_t)p, bytes), "cuMemUnmap", ord);
}

/* made in full when the runtime starts, so a fixed amount: 4 GiB */
static size_t share_default_bytes(int world, size_t host_mem_bytes)
{
    (void)world;
    (void)host_mem_bytes;
    return (size_t)4 << 30;
}

/* Caller memory across processes, two ways:
 * - CUDA IPC of the cudaMalloc allocation p points into (the driver gives
 *   its range; torch's caching allocator hands out pieces of such
 *   allocations), opened by the others with peer access enabled lazily, as
 *   vLLM's custom allreduce registers its graph buffers;
 * - memory cuMem mapped (torch's expandable segments: a range of the
 *   address space with allocations of a few MiB mapped one after another):
 *   the allocations that hold p's bytes, each exported as a file
 *   descriptor, which the others take from this process with
 *   pidfd_getfd (as torch and MSCCL++ share such memory: it needs the
 *   permission to trace this process, which processes of one user started
 *   by one launcher have unless the kernel's Yama setting forbids it), and
 *   map one after another in a range of their own.
 * The handle says which (kind); its key (HN_IPC_KEY_BYTES) names the memory
 * (CUDA IPC: the handle itself; cuMem: the process, and every allocation's
 * size and the driver's buffer id, never reused in a process), the rest
 * carries the file descriptors for the time of the registration. */
typedef CUresult (*range_fn)(CUdeviceptr *, size_t *, CUdeviceptr);
typedef CUresult (*retain_fn)(CUmemGenericAllocationHandle *, void *);
typedef CUresult (*props_fn)(CUmemAllocationProp *, CUmemGenericAllocationHandle);
typedef CUresult (*attr_fn)(void *, CUpointer_attribute, CUdeviceptr);
static range_fn range_of;
static retain_fn retain;
static props_fn props_of;
static attr_fn attr_of;
static pthread_once_t range_once = PTHREAD_ONCE_INIT;
static void resolve_range(void)
{
    range_of = (range_fn)entry("cuMemGetAddressRange");
    retain = (retain_fn)entry("cuMemRetainAllocationHandle");
    props_of = (props_fn)entry("cuMemGetAllocationPropertiesFromHandle");
    attr_of = (attr_fn)entry("cuPointerGetAttribute");
}

enum { IPC_CUDA = 1, IPC_CUMEM = 2 };
#define CUMEM_MAX 60 /* allocations of one registration, at most */

typedef struct ipc_handle {
    uint32_t kind;
    int32_t pid; /* cuMem: the exporting process */
    uint32_t n;  /* cuMem: allocations, one after another */
    uint32_t pad;
    union {
        cudaIpcMemHandle_t cuda;
        struct {
            uint64_t bytes, id; /* the driver's buffer id */
        } seg[CUMEM_MAX];
    } u;
} ipc_handle;

typedef struct ipc_wire {
    ipc_handle key;
    unsigned char pad[HN_IPC_KEY_BYTES - sizeof(ipc_handle)];
    int32_t fd[CUMEM_MAX]; /* cuMem: the exporter's descriptors, open until ipc_done */
} ipc_wire;

_Static_assert(sizeof(ipc_handle) <= HN_IPC_KEY_BYTES, "the key of a handle");
_Static_assert(sizeof(ipc_wire) <= HN_IPC_HANDLE_BYTES, "a handle");

/* The cuMem allocations that hold [p, p + need), exported. */
static hn_status_t export_cumem(int ord, CUdeviceptr p, size_t need, void **base, size_t *bytes, ipc_wire *w,
                                char *why, size_t len)
{
    CUdeviceptr at = p, b = 0, first = 0;
    size_t n = 0;
    hn_status_t st = HN_OK;
    w->key.kind = IPC_CUMEM;
    w->key.pid = (int32_t)getpid();
    while (st == HN_OK && (at < p + need || w->key.n == 0)) {
        CUmemGenericAllocationHandle h;
        CUmemAllocationProp prop;
        unsigned long long id = 0;
        int fd = -1;
        const uint32_t k = w->key.n;
        if (k == CUMEM_MAX) {
            snprintf(why, len, "%zu bytes at %p span more than %d of the driver's allocations (cuMem, as torch's "
                     "expandable segments map them): register less at once", need, (void *)(uintptr_t)p, CUMEM_MAX);
            st = HN_ERR_INVALID;
        } else if (range_of(&b, &n, at) != CUDA_SUCCESS || (k > 0 && b != at) || n == 0) {
            snprintf(why, len, "the driver gives no allocation at %p (cuMem)", (void *)(uintptr_t)at);
            st = HN_ERR_INVALID;
        } else if (retain(&h, (void *)(uintptr_t)b) != CUDA_SUCCESS) {
            snprintf(why, len, "the driver gives no allocation handle at %p (cuMem)", (void *)(uintptr_t)b);
            st = HN_ERR_INVALID;
        } else {
            memset(&prop, 0, sizeof(prop));
            if (props_of(&prop, h) != CUDA_SUCCESS ||
                !(prop.requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)) {
                snprintf(why, len, "the allocation at %p (cuMem, %zu bytes) was made without a file descriptor "
                         "to hand it over (CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)", (void *)(uintptr_t)b, n);
                st = HN_ERR_INVALID;
            } else if (attr_of(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, b) != CUDA_SUCCESS ||
                       drv.export_fd(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0) != CUDA_SUCCESS) {
                snprintf(why, len, "the allocation at %p (cuMem, %zu bytes) could not be exported",
                         (void *)(uintptr_t)b, n);
                st = HN_ERR_INVALID;
            }
            (void)drv.release(h); /* (the retain's reference) */
        }
        if (st != HN_OK)
            break;
        if (k == 0)
            first = b;
        w->key.u.seg[k].bytes = n;
        w->key.u.seg[k].id = id;
        w->fd[k] = fd;
        w->key.n = k + 1;
        at = b + n;
    }
    if (st != HN_OK) {
        for (uint32_t k = 0; k < w->key.n; k++)
            close(w->fd[k]);
        return st;
    }
    *base = (void *)(uintptr_t)first;
    *bytes = (size_t)(at - first);
    HN_INFO("cuda: device %d: %zu bytes at %p handed over as %u cuMem allocations", ord, *bytes, *base,
            (unsigned)w->key.n);
    return HN_OK;
}

static hn_status_t share_ipc_export(int ord, const void *p, size_t need, uintptr_t lo, uintptr_t hi, void **base,
                                    size_t *bytes, void *handle, char *why, size_t len)
{
    struct cudaPointerAttributes at;
    CUmemGenericAllocationHandle h;
    CUdeviceptr b = 0;
    size_t n = 0;
    cudaError_t e;
    ipc_wire *w = handle;
    if (!ready(ord))
        return HN_ERR_DEVICE;
    pthread_once(&range_once, resolve_range);
    memset(w, 0, HN_IPC_HANDLE_BYTES);
    if (cudaPointerGetAttributes(&at, p) != cudaSuccess || at.type != cudaMemoryTypeDevice || at.device != ord) {
        (void)cudaGetLastError();
        snprintf(why, len, "%p is no memory of device %d", p, ord);
        return HN_ERR_INVALID;
    }
    if (range_of == NULL || retain == NULL || props_of == NULL || attr_of == NULL) {
        snprintf(why, len, "the driver lacks what hands memory over");
        return HN_ERR_INVALID;
    }
    if (range_of(&b, &n, (CUdeviceptr)(uintptr_t)p) != CUDA_SUCCESS) {
        snprintf(why, len, "the driver gives no allocation around %p", p);
        return HN_ERR_INVALID;
    }
    w->key.kind = IPC_CUDA;
    if ((e = cudaIpcGetMemHandle(&w->key.u.cuda, (void *)(uintptr_t)b)) == cudaSuccess) {
        *base = (void *)(uintptr_t)b;
        *bytes = n;
        return HN_OK;
    }
    (void)cudaGetLastError();
    /* no CUDA IPC handle: memory cuMem mapped has an allocation handle instead */
    memset(w, 0, HN_IPC_HANDLE_BYTES);
    if (retain(&h, (void *)(uintptr_t)p) == CUDA_SUCCESS) {
        const uintptr_t a = (uintptr_t)p, from = lo < hi ? HN_MIN(a, lo) : a;
        const uintptr_t to = lo < hi ? HN_MAX(a + need, hi) : a + need;
        (void)drv.release(h);
        /* the union with what earlier registrations covered, where it is still one run of allocations */
        if (from != a || to != a + need) {
            if (export_cumem(ord, (CUdeviceptr)from, to - from, base, bytes, w, why, len) == HN_OK)
                return HN_OK;
            memset(w, 0, HN_IPC_HANDLE_BYTES);
        }
        return export_cumem(ord, (CUdeviceptr)(uintptr_t)p, need, base, bytes, w, why, len);
    }
    snprintf(why, len, "the allocation at %p (%zu bytes) has neither a CUDA IPC handle (%s) nor a cuMem one",
             (void *)(uintptr_t)b, n, cudaGetErrorString(e));
    return HN_ERR_INVALID;
}

static void share_ipc_done(int ord, void *handle)
{
    ipc_wire *w = handle;
    (void)ord;
    if (w->key.kind == IPC_CUMEM)
        for (uint32_t k = 0; k < w->key.n && k < CUMEM_MAX; k++)
            if (w->fd[k] >= 0)
                close(w->fd[k]);
    memset(w->fd, 0xff, sizeof(w->fd)); /* (-1: closed) */
}

/* This process's mappings of other processes' cuMem memory: their range,
 * unmapped by ipc_close */
typedef struct cumem_map {
    CUdeviceptr at;
    size_t bytes;
    struct cumem_map *next;
} cumem_map;
static cumem_map *cumem_maps;
static pthread_mutex_t cumem_mu = PTHREAD_MUTEX_INITIALIZER;

static int pidfd_of(pid_t pid) { return (int)syscall(SYS_pidfd_open, pid, 0); }

/* another process's cuMem allocations, one after another in a range of ours */
static hn_status_t open_cumem(int ord, const ipc_wire *w, void **local)
{
    CUdeviceptr at = 0;
    size_t total = 0, done = 0;
    CUmemAccessDesc access;
    cumem_map *m = hn_calloc(1, sizeof(*m));
    int pidfd = -1;
    hn_status_t st = HN_ERR_DEVICE;
    if (m == NULL)
        return HN_ERR_NOMEM;
    for (uint32_t k = 0; k < w->key.n && k < CUMEM_MAX; k++)
        total += w->key.u.seg[k].bytes;
    if (w->key.n == 0 || w->key.n > CUMEM_MAX || (pidfd = pidfd_of(w->key.pid)) < 0) {
        HN_ERROR("cuda: device %d: cannot reach process %d to take its memory's descriptors: %s", ord,
                 (int)w->key.pid, strerror(errno));
        goto fail;
    }
    if (!check(drv.reserve(&at, total, (size_t)2 << 20, 0, 0), "cuMemAddressReserve", ord))
        goto fail;
    for (uint32_t k = 0; k < w->key.n; k++) {
        CUmemGenericAllocationHandle h;
        const int fd = (int)syscall(SYS_pidfd_getfd, pidfd, w->fd[k], 0);
        CUresult r;
        if (fd < 0) {
            HN_ERROR("cuda: device %d: cannot take descriptor %d of process %d (%s): taking another process's "
                     "descriptors needs the permission to trace it (the kernel's Yama setting, "
                     "/proc/sys/kernel/yama/ptrace_scope, may forbid it); allocate without expandable segments, "
                     "or with hn_runtime_alloc", ord, (int)w->fd[k], (int)w->key.pid, strerror(errno));
            goto fail;
        }
        r = drv.import_fd(&h, (void *)(uintptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
        close(fd);
        if (!check(r, "cuMemImportFromShareableHandle", ord))
            goto fail;
        r = drv.map(at + done, w->key.u.seg[k].bytes, 0, h, 0);
        (void)drv.release(h); /* the mapping keeps the memory */
        if (!check(r, "cuMemMap", ord))
            goto fail;
        done += w->key.u.seg[k].bytes;
    }
    memset(&access, 0, sizeof(access));
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = ord;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    if (!check(drv.access(at, total, &access, 1), "cuMemSetAccess", ord))
        goto fail;
    close(pidfd);
    m->at = at;
    m->bytes = total;
    pthread_mutex_lock(&cumem_mu);
    m->next = cumem_maps;
    cumem_maps = m;
    pthread_mutex_unlock(&cumem_mu);
    *local = (void *)(uintptr_t)at;
    return HN_OK;
fail:
    for (size_t off = 0, k = 0; off < done; off += w->key.u.seg[k++].bytes)
        (void)drv.unmap(at + off, w->key.u.seg[k].bytes);
    if (at != 0)
        (void)drv.addr_free(at, total);
    if (pidfd >= 0)
        close(pidfd);
    hn_free(m);
    return st;
}

static hn_status_t share_ipc_open(int ord, const void *handle, void **local)
{
    const ipc_wire *w = handle;
    if (!ready(ord))
        return HN_ERR_DEVICE;
    if (w->key.kind == IPC_CUMEM)
        return open_cumem(ord, w, local);
    if (cudaIpcOpenMemHandle(local, w->key.u.cuda, cudaIpcMemLazyEnablePeerAccess) != cudaSuccess) {
        HN_ERROR("cuda: cudaIpcOpenMemHandle on device %d: %s", ord, cudaGetErrorString(cudaGetLastError()));
        return HN_ERR_DEVICE;
    }
    return HN_OK;
}

static void share_ipc_close(int ord, void *local)
{
    cumem_map **l, *m;
    if (!ready(ord))
        return;
    pthread_mutex_lock(&cumem_mu);
    for (l = &cumem_maps; *l != NULL && (*l)->at != (CUdeviceptr)(uintptr_t)local; l = &(*l)->next)
        ;
    m = *l;
    if (m != NULL)
        *l = m->next;
    pthread_mutex_unlock(&cumem_mu);
    if (m != NULL) { /* one range of several allocations: unmapped whole */
        (void)check(drv.unmap(m->at, m->bytes), "cuMemUnmap", ord);
        (void)check(drv.addr_free(m->at, m->bytes), "cuMemAddressFree", ord);
        hn_free(m);
        return;
    }
    if (cudaIpcCloseMemHandle(local) != cudaSuccess)
        HN_ERROR("cuda: cudaIpcCloseMemHandle on device %d: %s", ord, cudaGetErrorString(cudaGetLastError()));
}

const hn_share_ops hn_cuda_share = {share_reserve,    share_unreserve, share_make,     share_unmake,
                                    share_map,        share_unmap,     share_default_bytes,
                                    share_ipc_export, share_ipc_done,  share_ipc_open, share_ipc_close};
