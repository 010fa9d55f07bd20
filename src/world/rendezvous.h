/* How the processes of one world find each other on one machine: a Unix
 * socket in a directory they share (rank 0 listens, the others connect),
 * a greeting that checks they run the same build with the same settings,
 * and one address range agreed among them, free in every process, where
 * each maps the same memory: the world's shared block and every rank's
 * device memory (memfds passed over the sockets). So a pointer into that
 * memory means the same in every process of the world. Afterwards the
 * sockets tell who left without saying goodbye: a process that died. */
#ifndef HN_RENDEZVOUS_H
#define HN_RENDEZVOUS_H

#include <stddef.h>
#include <stdint.h>

#include "../device/device.h"
#include "../base/util.h"

typedef struct hn_rdv hn_rdv;

typedef struct hn_rdv_setup {
    const char *dir;    /* the directory every process can reach (0700, this user's) */
    int world, rank;    /* the world's size and this process's rank (one rank per process) */
    double timeout_s;   /* how long to wait for the others */
    uint64_t check;     /* what must agree (build, settings): a hash */
    const char *check_text; /* the same as text, for the message when it does not */
    size_t world_bytes; /* the world's shared block (rank 0 makes it) */
    size_t arena_bytes; /* each rank's device memory (0: none); each makes its own */
    const hn_share_ops *share; /* how device memory is made, reserved and mapped (the backend's) */
    int ord;                   /* this rank's device ordinal, for share */
} hn_rdv_setup;

/* Joins the world of c, within c->timeout_s: every process of it must call
 * this with the same world, check and sizes. On success the range is
 * mapped: hn_rdv_world_base (world_bytes of host memory, zeroed) and
 * hn_rdv_arena(r) for every rank r (arena_bytes of device memory each,
 * made by that rank's process through c->share, one after another in a
 * range reserved at the same address everywhere). HN_ERR_TIMEOUT (a rank never came, named),
 * HN_ERR_MISMATCH (a greeting differs, both sides named), HN_ERR_IO,
 * HN_ERR_INVALID (a bad directory), each with why; nothing is left on
 * failure (a socket file this process made is removed). */
hn_status_t hn_rdv_join(const hn_rdv_setup *c, hn_rdv **out, hn_strbuf *why);
void *hn_rdv_world_base(const hn_rdv *r);
void *hn_rdv_arena(const hn_rdv *r, int rank);
int hn_rdv_pid(const hn_rdv *r, int rank);
/* Whether rank's process is stopped (a signal, a debugger: /proc says T). */
int hn_rdv_stopped(const hn_rdv *r, int rank);
/* "; rank Q (pid P) is stopped" appended to text (cap bytes) for every
 * other rank whose process is stopped: what a timeout waiting for them
 * adds. */
void hn_rdv_say_stopped(const hn_rdv *r, char *text, size_t cap);

/* Watches the sockets on a thread of its own: a peer whose connection
 * ends without goodbye is reported once through lost (on that thread),
 * with its rank and a text ("its process (pid 4242) died ..."). Rank 0 watches
 * every other rank, the others watch rank 0 (rank 0 reports the others'
 * deaths to the world). */
hn_status_t hn_rdv_watch(hn_rdv *r, void (*lost)(void *ctx, int rank, const char *text), void *ctx);

/* Says goodbye and stops the watch (nothing is reported from then on);
 * the memory stays mapped. */
void hn_rdv_quiet(hn_rdv *r);
/* Says goodbye, stops the watch, closes and unmaps everything. */
void hn_rdv_leave(hn_rdv *r);

#endif
