/* The device backends and the compute ops that run on each one's streams,
 * registered in one list (above every backend: the backends call nothing
 * here). */
#include <string.h>

#include "device.h"

/* backends[i] runs computes[i] */
static const hn_device_ops *const backends[] = {
#ifdef HN_HAVE_CUDA
    &hn_device_cuda,
#endif
    &hn_device_host,
    NULL,
};
static const hn_compute_ops *const computes[] = {
#ifdef HN_HAVE_CUDA
    &hn_compute_cuda,
#endif
    &hn_compute_host,
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

const hn_compute_ops *hn_device_compute(const hn_device_ops *d)
{
    for (int i = 0; backends[i] != NULL; i++)
        if (backends[i] == d)
            return computes[i];
    return NULL;
}
