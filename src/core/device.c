/* Device-layer helpers shared by every backend: registry, tensor geometry,
 * fault reporting. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "device.h"

static const hn_device_ops *const backends[] = {
#ifdef HN_HAVE_CUDA
    &hn_device_cuda,
#endif
    &hn_device_host,
    NULL,
};

const hn_device_ops *const *hn_device_backends(void) { return backends; }

const hn_device_ops *hn_device_find(const char *name)
{
    for (int i = 0; backends[i] != NULL; i++)
        if (strcmp(backends[i]->name, name) == 0)
            return backends[i];
    return NULL;
}

void hn_origin_fail(const hn_origin *o, hn_status_t st, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (o != NULL && o->sink != NULL && o->sink->report != NULL)
        o->sink->report(o->sink->ctx, o->rank, o->instr, st, msg);
    else
        HN_ERROR("%s", msg);
}

int64_t hn_tensor_numel(const hn_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        n *= t->shape[i];
    return n;
}

int hn_tensor_is_contiguous(const hn_tensor *t)
{
    int64_t expect = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] != 1 && t->stride[i] != expect)
            return 0;
        expect *= t->shape[i];
    }
    return 1;
}

size_t hn_tensor_bytes(const hn_tensor *t)
{
    return (size_t)hn_tensor_numel(t) * (size_t)hn_dtype_size(t->dtype);
}
