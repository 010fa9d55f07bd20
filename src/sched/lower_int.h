/* Internals of the scheduler's lowering pass, shared by lower.c (the
 * pass, stream-parallel loops) and one file per family of pipelined
 * statements: lower_allgather.c, lower_reduce.c, lower_collective.c. */
#ifndef HN_SCHED_LOWER_H
#define HN_SCHED_LOWER_H

#include "../ir/verify.h"
#include "../exec/comm_log.h"
#include "../model/cost.h"
#include "lower.h"
#include "../exec/verify_run.h"

typedef struct hn_lower {
    const hn_program *src;
    hn_program *out;
    int world, nstreams;
    const int64_t *params;
    const hn_cost_profile *prof; /* the model's machine profile (NULL: the built-in default) */
    const hn_comm_log *logs; /* the source's dry run, world entries */
    hn_strbuf *diag;
    hn_strbuf *notes; /* the plan of each statement, or NULL */
    int errors;
    hn_status_t st;    /* out of memory, or an internal error */
    hn_block hoist;    /* allocations for the top of the body */
    /* the statement being lowered */
    const hn_instr *stmt;
    int origin;
    hn_strbuf code, top; /* its code, and its allocations */
} hn_lower;

/* A pipelined statement being lowered: its tensors, what it computes, the
 * plan chosen, and the text of its operands. */
typedef struct hn_lower_pipe {
    const hn_instr *in;
    hn_pipe_rec rec;
    hn_pipe_shape sh;
    hn_pipe_plan plan;
    int linear, bias;
    char out[256], a[256], b[256], biast[256]; /* operand texts */
    const char *mm; /* matmul or linear */
    const char *dt;
    char via[32];   /* " via p2p get", ... */
} hn_lower_pipe;

/* " via nccl", " via p2p get", " via ll", ... (nothing for default). */
void hn_lower_via_text(char *buf, size_t n, hn_via via, hn_coll_algo protocol);
/* Appends generated text to the statement's code. */
void hn_lower_emit(hn_lower *L, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A name no variable of the program has, reserved: base, base_1, ... */
const char *hn_lower_fresh(hn_lower *L, const char *base, char *buf, size_t n);
/* `stream(i % S)`, or stream(0) when S is 1. */
void hn_lower_stream_of(char *buf, size_t n, const char *i, int S);
/* caller = current_stream, then streams 0 .. min(steps, S) - 1 wait for
 * it in a loop of their own (so that the work loop overlaps) ... */
void hn_lower_fan_out(hn_lower *L, const char *caller, int steps, int S);
/* ... and the caller waits for each of them. */
void hn_lower_join(hn_lower *L, const char *caller, int steps, int S);
/* The statement's matmul or linear into dst from a; bias: 1 with it, 0
 * without, -1 with it on rank 0 only (a sum over ranks adds it once). */
void hn_lower_gemm(hn_lower *L, const hn_lower_pipe *c, const char *indent, const char *dst, const char *a,
                   int bias);

/* The code of each family, for the plan in c (lower_*.c). */
void hn_lower_allgather_gemm(hn_lower *L, const hn_lower_pipe *c);
void hn_lower_gemm_reduce(hn_lower *L, const hn_lower_pipe *c);
void hn_lower_collective(hn_lower *L, const hn_lower_pipe *c);

#endif
