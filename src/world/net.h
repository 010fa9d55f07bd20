/* The link between the nodes of a world (net.c): one server, in the
 * process of rank 0, and a TCP connection to it from every process of the
 * world, on whatever node. What crosses it:
 *  - a mailbox: a process puts a blob under (tag, from) for `readers`
 *    takers; a take waits until the blob is there, and the blob is
 *    dropped once every reader took it. The world's exchanges between
 *    nodes and the host backend's collectives between nodes are built on
 *    it (world.c, src/comm/net);
 *  - failures: a process that fails says so once (hn_net_abort); the
 *    server passes it to every other process;
 *  - deaths: the server names a process whose connection ended without
 *    goodbye or fell silent, to every other; a process names the server's
 *    when its connection to it ends or falls silent. Both sides send a
 *    heartbeat every HN_NET_BEAT_S; silence for the link's `silence_s`
 *    counts as a death.
 * Nothing here knows of nodes: a process says its rank and node once, for
 * the messages. */
#ifndef HN_WORLD_NET_H
#define HN_WORLD_NET_H

#include <stddef.h>
#include <stdint.h>

#include "../base/util.h"

#define HN_NET_BEAT_S 0.5              /* a heartbeat each way, this often */
#define HN_NET_BLOB_MAX ((size_t)1 << 30) /* bytes of one blob, at most */

typedef struct hn_net_server hn_net_server;
typedef struct hn_net hn_net;

/* Serves the link on host (an address of this machine the others reach;
 * NULL: every address; port 0: any free one, *port_out says which) for a world of `world`
 * processes; its own thread. NULL with why. close drops every connection
 * after saying goodbye to each. */
hn_net_server *hn_net_serve(const char *host, int port, int world, double silence_s, int *port_out, hn_strbuf *why);
/* Waits up to linger_s for every process to say goodbye or go (their
 * last takes may still be on their way), then says goodbye to those left
 * and stops (NULL: nothing). */
void hn_net_server_close(hn_net_server *s, double linger_s);

/* What a process hears from the link, on the link's own thread: another
 * process's failure (status, rank, instruction, its text), and a death
 * (rank: who is gone, text: how it was seen). Each at most once per
 * failure or death; never after hn_net_quiet. A death's text begins "its
 * process", to follow "rank R: " (rank 0's for the server's). */
typedef struct hn_net_events {
    void (*failed)(void *ctx, hn_status_t st, int rank, int instr, const char *text);
    void (*lost)(void *ctx, int rank, const char *text);
    void *ctx;
} hn_net_events;

/* Connects to the server at host:port, trying until timeout_s (the
 * server may come later), as rank `rank` on node `node` (pid and host
 * name go with it, for messages). NULL with why. */
hn_net *hn_net_connect(const char *host, int port, int rank, int node, double silence_s, const hn_net_events *ev,
                       double timeout_s, hn_strbuf *why);
/* From now on nothing is reported (a teardown: the others' goodbyes and
 * deaths are no news). */
void hn_net_quiet(hn_net *n);
/* Says goodbye and closes (NULL: nothing). */
void hn_net_close(hn_net *n);
/* Whether the link still stands (0 once the server is gone or silent). */
int hn_net_up(const hn_net *n);

/* Puts bytes of data under (tag, from) for `readers` takes. 0 sent; -1 the
 * link is down. Any thread. */
int hn_net_put(hn_net *n, uint64_t tag, int from, int readers, const void *data, size_t bytes);
/* Takes the blob under (tag, from): waits until it is there, the monotonic
 * clock (hn_now) reaches deadline, or stop(stop_ctx) returns non-zero
 * (asked every 50 ms; stop may be NULL). 0: *data (hn_malloc'd, the
 * caller's to free) and *bytes; 1 the deadline; 2 stopped; -1 the link is
 * down. A take that did not get its blob is withdrawn from the server. Any
 * thread; several takes may wait at once. */
int hn_net_take(hn_net *n, uint64_t tag, int from, void **data, size_t *bytes, double deadline,
                int (*stop)(void *), void *stop_ctx);
/* Tells every other process that this one failed (st, rank, instr, text).
 * 0 sent; -1 the link is down. */
int hn_net_abort(hn_net *n, hn_status_t st, int rank, int instr, const char *text);

#endif
