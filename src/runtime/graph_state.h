/* A graph's state on each rank (graph_state.c): its epoch words and what
 * its communicators keep for it; and what the caller's captures hold of a
 * graph of a launch inside them. On the rank's thread, but the hold. */
#ifndef HN_RUNTIME_GRAPH_STATE_H
#define HN_RUNTIME_GRAPH_STATE_H

#include "../ranks/runtime_int.h"

/* Before g's work is issued on rank r (a capture, or a launch inside the
 * caller's capture): its epoch words (kept by a rebind), the
 * communicators' graph_begin. */
hn_status_t hn_graph_state_begin(hn_rank *r, hn_graph *g);
/* After it, on r->active: what ends every replay (the communicators'
 * graph_finish), then the epoch raised. Failures are the run's. */
hn_status_t hn_graph_state_finish(hn_rank *r, hn_graph *g);
/* After the issue: the communicators' eager state as before it. */
void hn_graph_state_end(hn_rank *r, hn_graph *g);
/* When g goes: the communicators' state of it and its epoch words. */
void hn_graph_state_free(hn_rank *r, hn_graph *g);

/* What the caller's captures hold of a graph (hn_graph_launch_foreign):
 * made with the runtime's reference; hn_graph_hold_keep ties it to the
 * capture going on on r->active (native_capture_keep), which lets go on
 * a thread of the backend's own; held: whether a capture still holds it;
 * drop: the runtime's reference (the last reference frees it). */
hn_graph_hold *hn_graph_hold_new(void);
hn_status_t hn_graph_hold_keep(hn_rank *r, hn_graph_hold *h);
int hn_graph_hold_held(const hn_graph_hold *h);
void hn_graph_hold_drop(hn_graph_hold *h);

#endif
