/* The teams of a communicator world: a small list every communicator keeps, and
 * which of them is the team of all ranks (point-to-point goes through it);
 * the making of a team (comm.c). */
#ifndef HN_TEAM_LIST_H
#define HN_TEAM_LIST_H

#include "../base/util.h"

typedef struct hn_team_list {
    void **teams;
    int n, cap;
    void *all; /* the team 0..nranks-1, if created */
} hn_team_list;

/* Adds t; `is_all` if its members are exactly 0..nranks-1. -1 on OOM. */
static inline int hn_team_list_add(hn_team_list *l, void *t, const int *ranks, int n, int nranks)
{
    int all = n == nranks;
    if (hn_grow((void **)&l->teams, &l->cap, l->n, sizeof(*l->teams)) != 0)
        return -1;
    for (int i = 0; i < n; i++)
        all &= ranks[i] == i;
    l->teams[l->n++] = t;
    if (all)
        l->all = t;
    return 0;
}

static inline void hn_team_list_remove(hn_team_list *l, void *t)
{
    for (int i = 0; i < l->n; i++)
        if (l->teams[i] == t) {
            l->teams[i] = l->teams[--l->n];
            break;
        }
    if (l->all == t)
        l->all = NULL;
}

static inline void hn_team_list_free(hn_team_list *l) { hn_free(l->teams); }

/* What every communicator's team_create does first: a zeroed team of
 * `team_bytes` and n zeroed members of `member_bytes` each, with member
 * i's global rank (the int `rank_at` bytes into it) set to ranks[i], the
 * team added to l (nranks: the world's size). Returns the team, its
 * members in *members; NULL when out of memory, with nothing left. */
void *hn_team_new(hn_team_list *l, int nranks, const int *ranks, int n, size_t team_bytes, size_t member_bytes,
                  size_t rank_at, void **members);
/* Undoes hn_team_new: the team out of l, its members and it freed. */
void hn_team_free(hn_team_list *l, void *team, void *members);

#endif
