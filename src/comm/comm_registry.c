/* The communicators, registered in one list (above every communicator). */
#include <string.h>

#include "comm.h"

const hn_comm_ops *hn_comm_find(const char *name)
{
    static const hn_comm_ops *const all[] = {
#ifdef HN_HAVE_CUDA
        &hn_comm_nccl,
#endif
        &hn_comm_host,
        &hn_comm_p2p,
        &hn_comm_ll,
        &hn_comm_net,
    };
    for (int i = 0; i < HN_ARRAY_LEN(all); i++)
        if (strcmp(all[i]->name, name) == 0)
            return all[i];
    return NULL;
}
