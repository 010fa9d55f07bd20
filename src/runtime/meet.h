/* How the processes of a world a launcher started meet through a store the
 * caller hands over (hn_world_store): rank 0 makes the rendezvous directory and
 * publishes its path, the others read it (meet.c). */
#ifndef HN_MEET_H
#define HN_MEET_H

#include "hirnode/runtime.h"
#include "../base/util.h"

/* The rendezvous directory of a world of `world` ranks for this process's
 * rank into dir (cap bytes): rank 0 makes one (0700, under $TMPDIR, else
 * /tmp) and sets its path under "hirnode/rendezvous/<world>/<k>" (k: the
 * k-th meeting of this process: every process makes its runtimes in the
 * same order), the others get it, waiting up to timeout_s. In a world
 * across nodes (node >= 0) each node meets on its own, under
 * ".../node<node>/<k>", and rank is the process's rank in its node.
 * *made: 1 on rank 0 (the directory is its to remove: hn_meet_remove). */
hn_status_t hn_meet_store(const hn_world_store *store, int world, int node, int rank, double timeout_s, char *dir,
                          size_t cap, int *made, hn_strbuf *why);
/* Removes a directory hn_meet_store made, with what the rendezvous left in it. */
void hn_meet_remove(const char *dir);

#endif
