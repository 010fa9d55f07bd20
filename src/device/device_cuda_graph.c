/* Graphs of the CUDA backend: a stream capture per rank, instantiated;
 * updated in place by a new capture (cudaGraphExecUpdate) or, once it
 * learned where its nodes hold the bindings, by moving those pointers with
 * no capture (repoint.h): a kernel node's arguments, a copy's or a
 * memset's addresses. Learning compares two captures node by node in
 * cudaGraphGetNodes' order (the order of issue); nodes paired wrongly
 * differ in their functions or arguments, so nothing is learned from them.
 * A repoint writes nodes of one capture only: once a capture taught where
 * the pointers lie, exec is instantiated anew from it, and a repoint sets
 * exec's nodes through that capture's nodes (cudaGraphExec*NodeSetParams);
 * where that instantiation failed, the capture's nodes are set and update
 * exec (cudaGraphExecUpdate pairs the nodes by the topology). A binding
 * moves in place only to memory of the kind it was learned in (type,
 * device, pool): libraries pick their code by it. */
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cuda.h> /* the driver's kernel node parameters: entry points through the runtime, no libcuda link */

#include "cuda_check.h"
#include "device_cuda.h"
#include "repoint.h"

/* A node of the captured graph, as graph_repoint writes it. */
typedef struct cnode {
    cudaGraphNode_t node; /* in `graph` */
    enum cudaGraphNodeType type;
    CUDA_KERNEL_NODE_PARAMS kp; /* kernels: all but kernelParams */
    int nparams;  /* -1: the arguments are one buffer (the launch's `extra`), of `bytes` */
    size_t bytes;
    size_t *off; /* [nparams]: each argument's offset in the image's arguments */
} cnode;

/* graph: the capture exec was made from, or the last one that updated it
 * (kept while exec runs its nodes: NCCL ties the memory its captured
 * kernels read to the captured graph's lifetime, through user objects);
 * what graph_repoint moves is set in it, then put into exec */
struct hn_dgraph {
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    int dev, ord;
    hn_repoint rp; /* images of graph's nodes (exec runs them), and what is learned */
    cnode *nodes;  /* [nnodes]: graph's nodes as learned (NULL: none) */
    int nnodes;
    int stale;     /* a repoint failed part way: graph's pointers are not the bindings' (learn nothing from it) */
    int direct;    /* exec was instantiated from graph: a repoint sets exec's nodes itself */
    uint64_t *kinds; /* [rp.nm] while learned: the kind of memory each binding was when learned (kind_of) */
};

/* ---- the driver's calls on kernel nodes, resolved once ---- */

typedef CUresult (*kernel_get_fn)(CUgraphNode, CUDA_KERNEL_NODE_PARAMS *);
typedef CUresult (*kernel_set_fn)(CUgraphNode, const CUDA_KERNEL_NODE_PARAMS *);
typedef CUresult (*exec_kernel_set_fn)(CUgraphExec, CUgraphNode, const CUDA_KERNEL_NODE_PARAMS *);
typedef CUresult (*func_name_fn)(const char **, CUfunction);
typedef CUresult (*pointer_attr_fn)(void *, CUpointer_attribute, CUdeviceptr);
typedef CUresult (*func_param_fn)(CUfunction, size_t, size_t *, size_t *);
typedef CUresult (*kern_param_fn)(CUkernel, size_t, size_t *, size_t *);

static struct {
    kernel_get_fn get;
    kernel_set_fn set;
    exec_kernel_set_fn exec_set;
    func_param_fn func_param;
    kern_param_fn kern_param;
    func_name_fn name;
    pointer_attr_fn attr;
    int state; /* 0 not tried, 1 resolved, -1 missing */
} drv;
static pthread_once_t drv_once = PTHREAD_ONCE_INIT;

static void *entry(const char *name, int version)
{
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion(name, &fn, (unsigned)version, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess) {
        (void)cudaGetLastError();
        return NULL;
    }
    return fn;
}

static void resolve_driver(void)
{
    drv.get = (kernel_get_fn)entry("cuGraphKernelNodeGetParams", 12000);
    drv.set = (kernel_set_fn)entry("cuGraphKernelNodeSetParams", 12000);
    drv.exec_set = (exec_kernel_set_fn)entry("cuGraphExecKernelNodeSetParams", 12000);
    drv.name = (func_name_fn)entry("cuFuncGetName", 12030); /* logs only: may be missing */
    drv.attr = (pointer_attr_fn)entry("cuPointerGetAttribute", 12000);
    drv.func_param = (func_param_fn)entry("cuFuncGetParamInfo", 12040);
    drv.kern_param = (kern_param_fn)entry("cuKernelGetParamInfo", 12040);
    drv.state = drv.get != NULL && drv.set != NULL && drv.exec_set != NULL && drv.func_param != NULL &&
                        drv.kern_param != NULL && drv.attr != NULL
                    ? 1
                    : -1;
    if (drv.state < 0)
        HN_INFO("the CUDA driver lacks the calls to read kernel nodes' arguments: rebinds capture again");
}

/* ---- images of a graph's nodes ---- */

enum { K_TYPE, K_FUNC, K_KERN, K_GRID_XY, K_GRID_Z_BLOCK_X, K_BLOCK_YZ, K_SHMEM, K_NPARAMS, K_HEAD };

/* A node whose image can never match another capture's: learning fails. */
static int opaque(hn_images *im, cudaGraphNode_t node, enum cudaGraphNodeType type)
{
    uint64_t w[2] = {(uint64_t)type | 0x100, (uintptr_t)node};
    return hn_images_add(im, w, sizeof(w));
}

/* The argument buffer of a launch given as `extra` (NCCL's kernels), or NULL. */
static const void *extra_buffer(void **extra, size_t *bytes)
{
    const void *buf = NULL;
    *bytes = 0;
    for (int i = 0; extra != NULL && i < 8 && extra[i] != CU_LAUNCH_PARAM_END; i += 2)
        if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
            buf = extra[i + 1];
        else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE)
            *bytes = *(const size_t *)extra[i + 1];
        else
            return NULL;
    return *bytes > 0 ? buf : NULL;
}

/* A kernel node: launch shape and function, then its arguments at their
 * offsets (or its argument buffer). info (NULL: not wanted) gets the
 * parameters for setting them. */
static int kernel_image(hn_images *im, cudaGraphNode_t node, cnode *info)
{
    CUDA_KERNEL_NODE_PARAMS kp;
    size_t off[256], size[256], end = 0;
    int n = 0, rc;
    uint64_t *buf;
    const void *blob = NULL;
    memset(&kp, 0, sizeof(kp));
    if (drv.get((CUgraphNode)node, &kp) != CUDA_SUCCESS ||
        (kp.kernelParams == NULL && (blob = extra_buffer(kp.extra, &end)) == NULL))
        return opaque(im, node, cudaGraphNodeTypeKernel);
    for (; blob == NULL && n < 256; n++) {
        CUresult r = kp.func != NULL ? drv.func_param(kp.func, (size_t)n, &off[n], &size[n])
                                     : drv.kern_param(kp.kern, (size_t)n, &off[n], &size[n]);
        if (r == CUDA_ERROR_INVALID_VALUE) /* past the last argument */
            break;
        if (r != CUDA_SUCCESS)
            return opaque(im, node, cudaGraphNodeTypeKernel);
        if (off[n] + size[n] > end)
            end = off[n] + size[n];
    }
    if (n == 256 || end > ((size_t)32 << 10))
        return opaque(im, node, cudaGraphNodeTypeKernel);
    if ((buf = hn_calloc(K_HEAD + (end + 7) / 8 + 1, sizeof(uint64_t))) == NULL)
        return -1;
    buf[K_TYPE] = cudaGraphNodeTypeKernel;
    buf[K_FUNC] = (uintptr_t)kp.func;
    buf[K_KERN] = kp.func != NULL ? 0 : (uintptr_t)kp.kern;
    buf[K_GRID_XY] = kp.gridDimX | (uint64_t)kp.gridDimY << 32;
    buf[K_GRID_Z_BLOCK_X] = kp.gridDimZ | (uint64_t)kp.blockDimX << 32;
    buf[K_BLOCK_YZ] = kp.blockDimY | (uint64_t)kp.blockDimZ << 32;
    buf[K_SHMEM] = kp.sharedMemBytes;
    buf[K_NPARAMS] = blob != NULL ? UINT64_MAX : (uint64_t)n;
    if (blob != NULL)
        memcpy(buf + K_HEAD, blob, end);
    for (int i = 0; blob == NULL && i < n; i++)
        memcpy((char *)(buf + K_HEAD) + off[i], kp.kernelParams[i], size[i]);
    rc = hn_images_add(im, buf, K_HEAD * sizeof(uint64_t) + end);
    hn_free(buf);
    if (rc == 0 && info != NULL) {
        kp.kernelParams = NULL;
        kp.extra = NULL;
        info->kp = kp;
        info->nparams = blob != NULL ? -1 : n;
        info->bytes = end;
        if ((info->off = hn_malloc(((size_t)n + 1) * sizeof(size_t))) == NULL)
            return -1;
        memcpy(info->off, off, (size_t)n * sizeof(size_t));
    }
    return rc;
}

static int node_image(hn_images *im, cudaGraphNode_t node, cnode *info)
{
    enum cudaGraphNodeType type;
    if (cudaGraphNodeGetType(node, &type) != cudaSuccess) {
        (void)cudaGetLastError();
        return opaque(im, node, cudaGraphNodeTypeCount);
    }
    if (info != NULL)
        info->type = type;
    switch (type) {
    case cudaGraphNodeTypeKernel: return kernel_image(im, node, info);
    case cudaGraphNodeTypeMemcpy: {
        struct {
            uint64_t type;
            struct cudaMemcpy3DParms p;
        } w;
        memset(&w, 0, sizeof(w));
        w.type = type;
        if (cudaGraphMemcpyNodeGetParams(node, &w.p) != cudaSuccess)
            break;
        return hn_images_add(im, &w, sizeof(w));
    }
    case cudaGraphNodeTypeMemset: {
        struct {
            uint64_t type;
            struct cudaMemsetParams p;
        } w;
        memset(&w, 0, sizeof(w));
        w.type = type;
        if (cudaGraphMemsetNodeGetParams(node, &w.p) != cudaSuccess)
            break;
        return hn_images_add(im, &w, sizeof(w));
    }
    case cudaGraphNodeTypeEventRecord:
    case cudaGraphNodeTypeWaitEvent: {
        uint64_t w[2] = {(uint64_t)type, 0};
        cudaEvent_t e = NULL;
        if ((type == cudaGraphNodeTypeEventRecord ? cudaGraphEventRecordNodeGetEvent(node, &e)
                                                  : cudaGraphEventWaitNodeGetEvent(node, &e)) != cudaSuccess)
            break;
        w[1] = (uintptr_t)e;
        return hn_images_add(im, w, sizeof(w));
    }
    case cudaGraphNodeTypeEmpty: {
        uint64_t w = (uint64_t)type;
        return hn_images_add(im, &w, sizeof(w));
    }
    default: break; /* memory operations, host work, child graphs: nothing known of them */
    }
    (void)cudaGetLastError();
    return opaque(im, node, type);
}

static void nodes_free(hn_dgraph *g)
{
    for (int i = 0; g->nodes != NULL && i < g->nnodes; i++)
        hn_free(g->nodes[i].off);
    hn_free(g->nodes);
    g->nodes = NULL;
    g->nnodes = 0;
}

/* Every node of graph as images into im, in cudaGraphGetNodes' order (a
 * capture's: the order of issue); with want_info, g->nodes says how to set
 * each of graph's nodes. */
static int images_of(hn_dgraph *g, cudaGraph_t graph, hn_images *im, int want_info)
{
    size_t n = 0;
    cudaGraphNode_t *nodes = NULL;
    int rc = 0;
    if (cudaGraphGetNodes(graph, NULL, &n) != cudaSuccess || (nodes = hn_calloc(n + 1, sizeof(*nodes))) == NULL ||
        cudaGraphGetNodes(graph, nodes, &n) != cudaSuccess)
        rc = -1;
    if (rc == 0 && want_info) {
        nodes_free(g);
        if ((g->nodes = hn_calloc(n + 1, sizeof(cnode))) == NULL)
            rc = -1;
        else
            g->nnodes = (int)n;
    }
    for (size_t i = 0; i < n && rc == 0; i++) {
        cnode *info = want_info ? &g->nodes[i] : NULL;
        if (info != NULL)
            info->node = nodes[i];
        rc = node_image(im, nodes[i], info);
    }
    (void)cudaGetLastError();
    hn_free(nodes);
    return rc;
}

/* Whether every pointer learned lies where a node's parameters can take
 * another: a kernel's arguments, a copy's source and destination, a
 * memset's destination. */
static int slots_writable(const hn_dgraph *g)
{
    const size_t copy_src = 1 + offsetof(struct cudaMemcpy3DParms, srcPtr) / 8,
                 copy_dst = 1 + offsetof(struct cudaMemcpy3DParms, dstPtr) / 8,
                 set_dst = 1 + offsetof(struct cudaMemsetParams, dst) / 8;
    for (int i = 0; i < g->rp.nslots; i++) {
        const hn_slot *s = &g->rp.slots[i];
        size_t k = s->word - g->rp.cur.at[s->node];
        enum cudaGraphNodeType t = g->nodes[s->node].type;
        if (!(t == cudaGraphNodeTypeKernel && k >= K_HEAD) &&
            !(t == cudaGraphNodeTypeMemcpy && (k == copy_src || k == copy_dst)) &&
            !(t == cudaGraphNodeTypeMemset && k == set_dst))
            return 0;
    }
    return 1;
}

/* What node i of g's new capture runs, for logs. */
static const char *node_name(const hn_dgraph *g, int i)
{
    const char *name = NULL;
    if (i < 0 || i >= g->nnodes)
        return "?";
    if (g->nodes[i].type != cudaGraphNodeTypeKernel)
        return g->nodes[i].type == cudaGraphNodeTypeMemcpy ? "a copy" : g->nodes[i].type == cudaGraphNodeTypeMemset
                                                                            ? "a memset" : "another kind of node";
    if (drv.name == NULL || g->nodes[i].kp.func == NULL || drv.name(&name, g->nodes[i].kp.func) != CUDA_SUCCESS)
        return "a kernel";
    return name;
}

/* The kind of memory p lies in, as libraries pick their code by it (the
 * memory type, its device, whether it is a pool's); 0 where CUDA does not
 * know p. */
static uint64_t kind_of(uintptr_t p)
{
    struct cudaPointerAttributes at;
    void *pool = NULL;
    if (cudaPointerGetAttributes(&at, (const void *)p) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    if (drv.attr(&pool, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, (CUdeviceptr)p) != CUDA_SUCCESS)
        pool = NULL;
    return (uint64_t)(at.type + 1) | (uint64_t)(at.device + 1) << 8 | (uint64_t)(pool != NULL) << 24;
}

/* Whether every binding m moves lies in memory of the kind it was learned in. */
static int same_kinds(const hn_dgraph *g, const hn_moved *m, int nm)
{
    if (g->kinds == NULL || nm != g->rp.nm)
        return 0;
    for (int j = 0; j < nm; j++)
        if (m[j].from != m[j].to && m[j].bytes > 0 && kind_of(m[j].to) != g->kinds[j])
            return 0;
    return 1;
}

/* After exec took `graph` (a capture whose bindings moved by m from the
 * ones before): learns where its nodes hold them. */
static void learn(hn_dgraph *g, cudaGraph_t before, cudaGraph_t graph, const hn_moved *m, int nm)
{
    hn_images next = {0};
    const char *why = NULL;
    int rc;
    pthread_once(&drv_once, resolve_driver);
    if (drv.state < 0)
        return;
    if (g->stale) /* before does not hold the bindings m moves from: the next rebind learns */
        return;
    rc = g->rp.cur.n == 0 ? images_of(g, before, &g->rp.cur, 0) : 0;
    if (rc == 0)
        rc = images_of(g, graph, &next, 1);
    if (rc == 0)
        rc = hn_repoint_learn(&g->rp, &next, m, nm, &why);
    hn_images_free(&next);
    if (rc == 1 && !slots_writable(g)) {
        rc = 0;
        why = "a pointer lies in a node whose parameters cannot take another";
    }
    if (rc == 1) {
        hn_free(g->kinds);
        if ((g->kinds = hn_calloc((size_t)nm + 1, sizeof(*g->kinds))) != NULL) {
            for (int j = 0; j < nm; j++)
                g->kinds[j] = m[j].bytes > 0 ? kind_of(m[j].to) : 0;
            HN_DEBUG("device %d: a rebind learned %d pointers in %d nodes", g->ord, g->rp.nslots, g->rp.cur.n);
            return;
        }
        why = "out of memory";
        rc = -1;
    }
    HN_INFO("device %d: rebinds of this graph capture again: %s (node %d of %d%s%s, word %d)", g->ord,
            why != NULL ? why : "its nodes could not be read", g->rp.bad_node, g->nnodes,
            rc == 0 ? ": " : "", rc == 0 ? node_name(g, g->rp.bad_node) : "", g->rp.bad_word);
    nodes_free(g);
    hn_repoint_free(&g->rp); /* the next learning reads the graph again */
}

/* ---- capture, update, repoint, launch ---- */

/* thread-local mode: a call of this thread that cannot be captured (a
 * synchronous copy, an allocation) fails the capture instead of running
 * outside it */
hn_status_t hn_cuda_capture_begin(hn_dstream *s)
{
    return HN_CUDA_STATUS(cudaStreamBeginCapture(s->s, cudaStreamCaptureModeThreadLocal));
}

/* A user object of the capture's graph: CUDA drops it once the graph, its
 * instances and their launches are gone, and calls release then (on a
 * thread of its own) */
hn_status_t hn_cuda_native_capture_keep(void *native, void (*release)(void *arg), void *arg)
{
    enum cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
    cudaGraph_t graph = NULL;
    cudaUserObject_t keep = NULL;
    hn_status_t st;
    if (native == NULL || release == NULL)
        return HN_ERR_INVALID;
    if ((st = HN_CUDA_STATUS(cudaStreamGetCaptureInfo((cudaStream_t)native, &cap, NULL, &graph, NULL, NULL,
                                                      NULL))) != HN_OK)
        return st;
    if (cap != cudaStreamCaptureStatusActive || graph == NULL)
        return HN_ERR_INVALID;
    if ((st = HN_CUDA_STATUS(cudaUserObjectCreate(&keep, arg, release, 1, cudaUserObjectNoDestructorSync))) != HN_OK)
        return st;
    /* the graph takes the one reference: release runs when the graph lets go */
    if ((st = HN_CUDA_STATUS(cudaGraphRetainUserObject(graph, keep, 1, cudaGraphUserObjectMove))) != HN_OK) {
        /* dropped without its destructor's effect: the caller undoes what it counted */
        (void)cudaUserObjectRelease(keep, 1);
        return st;
    }
    return HN_OK;
}

hn_status_t hn_cuda_capture_end(hn_dstream *s, hn_dgraph **out)
{
    hn_dgraph *g = hn_calloc(1, sizeof(*g));
    cudaGraph_t graph = NULL;
    const cudaError_t e = cudaStreamEndCapture(s->s, &graph);
    hn_status_t st;
    *out = NULL;
    if (e == cudaErrorStreamCaptureUnjoined) { /* said as the host backend says it */
        (void)cudaGetLastError();
        HN_ERROR("cuda device %d: capture: a stream of the capture was not joined back into its origin", s->ord);
        st = HN_ERR_INVALID;
    } else {
        st = hn_cuda_status(e, "cudaStreamEndCapture", __FILE__, __LINE__);
    }
    if (st != HN_OK || g == NULL) {
        if (graph != NULL)
            (void)cudaGraphDestroy(graph);
        hn_free(g);
        return st != HN_OK ? st : HN_ERR_NOMEM;
    }
    g->graph = graph;
    g->dev = s->dev;
    g->ord = s->ord;
    if ((st = HN_CUDA_STATUS(cudaGraphInstantiate(&g->exec, graph, 0))) != HN_OK) {
        (void)cudaGraphDestroy(graph);
        hn_free(g);
        return st;
    }
    *out = g;
    return HN_OK;
}

/* From any thread (a replay of one rank runs on the caller's): the launch
 * goes to the graph's device, and the thread's current device is left as
 * it was. */
hn_status_t hn_cuda_graph_launch(hn_dgraph *g, hn_dstream *s)
{
    int cur = -1;
    hn_status_t st;
    if (s->dev != g->dev) {
        HN_ERROR("a graph of device %d launched on a stream of device %d", g->dev, s->dev);
        return HN_ERR_INVALID;
    }
    if (cudaGetDevice(&cur) != cudaSuccess)
        cur = -1;
    if (cur != g->ord)
        (void)HN_CUDA_STATUS(cudaSetDevice(g->ord));
    st = HN_CUDA_STATUS(cudaGraphLaunch(g->exec, s->s));
    if (cur >= 0 && cur != g->ord)
        (void)cudaSetDevice(cur);
    return st;
}

void hn_cuda_graph_destroy(hn_dgraph *g)
{
    int cur = -1;
    if (g == NULL)
        return;
    if (cudaGetDevice(&cur) != cudaSuccess)
        cur = -1;
    (void)cudaSetDevice(g->ord);
    (void)HN_CUDA_STATUS(cudaGraphExecDestroy(g->exec));
    (void)HN_CUDA_STATUS(cudaGraphDestroy(g->graph));
    if (cur >= 0 && cur != g->ord)
        (void)cudaSetDevice(cur);
    nodes_free(g);
    hn_repoint_free(&g->rp);
    hn_free(g->kinds);
    hn_free(g);
}

/* On the rank's thread (its device current), none of g's launches in
 * flight: the new capture's node parameters (other buffers) into the
 * instantiated graph, which keeps its launch cost. The new capture is kept
 * as g's graph (what its kernels' memory lives with); the one before goes,
 * nothing in flight reading what it holds. With m, learns how the buffers
 * moved. */
hn_status_t hn_cuda_capture_update(hn_dstream *s, hn_dgraph *g, const hn_moved *m, int nm)
{
    cudaGraph_t graph = NULL;
    cudaGraphExecUpdateResultInfo info;
    cudaError_t e;
    hn_status_t st = HN_CUDA_STATUS(cudaStreamEndCapture(s->s, &graph));
    if (st != HN_OK) {
        if (graph != NULL)
            (void)cudaGraphDestroy(graph);
        return st;
    }
    memset(&info, 0, sizeof(info));
    e = cudaGraphExecUpdate(g->exec, graph, &info);
    if (e == cudaErrorGraphExecUpdateFailure) { /* refused, not failed: the caller captures again */
        (void)cudaGetLastError();
        HN_WARN("device %d: the graph could not be updated in place (cudaGraphExecUpdate result %d: the new "
                "capture's structure differs)", g->ord, (int)info.result);
        (void)cudaGraphDestroy(graph);
        return HN_ERR_UNSUPPORTED;
    }
    if ((st = HN_CUDA_STATUS(e)) != HN_OK) {
        (void)cudaGraphDestroy(graph);
        return st;
    }
    g->direct = 0;
    if (m != NULL) {
        learn(g, g->graph, graph, m, nm);
    } else {
        nodes_free(g);
        hn_repoint_free(&g->rp);
    }
    (void)HN_CUDA_STATUS(cudaGraphDestroy(g->graph));
    g->graph = graph;
    g->stale = 0; /* graph is a whole capture again */
    if (g->rp.learned) { /* exec made anew from graph: repoints set exec's nodes with no update */
        cudaGraphExec_t exec = NULL;
        if (cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess) {
            (void)HN_CUDA_STATUS(cudaGraphExecDestroy(g->exec));
            g->exec = exec;
            g->direct = 1;
        } else {
            (void)cudaGetLastError(); /* exec as updated serves: repoints update it from graph */
        }
    }
    return HN_OK;
}

/* One node of g's captured graph from its image (rp.cur). */
static hn_status_t write_node(hn_dgraph *g, int i)
{
    const cnode *c = &g->nodes[i];
    uint64_t *w = g->rp.cur.w + g->rp.cur.at[i];
    cudaError_t e = cudaSuccess;
    if (c->type == cudaGraphNodeTypeKernel) {
        CUDA_KERNEL_NODE_PARAMS kp = c->kp;
        void *args[256];
        size_t bytes = c->bytes;
        void *extra[5] = {CU_LAUNCH_PARAM_BUFFER_POINTER, w + K_HEAD, CU_LAUNCH_PARAM_BUFFER_SIZE, &bytes,
                          CU_LAUNCH_PARAM_END};
        CUresult r;
        for (int k = 0; k < c->nparams; k++)
            args[k] = (char *)(w + K_HEAD) + c->off[k];
        kp.kernelParams = c->nparams >= 0 ? args : NULL;
        kp.extra = c->nparams >= 0 ? NULL : extra;
        r = g->direct ? drv.exec_set((CUgraphExec)g->exec, (CUgraphNode)c->node, &kp)
                      : drv.set((CUgraphNode)c->node, &kp);
        if (r != CUDA_SUCCESS) {
            HN_ERROR("device %d: setting a kernel node's arguments failed (%d)", g->ord, (int)r);
            return HN_ERR_DEVICE;
        }
        return HN_OK;
    }
    if (c->type == cudaGraphNodeTypeMemcpy) {
        struct cudaMemcpy3DParms p;
        memcpy(&p, w + 1, sizeof(p));
        e = g->direct ? cudaGraphExecMemcpyNodeSetParams(g->exec, c->node, &p) : cudaGraphMemcpyNodeSetParams(c->node, &p);
    } else if (c->type == cudaGraphNodeTypeMemset) {
        struct cudaMemsetParams p;
        memcpy(&p, w + 1, sizeof(p));
        e = g->direct ? cudaGraphExecMemsetNodeSetParams(g->exec, c->node, &p) : cudaGraphMemsetNodeSetParams(c->node, &p);
    }
    return HN_CUDA_STATUS(e);
}

/* Any thread: the graph's device is made current for the calls. The
 * moved nodes are set in g's captured graph, which then updates exec. */
hn_status_t hn_cuda_graph_repoint(hn_dgraph *g, const hn_moved *m, int nm, int check)
{
    unsigned char *changed;
    cudaGraphExecUpdateResultInfo info;
    hn_status_t st = HN_OK;
    const char *why = NULL;
    int cur = -1, wrote = 0;
    if (g->nodes == NULL || !g->rp.learned || g->nnodes != g->rp.cur.n)
        return HN_ERR_UNSUPPORTED;
    if (!same_kinds(g, m, nm)) {
        HN_DEBUG("device %d: a rebind captures again: a buffer moves to another kind of memory", g->ord);
        return HN_ERR_UNSUPPORTED;
    }
    if (check)
        return hn_repoint_move(&g->rp, m, nm, NULL, &why) == 1 ? HN_OK : HN_ERR_UNSUPPORTED;
    if ((changed = hn_calloc((size_t)g->rp.cur.n + 1, 1)) == NULL)
        return HN_ERR_NOMEM;
    if (hn_repoint_move(&g->rp, m, nm, changed, &why) != 1) {
        HN_DEBUG("device %d: a rebind captures again: %s", g->ord, why);
        hn_free(changed);
        return HN_ERR_UNSUPPORTED;
    }
    if (cudaGetDevice(&cur) != cudaSuccess)
        cur = -1;
    if (cur != g->ord)
        (void)HN_CUDA_STATUS(cudaSetDevice(g->ord));
    for (int i = 0; i < g->rp.cur.n && st == HN_OK; i++)
        if (changed[i] && (st = write_node(g, i)) == HN_OK)
            wrote++;
    memset(&info, 0, sizeof(info));
    if (st == HN_OK && wrote > 0 && !g->direct)
        st = HN_CUDA_STATUS(cudaGraphExecUpdate(g->exec, g->graph, &info));
    if (cur >= 0 && cur != g->ord)
        (void)cudaSetDevice(cur);
    hn_free(changed);
    if (st != HN_OK) { /* exec holds part of the move, graph older pointers: learn nothing from graph */
        nodes_free(g);
        hn_repoint_free(&g->rp);
        g->stale = 1;
        g->direct = 0;
    }
    return st;
}
