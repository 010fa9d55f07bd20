/* A timeline of everything the GPUs ran, for any CUDA program, without
 * Nsight Systems: a CUDA injection library (the driver loads it when
 * CUDA_INJECTION64_PATH names it) that asks CUPTI for an activity record
 * of every kernel, copy (peer copies too) and memset — graph nodes one by one, with their
 * graph and node ids — and writes them, one line each, to the file
 * HN_TIMELINE_OUT names (default timeline.csv; %p in it becomes the
 * process id, a file per process) when the program exits.
 *
 *   make timeline
 *   CUDA_INJECTION64_PATH=$PWD/build/libhn_timeline.so hirnode bench collectives --graph ...
 *   python3 perf/timeline.py timeline.csv
 *
 * Columns: kind (kernel, memcpy, memset), device, stream, graph id, graph
 * node id, start and end (ns, CUPTI's clock, one for every device), grid
 * blocks, name.
 *
 * With HN_TIMELINE_API=1 it also records every CUDA runtime and driver
 * call the host made (kind runtime or driver; the device column holds the
 * process id, the stream column the thread id, the name the function),
 * so that the host's side of eager work can be compared call by call:
 * python3 perf/timeline.py --api timeline.csv. */
#include <cupti.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BUF_BYTES ((size_t)8 << 20)
#define ALIGN 8

static FILE *out;

static void CUPTIAPI buffer_requested(uint8_t **buf, size_t *size, size_t *max_records)
{
    *buf = aligned_alloc(ALIGN, BUF_BYTES); /* CUPTI asks for 8-byte alignment */
    *size = *buf == NULL ? 0 : BUF_BYTES;
    *max_records = 0;
}

/* One CSV row: what, device, stream, graph, node, start, end, grid, then
 * the name (kernels) or the bytes (copies, memsets). */
static void put_row(const char *what, uint32_t dev, uint32_t stream, uint32_t graph, uint64_t node, uint64_t start,
                    uint64_t end, unsigned grid, const char *tail, uint64_t bytes)
{
    fprintf(out, "%s,%u,%u,%u,%llu,%llu,%llu,%u,", what, dev, stream, graph, (unsigned long long)node,
            (unsigned long long)start, (unsigned long long)end, grid);
    if (tail != NULL)
        fprintf(out, "%s\n", tail);
    else
        fprintf(out, "%llu bytes\n", (unsigned long long)bytes);
}

static void write_record(const CUpti_Activity *r)
{
    if (out == NULL)
        return;
    switch (r->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)r;
        put_row("kernel", k->deviceId, k->streamId, k->graphId, k->graphNodeId, k->start, k->end,
                k->gridX * k->gridY * k->gridZ, k->name != NULL ? k->name : "?", 0);
        break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const CUpti_ActivityMemcpy6 *m = (const CUpti_ActivityMemcpy6 *)r;
        put_row("memcpy", m->deviceId, m->streamId, m->graphId, m->graphNodeId, m->start, m->end, 0, NULL, m->bytes);
        break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY2: { /* peer to peer: named memcpy too, its devices in the name */
        const CUpti_ActivityMemcpyPtoP4 *m = (const CUpti_ActivityMemcpyPtoP4 *)r;
        char tail[64];
        snprintf(tail, sizeof(tail), "%llu bytes peer %u to %u", (unsigned long long)m->bytes, m->srcDeviceId,
                 m->dstDeviceId);
        put_row("memcpy", m->deviceId, m->streamId, m->graphId, m->graphNodeId, m->start, m->end, 0, tail, 0);
        break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
        const CUpti_ActivityMemset4 *m = (const CUpti_ActivityMemset4 *)r;
        put_row("memset", m->deviceId, m->streamId, m->graphId, m->graphNodeId, m->start, m->end, 0, NULL, m->bytes);
        break;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
        const CUpti_ActivityAPI *a = (const CUpti_ActivityAPI *)r;
        const char *name = NULL;
        int runtime = r->kind == CUPTI_ACTIVITY_KIND_RUNTIME;
        if (cuptiGetCallbackName(runtime ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API, a->cbid, &name) !=
                CUPTI_SUCCESS ||
            name == NULL)
            name = "?";
        put_row(runtime ? "runtime" : "driver", a->processId, a->threadId, 0, 0, a->start, a->end, 0, name, 0);
        break;
    }
    default:
        break;
    }
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size, size_t valid)
{
    CUpti_Activity *r = NULL;
    (void)ctx;
    (void)stream;
    (void)size;
    while (valid > 0 && cuptiActivityGetNextRecord(buf, valid, &r) == CUPTI_SUCCESS)
        write_record(r);
    free(buf);
}

static void finish(void)
{
    cuptiActivityFlushAll(1);
    if (out != NULL)
        fclose(out);
    out = NULL;
}

/* Called by the CUDA driver when it loads this library. */
int InitializeInjection(void);
int InitializeInjection(void)
{
    const char *path = getenv("HN_TIMELINE_OUT"), *api = getenv("HN_TIMELINE_API");
    char name[4096];
    const char *pid = path != NULL ? strstr(path, "%p") : NULL;
    if (pid != NULL) /* one file per process: %p becomes the process id */
        snprintf(name, sizeof(name), "%.*s%ld%s", (int)(pid - path), path, (long)getpid(), pid + 2);
    else
        snprintf(name, sizeof(name), "%s", path != NULL && *path ? path : "timeline.csv");
    out = fopen(name, "w");
    if (out == NULL)
        return 0;
    fprintf(out, "kind,device,stream,graph,node,start,end,blocks,name\n");
    if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS ||
        cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS ||
        cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY) != CUPTI_SUCCESS ||
        cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY2) != CUPTI_SUCCESS ||
        cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET) != CUPTI_SUCCESS) {
        fprintf(stderr, "hn_timeline: CUPTI refused the activity records\n");
        return 0;
    }
    if (api != NULL && strcmp(api, "1") == 0 &&
        (cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME) != CUPTI_SUCCESS ||
         cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DRIVER) != CUPTI_SUCCESS))
        fprintf(stderr, "hn_timeline: CUPTI refused the API records; kernels, copies and memsets only\n");
    atexit(finish);
    return 1;
}
