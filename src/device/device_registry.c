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

/* Every backend hirnode has, whether this build has it or not (data such
 * as a profile measured elsewhere may name one a CUDA=0 build lacks). */
static const char *const known[] = {"cuda", "host", NULL};

const hn_device_ops *const *hn_device_backends(void) { return backends; }

const char *const *hn_device_known_names(void) { return known; }

int hn_device_name_known(const char *name)
{
    for (int i = 0; name != NULL && known[i] != NULL; i++)
        if (strcmp(known[i], name) == 0)
            return 1;
    return 0;
}

const hn_device_ops *hn_device_find(const char *name)
{
    for (int i = 0; name != NULL && backends[i] != NULL; i++)
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
