/* What a dry run records of each rank (comm_log.c): its communications in
 * issue order, for the verifier's matching and the teams to make; its
 * allocations, to size the rank's cache before runs; the pool streams it
 * uses; the tensors of the pipelined statements it meets, for the
 * scheduler. Appended by the evaluator; pure data, no runtime. */
#ifndef HN_SCHED_COMM_LOG_H
#define HN_SCHED_COMM_LOG_H

#include "../device/device.h"

/* What the dry run records of one communication, for matching. */
typedef struct hn_comm_rec {
    int instr;
    int is_p2p;
    int kind;       /* hn_coll_kind, or 0 recv / 1 send */
    int via;        /* hn_via the instruction resolved to */
    int asked;      /* hn_via as the instruction wrote it (auto, default: the team may change the pick) */
    hn_coll_algo algo; /* the algorithm it hands that communicator (explicit for p2p and ll) */
    int nteam;      /* collectives: members ... */
    int team_off;   /* ... at hn_comm_log.teams[team_off] */
    int peer;       /* p2p */
    int group;      /* p2p: the ops of one post (a `group`, or one send/recv) share it */
    size_t count;
    int norm;       /* allreduce_rmsnorm (kind allreduce), not a plain collective ... */
    size_t hidden;  /* ... with rows of this many elements */
    hn_dtype dtype;
    hn_redop redop;
    int root;
} hn_comm_rec;

/* What the dry run records of one allocation, to size the cache up front. */
typedef struct hn_alloc_rec {
    int instr, occurrence;
    size_t bytes;
} hn_alloc_rec;

/* What the dry run records of a pipelined statement it meets (before
 * lowering): its tensors, out first, for the scheduler (lower.c). */
typedef struct hn_pipe_rec {
    int instr;
    int ntensors;
    hn_tensor t[5];
} hn_pipe_rec;

/* One rank's dry run: its communications in issue order, its allocations. */
typedef struct hn_comm_log {
    hn_comm_rec *recs;
    int n, cap;
    int *teams;     /* the distinct teams of recs, each as its size then its members */
    int nteams_used, teams_cap;
    hn_alloc_rec *allocs;
    int nallocs, allocs_cap;
    unsigned streams; /* bit k: the run uses pool stream k (made before runs) */
    hn_pipe_rec *pipes;
    int npipes, pipes_cap;
} hn_comm_log;

static inline const int *hn_rec_team(const hn_comm_log *l, const hn_comm_rec *r)
{
    return l->teams + r->team_off;
}

/* Appends a record; HN_ERR_NOMEM leaves the log as it was. */
hn_status_t hn_comm_log_add(hn_comm_log *l, const hn_comm_rec *rec);
hn_status_t hn_comm_log_add_alloc(hn_comm_log *l, int instr, int occurrence, size_t bytes);
hn_status_t hn_comm_log_add_pipe(hn_comm_log *l, const hn_pipe_rec *rec);
/* The offset of a team's members in the log's pool of distinct teams
 * (for hn_comm_rec.team_off), the team added if new. */
hn_status_t hn_comm_log_team(hn_comm_log *l, const int *members, int n, int *off);
/* Frees `world` logs and the array. */
void hn_comm_logs_free(hn_comm_log *logs, int world);

#endif
