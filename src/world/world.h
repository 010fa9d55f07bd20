/* The world: what the ranks of a run share besides device memory — the
 * abort word, the first error, a doorbell, an exchange board and shared
 * host regions — laid out so that it could live in memory every process
 * of the run maps (atomics and futex waits only, no locks): this
 * process's memory when every rank is a thread here
 * (hn_world_create_local), memory shared by the processes of the world
 * otherwise (hn_world_attach). */
#ifndef HN_WORLD_H
#define HN_WORLD_H

#include <stddef.h>
#include <stdint.h>

#include "../base/shm.h"
#include "../base/util.h"

typedef struct hn_world hn_world;

#define HN_WORLD_MAX_RANKS 256
/* the most bytes one member puts into one exchange */
#define HN_WORLD_XCHG_BYTES 8192
/* the length of the error slot's text, with its terminating NUL */
#define HN_WORLD_ERROR_TEXT 1024

/* A world of n ranks (1 .. HN_WORLD_MAX_RANKS) in this process's memory:
 * every wait of its exchanges lasts at most timeout_s; shared_bytes of
 * shared regions (hn_world_shared; 0: none). HN_ERR_INVALID for a bad
 * count or timeout, HN_ERR_NOMEM; nothing to undo on failure. destroy
 * frees it (no exchange in progress). */
hn_status_t hn_world_create_local(int n, double timeout_s, size_t shared_bytes, hn_world **out);
/* Process mode: the world laid out in memory every process of the world
 * maps at the same address (base, hn_world_bytes(n, shared_bytes) bytes,
 * zeroed when made). The process that made the memory says first = 1 and
 * stamps it; the others check the stamp (HN_ERR_MISMATCH: another layout
 * or world size). The memory stays the caller's: destroy leaves it. Every
 * process keeps its own bookkeeping of the shared regions, so the same
 * calls in the same order give the same regions everywhere. */
size_t hn_world_bytes(int n, size_t shared_bytes);
hn_status_t hn_world_attach(int n, double timeout_s, size_t shared_bytes, void *base, int first, hn_world **out);
void hn_world_destroy(hn_world *w);
int hn_world_size(const hn_world *w);

/* ---- the abort word and the doorbell ----
 * The abort word is non-zero once any rank failed; waiters anywhere poll
 * it (hn_fault_sink.abort_flag points at it). hn_world_abort sets it and
 * rings the bell, so that a waiter asleep on the bell wakes at once. Any
 * thread. */
const int *hn_world_abort_word(const hn_world *w);
void hn_world_abort(hn_world *w);
int hn_world_aborted(const hn_world *w);
/* Rung by every change of the world's state (exchanges, aborts); others
 * may ring it for their own waits on world memory. */
hn_doorbell *hn_world_bell(hn_world *w);

/* Rank's process is gone (process mode: the rendezvous's watch saw it
 * end): the world is aborted, and every exchange that waits for that rank
 * fails at once with HN_ERR_PEER_LOST. dead_rank: the lowest such rank,
 * -1 while none. Any thread. */
void hn_world_mark_dead(hn_world *w, int rank);
int hn_world_dead_rank(const hn_world *w);

/* ---- the first error ----
 * One slot for the whole world. A failure (any status but HN_ERR_ABORTED)
 * beats an "aborted" echo, which a failure elsewhere causes; among equals
 * the first post wins. post fills the slot if it wins: 1 when its error
 * is now the world's first (what get returns), 0 when an earlier or
 * better one is. text is cut to HN_WORLD_ERROR_TEXT - 1 bytes. The
 * caller then aborts the world (hn_world_abort), once whatever those who
 * see the abort word will read is in place. Any thread, any time. */
int hn_world_error_post(hn_world *w, hn_status_t st, int rank, int instr, const char *text);

typedef struct hn_world_error {
    hn_status_t status; /* HN_OK: no error posted */
    int rank, instr;
    char text[HN_WORLD_ERROR_TEXT];
} hn_world_error;

/* The world's first error into *out (status HN_OK when none). A post
 * that won but has not finished writing is waited for, within the
 * world's timeout (HN_ERR_TIMEOUT past it, *out as empty). */
hn_status_t hn_world_error_get(hn_world *w, hn_world_error *out);
/* Frees the slot and clears the abort word, once the ranks stopped (no
 * post in progress is lost: one still writing is waited for first). */
void hn_world_error_clear(hn_world *w);

/* ---- exchanges ----
 * hn_world_xchg: the members ranks[0 .. n-1] (distinct world ranks, the
 * same list in every member's call) each put `bytes` bytes (mine) and
 * each get every member's: member i's at all + i * bytes (all holds
 * n * bytes; mine may lie in all). The caller is member `me`, on its own
 * thread; a rank takes part in one exchange at a time. tag names the
 * exchange: every member gives the same tag and bytes. A rank in another
 * exchange that includes the caller (a different tag or member list),
 * or giving other bytes, makes it HN_ERR_MISMATCH; a member that never
 * came HN_ERR_TIMEOUT past the world's timeout; a member that gave up
 * the exchange (its own failure) HN_ERR_ABORTED; the abort word
 * HN_ERR_ABORTED too, unless flags has HN_WORLD_EVEN_ABORTED (the
 * exchanges of recovery). Each error names the ranks and tags in *why
 * (when not NULL); a failed exchange is given up by its caller, so the
 * others fail too instead of waiting (so a retry takes a new tag: the
 * given-up one may still be seen). HN_ERR_INVALID for bad arguments.
 * hn_world_barrier is an exchange of no bytes. */
#define HN_WORLD_EVEN_ABORTED 1u
/* HN_WORLD_PATIENT: a second more than the timeout before a member that
 * never came is named (the end of a run: a member whose own wait for a
 * peer timed out at the deadline names the cause, which beats the echo) */
#define HN_WORLD_PATIENT 2u
hn_status_t hn_world_xchg(hn_world *w, const int *ranks, int n, int me, uint64_t tag, const void *mine,
                          size_t bytes, void *all, unsigned flags, hn_strbuf *why);
hn_status_t hn_world_barrier(hn_world *w, const int *ranks, int n, int me, uint64_t tag, unsigned flags,
                             hn_strbuf *why);

/* ---- nodes ----
 * A world across nodes: the memory above is one node's (its processes
 * map it), rank r lives on node r / per_node, and an exchange whose
 * members are not all on one node goes through the link (net.h): every
 * member puts its bytes there and takes the others' (HN_ERR_PEER_LOST
 * when the link is down or a member's process is gone). The link stays
 * the caller's and must outlive the world's exchanges. Before any
 * exchange. A world without a link is one node. */
struct hn_net;
void hn_world_set_net(hn_world *w, struct hn_net *net, int per_node);
int hn_world_node_of(const hn_world *w, int rank);
/* The link (NULL: one node). */
struct hn_net *hn_world_net(const hn_world *w);
/* Whether ranks[0 .. n-1] lie on more than one node. */
int hn_world_spans_nodes(const hn_world *w, const int *ranks, int n);

/* ---- shared regions ----
 * Host memory every rank of the world can address, zeroed when handed
 * out, 64-byte aligned, from a first-fit heap of shared_bytes. The
 * bookkeeping is the caller's process's, so the same sequence of calls
 * gives the same offsets everywhere; key names the region (a hash of its
 * owner and purpose) and enters hn_world_shared_hash, which processes
 * compare to find a divergent sequence. HN_ERR_NOMEM when no free part
 * is large enough. From one thread at a time. free takes what shared
 * gave (NULL: nothing). */
hn_status_t hn_world_shared(hn_world *w, uint64_t key, size_t bytes, void **out);
void hn_world_shared_free(hn_world *w, void *p);
/* p's offset in the regions (what another process adds to its base). */
size_t hn_world_shared_offset(const hn_world *w, const void *p);
uint64_t hn_world_shared_hash(const hn_world *w);

#endif
