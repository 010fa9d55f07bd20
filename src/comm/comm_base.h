/* The scaffolding every communicator shares (comm_base.c), so that each
 * one (host/, ll/, nccl/, p2p/) keeps only its own algorithm and state:
 * - its world: a struct whose first member, `base`, is an hn_comm_base —
 *   what it was set up with, the world it exchanges through (the setup's,
 *   or one of its own), the list of its teams;
 * - its teams: a struct whose first member, `base`, is an
 *   hn_comm_team_base — the world, the size, the id every process agrees
 *   on, the members' global ranks — and whose last, `m`, is the array of
 *   its members (the communicator's own struct, n of them);
 * - the exchanges among a team's ranks (or any ranks of the world) that
 *   hand each other a status and some bytes, a failure anywhere failing
 *   every member at once.
 * Pointers convert between a communicator's struct and its `base`. */
#ifndef HN_COMM_BASE_H
#define HN_COMM_BASE_H

#include "comm.h"

/* The teams of a world: its communicator's team structs, and the team
 * of all ranks 0 .. nranks-1 among them (point-to-point goes through it). */
typedef struct hn_team_list {
    void **teams;
    int n, cap;
    void *all; /* the team 0..nranks-1, if created */
} hn_team_list;

typedef struct hn_comm_base {
    const char *name; /* the communicator's ("ll"): messages, the exchanges' names */
    int nranks;       /* ranks of the world */
    const hn_device_ops *dev;
    void *dev_ctx;
    const hn_compute_ops *compute;
    const hn_fault_sink *sink;
    hn_world *world;     /* the exchanges and shared regions: the setup's, or own_world */
    hn_world *own_world; /* made when the setup gave none (one process) */
    void *(*peer_addr)(void *ctx, int rank, void *p); /* hn_comm_setup's */
    void *peer_ctx;
    uint64_t team_ids;   /* teams made so far: the same sequence in every process */
    hn_team_list teams;
} hn_comm_base;

typedef struct hn_comm_team_base {
    hn_comm_world *w; /* the world it was made in */
    int n;            /* members */
    uint64_t id;      /* the world's count of teams made before it: the same in every process */
    int *ranks;       /* [n]: the members' global ranks, in team order */
    uint64_t *xchgs;  /* [n]: exchanges member i made on the team (its thread's): they name them */
} hn_comm_team_base;

/* A communicator's world into *out: world_bytes zeroed (its struct, `base`
 * first), the base filled from the setup under `name`, and the world it
 * exchanges through: the setup's, or, where it gave none (one process:
 * unit tests, tools), one of its own of setup->nranks ranks with
 * shared_bytes of shared regions and the sink's deadline (60 s without
 * one). HN_ERR_NOMEM (or the world's failure) with nothing left. A
 * communicator whose world is its base alone has this as its init. */
hn_status_t hn_comm_base_new(const char *name, const hn_comm_setup *setup, size_t world_bytes, size_t shared_bytes,
                             hn_comm_world **out);
/* Frees what hn_comm_base_new made (the teams destroyed before; what the
 * communicator keeps in the world's shared regions freed before): the
 * list, its own world, the struct. NULL: nothing. */
void hn_comm_base_free(hn_comm_base *b);
/* hn_comm_base_free of w's base: the fini of a communicator whose world
 * holds nothing else to free (a table's fini as it is). */
void hn_comm_base_fini(hn_comm_world *w);

/* A team of ranks[0 .. n-1] of world b into *out: team_bytes zeroed (its
 * struct, `base` first, its n members last), with the ranks and the next
 * id, in b's list. HN_ERR_NOMEM with nothing left. */
hn_status_t hn_comm_team_new(hn_comm_base *b, const int *ranks, int n, size_t team_bytes, hn_comm_team **out);
/* Undoes it (the communicator's state in the team freed before). */
void hn_comm_team_free(hn_comm_team_base *t);
/* The index of global rank `rank` in team t, or -1. */
int hn_comm_team_index(const hn_comm_team_base *t, int rank);

/* An exchange among ranks[0 .. n-1] of b's world (the same list in every
 * member's call, each on its own thread; `me`: the caller's index; tag:
 * as hn_world_xchg): the caller's status and `bytes` of `mine` to every
 * member, every member's bytes into all (n * bytes, team order) once
 * every status is HN_OK. A failure anywhere fails every member at once:
 * a member's own (its status, which it said itself) is the status of the
 * member that had it and HN_ERR_ABORTED elsewhere; the exchange's is said
 * here, "NAME: WHAT: why". A member that failed takes part all the same
 * (the others then fail at once instead of timing out). */
hn_status_t hn_comm_xchg(hn_comm_base *b, const int *ranks, int n, int me, uint64_t tag, const char *what,
                         hn_status_t status, const void *mine, size_t bytes, void *all, const hn_origin *o);
/* hn_comm_xchg among team t's members, by member me, named by `kind`
 * (1 .. 15: what it is about) and the member's count of exchanges on the
 * team (the same sequence on every member); "NAME: WHAT a team of N" in
 * messages ("ll: joining a team of 4: ..."). */
hn_status_t hn_comm_team_xchg(hn_comm_team_base *t, int me, int kind, const char *what, hn_status_t status,
                              const void *mine, size_t bytes, void *all, const hn_origin *o);

/* A post of sends and receives for a host function to run (the host and
 * net communicators): a copy of the ops, and each op's sequence number
 * per (src, dst) pair, taken now, in issue order, from send_seq[src * n +
 * dst] or recv_seq[src * n + dst] (n: nranks; the issuing rank's thread
 * is the only one to touch its row or column). NULL when out of memory;
 * hn_comm_p2p_job_free frees it (a host function's free). */
typedef struct hn_comm_p2p_job {
    hn_comm_world *w;
    int rank, n;
    hn_p2p_op *ops;
    uint64_t *seqs;
} hn_comm_p2p_job;
hn_comm_p2p_job *hn_comm_p2p_job_new(hn_comm_world *w, int rank, const hn_p2p_op *ops, int n, int nranks,
                                     uint64_t *send_seq, uint64_t *recv_seq);
void hn_comm_p2p_job_free(void *job);

/* The key of sequence number seq, for a communicator whose closures run
 * again in a graph's replays (host, net): theirs is in a space of the
 * graph's own, moved on by the graph's epoch (read now, in stream
 * order), so that no replay meets an earlier one's rendezvous (a capture
 * takes fewer than HN_GRAPH_EPOCH_SPAN numbers of a sequence); seq itself
 * outside graphs. */
uint64_t hn_comm_seq_key(const hn_origin *o, uint64_t seq);

#endif
