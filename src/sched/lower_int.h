/* Internals of the scheduler's lowering pass, shared by lower.c (the
 * pass, stream-parallel loops), lower_build.c (the builders of generated
 * code) and one file per family of pipelined statements:
 * lower_allgather.c, lower_reduce.c, lower_collective.c. */
#ifndef HN_SCHED_LOWER_H
#define HN_SCHED_LOWER_H

#include "../ir/verify.h"
#include "../exec/comm_log.h"
#include "../model/cost.h"
#include "lower.h"
#include "../exec/verify_run.h"

/* A pipelined statement's record of one rank's dry run. */
typedef struct hn_lower_seen {
    const hn_pipe_rec *rec;
    int rank;
} hn_lower_seen;

typedef struct hn_lower {
    const hn_program *src;
    hn_program *out;
    int world, nodes, nstreams; /* nodes > 1: teams span nodes (NCCL only) */
    const int64_t *params;
    const hn_cost_profile *prof; /* the model's machine profile (NULL: the built-in default) */
    const hn_comm_log *logs; /* the source's dry run, world entries */
    /* its pipelined statements' records by instruction: those of
     * statement id are seen[seen_from[id] .. seen_from[id + 1]), in rank
     * then execution order */
    hn_lower_seen *seen;
    int *seen_from;
    hn_strbuf *diag;
    hn_strbuf *notes; /* the plan of each statement, or NULL */
    int errors;
    hn_status_t st;    /* out of memory (or code built outside a statement: a bug) */
    hn_block hoist;    /* allocations for the top of the body */
    /* the statement being lowered */
    const hn_instr *stmt;
    int origin;
    hn_block code, top; /* its code, and its allocations */
    hn_block *at;       /* where its code goes now: code, or a block of it (hn_lower_open) */
    /* fresh names: the suffix to try first for each base (names are only
     * added, so none before the one last given is free) */
    struct {
        const char *base;
        int k;
    } fresh[32];
    int nfresh;
} hn_lower;

/* A pipelined statement being lowered: its tensors, what it computes, the
 * plan chosen, and its operands (the source's). */
typedef struct hn_lower_pipe {
    const hn_instr *in;
    hn_pipe_rec rec;
    hn_pipe_shape sh;
    hn_pipe_plan plan;
    int linear, bias;
    const hn_tref *out, *a, *b, *biast; /* operands */
    hn_op mm; /* matmul or linear */
} hn_lower_pipe;

/* ---- generated code, built as IR (lower_build.c) ----
 * Each builder takes every expression and operand it is handed, also when
 * it fails; after an error (L->st) it builds nothing. The
 * code is placed at the statement (line, column, origin) when the
 * statement ends. Expressions come from ir.h's constructors (hn_ex_int,
 * hn_ex_var, hn_ex_bin, ...: NULL when out of memory, which the builder
 * taking it notes). */

/* Notes that memory ran out (the first error stays). */
void hn_lower_nomem(hn_lower *L);
/* The number v as the parser reads it written out: -n is -(n). */
hn_expr *hn_lower_num(int64_t v);
/* `stream(i % S)`'s index, i % S, or 0 when S is 1. */
hn_expr *hn_lower_stream_index(int i, int S);
/* (rank op e) % world: a peer in the ring */
hn_expr *hn_lower_peer(hn_binop op, hn_expr *e);
/* A name no variable of the program has, reserved for this statement:
 * `base`, else base_1, base_2, ...; its variable (-1 after an error). */
int hn_lower_fresh(hn_lower *L, const char *base);
/* Operands: var[idx...] (takes the indices), a copy of the source's. */
hn_tref hn_lower_ref(hn_lower *L, int var, int nidx, ...);
hn_tref hn_lower_ref_of(hn_lower *L, const hn_tref *t);

/* dims of view and alloc: HN_LOWER_DIMS(a, b, c) is 3, {a, b, c} */
#define HN_LOWER_DIMS(...) \
    (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (const int64_t[]) { __VA_ARGS__ }

/* var = alloc dtype[dims], into the statement's allocations */
void hn_lower_alloc(hn_lower *L, int var, hn_dtype dtype, int ndim, const int64_t *dims);
/* var = view src as [dims] */
void hn_lower_view(hn_lower *L, int var, hn_tref src, int ndim, const int64_t *dims);
/* var = select src, axis, index */
void hn_lower_select(hn_lower *L, int var, hn_tref src, int axis, hn_expr *index);
/* var = e */
void hn_lower_let(hn_lower *L, int var, hn_expr *e);
/* var = current_stream */
void hn_lower_current_stream(hn_lower *L, int var);
/* set_stream / wait_stream (op) of a stream variable ... */
void hn_lower_stream_var(hn_lower *L, hn_op op, int var);
/* ... or of stream(index) */
void hn_lower_stream_at(hn_lower *L, hn_op op, hn_expr *index);
/* The loop over a pipelined statement's steps, each on its stream:
 * for <name> in 0 .. steps { set_stream stream(<name> % S) ... }, open
 * (hn_lower_close ends it); *var is its fresh variable. */
hn_block *hn_lower_steps(hn_lower *L, const char *name, int64_t steps, int S, int *var);
/* owner = t / u, piece = t % u: whose piece a broadcast step t sends */
void hn_lower_owner_piece(hn_lower *L, int t, int64_t u, int *owner, int *piece);
/* send buf to peer / recv buf from peer (op), via */
void hn_lower_p2p(hn_lower *L, hn_op op, hn_tref buf, hn_expr *peer, hn_via via, hn_coll_algo protocol);
/* op out <- in [op redop] [root root] via: redop < 0 where none is written;
 * root for the ops that take one (else NULL) */
void hn_lower_coll(hn_lower *L, hn_op op, hn_tref out, hn_tref in, int redop, hn_expr *root, hn_via via,
                   hn_coll_algo protocol);
/* op dst <- the nargs tensor operands that follow (hn_tref, taken) */
void hn_lower_compute(hn_lower *L, hn_op op, hn_tref dst, int nargs, ...);
/* `for var in lo .. hi [step s]` (step 1: none written), `if cond`,
 * `group`: the instruction, whose blocks hn_lower_open opens; NULL after an
 * error */
hn_instr *hn_lower_for(hn_lower *L, int var, hn_expr *lo, hn_expr *hi, int64_t step);
hn_instr *hn_lower_if(hn_lower *L, hn_expr *cond);
hn_instr *hn_lower_group(hn_lower *L);
/* The code from here on goes into in's body (else_: its else block), until
 * hn_lower_close(L, what open returned) goes back to where it went before. */
hn_block *hn_lower_open(hn_lower *L, hn_instr *in, int else_);
void hn_lower_close(hn_lower *L, hn_block *outer);

/* caller = current_stream, then streams 0 .. min(steps, S) - 1 wait for
 * it in a loop of their own (so that the work loop overlaps) ... */
void hn_lower_fan_out(hn_lower *L, int caller, int steps, int S);
/* ... and the caller waits for each of them. */
void hn_lower_join(hn_lower *L, int caller, int steps, int S);
/* The statement's matmul or linear into dst from a; bias: 1 with it, 0
 * without, -1 with it on rank 0 only (a sum over ranks adds it once). */
void hn_lower_gemm(hn_lower *L, const hn_lower_pipe *c, hn_tref dst, hn_tref a, int bias);

/* A statement's code: begin, the builders, end (into out, at its line). */
void begin_stmt_of(hn_lower *L, const hn_instr *in);
void end_stmt_of(hn_lower *L, hn_block *out);
/* A plain allreduce of the whole world across nodes (nodes > 1, several
 * ranks a node), hierarchically where the model says so
 * (hn_cost_hier_allreduce, HIRNODE_HIER_ALLREDUCE): 1 lowered into out, 0
 * left as it is (lower_hier.c). */
int hn_lower_hier_allreduce(hn_lower *L, const hn_instr *in, hn_block *out);

/* The code of each family, for the plan in c (lower_*.c). */
void hn_lower_allgather_gemm(hn_lower *L, const hn_lower_pipe *c);
void hn_lower_gemm_reduce(hn_lower *L, const hn_lower_pipe *c);
void hn_lower_collective(hn_lower *L, const hn_lower_pipe *c);

#endif
