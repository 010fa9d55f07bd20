/* The CUDA backend's device memory shared across processes (hn_share_ops,
 * device.h): each rank's memory is one cuMem allocation that its process
 * exports as a file descriptor (CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
 * every process imports every rank's and maps it at the same address,
 * inside a range reserved there with cuMemAddressReserve, with access for
 * its own device — as NCCL's and PyTorch's symmetric memory do. The
 * driver's entry points come through the runtime (no libcuda link). */
#include <pthread.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
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

/* Caller memory across processes: CUDA IPC of the cudaMalloc allocation
 * p points into (the driver gives its range; torch's caching allocator
 * hands out pieces of such allocations), opened by the others with peer
 * access enabled lazily, as vLLM's custom allreduce registers its graph
 * buffers. Memory cuMem made (torch's expandable segments) has no IPC
 * handle of this kind: named. */
typedef CUresult (*range_fn)(CUdeviceptr *, size_t *, CUdeviceptr);
static range_fn range_of;
static pthread_once_t range_once = PTHREAD_ONCE_INIT;
static void resolve_range(void) { range_of = (range_fn)entry("cuMemGetAddressRange"); }

_Static_assert(sizeof(cudaIpcMemHandle_t) == HN_IPC_HANDLE_BYTES, "a CUDA IPC handle is 64 bytes");

static hn_status_t share_ipc_export(int ord, const void *p, void **base, size_t *bytes, void *handle, char *why,
                                    size_t len)
{
    struct cudaPointerAttributes at;
    CUdeviceptr b = 0;
    size_t n = 0;
    cudaError_t e;
    if (!ready(ord))
        return HN_ERR_DEVICE;
    pthread_once(&range_once, resolve_range);
    if (cudaPointerGetAttributes(&at, p) != cudaSuccess || at.type != cudaMemoryTypeDevice || at.device != ord) {
        (void)cudaGetLastError();
        snprintf(why, len, "%p is no memory of device %d", p, ord);
        return HN_ERR_INVALID;
    }
    if (range_of == NULL || range_of(&b, &n, (CUdeviceptr)(uintptr_t)p) != CUDA_SUCCESS) {
        snprintf(why, len, "the driver gives no allocation around %p", p);
        return HN_ERR_INVALID;
    }
    if ((e = cudaIpcGetMemHandle((cudaIpcMemHandle_t *)handle, (void *)(uintptr_t)b)) != cudaSuccess) {
        (void)cudaGetLastError();
        snprintf(why, len, "the allocation at %p (%zu bytes) has no CUDA IPC handle (%s): memory of cudaMalloc "
                 "can be handed over, not memory cuMem made (torch: PYTORCH_CUDA_ALLOC_CONF without "
                 "expandable_segments), or allocate it with hn_runtime_alloc", (void *)(uintptr_t)b, n,
                 cudaGetErrorString(e));
        return HN_ERR_INVALID;
    }
    *base = (void *)(uintptr_t)b;
    *bytes = n;
    return HN_OK;
}

static hn_status_t share_ipc_open(int ord, const void *handle, void **local)
{
    cudaIpcMemHandle_t h;
    memcpy(&h, handle, sizeof(h));
    if (!ready(ord))
        return HN_ERR_DEVICE;
    if (cudaIpcOpenMemHandle(local, h, cudaIpcMemLazyEnablePeerAccess) != cudaSuccess) {
        HN_ERROR("cuda: cudaIpcOpenMemHandle on device %d: %s", ord, cudaGetErrorString(cudaGetLastError()));
        return HN_ERR_DEVICE;
    }
    return HN_OK;
}

static void share_ipc_close(int ord, void *local)
{
    if (ready(ord) && cudaIpcCloseMemHandle(local) != cudaSuccess)
        HN_ERROR("cuda: cudaIpcCloseMemHandle on device %d: %s", ord, cudaGetErrorString(cudaGetLastError()));
}

const hn_share_ops hn_cuda_share = {share_reserve,       share_unreserve,  share_make,      share_unmake,
                                    share_map,           share_unmap,      share_default_bytes,
                                    share_ipc_export,    share_ipc_open,   share_ipc_close};
