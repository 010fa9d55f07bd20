/* What every communicator shares, below the communicators: the collectives'
 * names, the making of a team (team_list.h), the world it exchanges
 * through. */
#include <string.h>

#include "comm.h"
#include "team_list.h"

const char *hn_coll_name(hn_coll_kind k)
{
    static const char *names[HN_COLL_COUNT] = {"allgather", "allreduce", "reduce_scatter",
                                               "broadcast", "reduce",    "gather",
                                               "scatter",   "all_to_all"};
    return (unsigned)k < HN_COLL_COUNT ? names[k] : "?";
}

hn_status_t hn_comm_world_of(const hn_comm_setup *setup, size_t shared_bytes, hn_world **world, hn_world **own)
{
    hn_status_t st = HN_OK;
    *own = NULL;
    if ((*world = setup->world) == NULL &&
        (st = hn_world_create_local(setup->nranks, setup->sink != NULL ? setup->sink->timeout_s : 60.0, shared_bytes,
                                    own)) == HN_OK)
        *world = *own;
    return st;
}

void *hn_team_new(hn_team_list *l, int nranks, const int *ranks, int n, size_t team_bytes, size_t member_bytes,
                  size_t rank_at, void **members)
{
    char *t = hn_calloc(1, team_bytes), *m = NULL;
    if (t == NULL)
        return NULL;
    m = hn_calloc((size_t)n, member_bytes);
    if (m == NULL || hn_team_list_add(l, t, ranks, n, nranks) != 0) {
        hn_free(m);
        hn_free(t);
        return NULL;
    }
    for (int i = 0; i < n; i++)
        memcpy(m + (size_t)i * member_bytes + rank_at, &ranks[i], sizeof(int));
    *members = m;
    return t;
}

void hn_team_free(hn_team_list *l, void *team, void *members)
{
    hn_team_list_remove(l, team);
    hn_free(members);
    hn_free(team);
}
