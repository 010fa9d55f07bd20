/* What every communicator shares that is not scaffolding (comm_base.c
 * has that): the collectives' names. */
#include "comm.h"

const char *hn_coll_name(hn_coll_kind k)
{
    static const char *names[HN_COLL_COUNT] = {"allgather", "allreduce", "reduce_scatter",
                                               "broadcast", "reduce",    "gather",
                                               "scatter",   "all_to_all"};
    return (unsigned)k < HN_COLL_COUNT ? names[k] : "?";
}
