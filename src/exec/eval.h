/* The evaluator (eval.c): walks a program for one rank and issues each
 * instruction onto the current stream — or, in a dry run, only checks it
 * and records its communications and allocations (comm_log.h). One set of
 * handlers for both modes, so the verifier and the runtime cannot disagree
 * about what a program means. A real run's evaluation runs on the rank's
 * thread. */
#ifndef HN_SCHED_EVAL_H
#define HN_SCHED_EVAL_H

#include "comm_log.h"
#include "../ranks/runtime_int.h"

#define HN_DRY_RUN_BUDGET 20000000 /* instructions the dry runs of all ranks may execute */
#define HN_DRY_RUN_RECORDS 1000000 /* communications and allocations they may log */

typedef enum hn_vkind { HN_V_UNDEF, HN_V_INT, HN_V_TENSOR, HN_V_STREAM, HN_V_COMM } hn_vkind;

typedef struct hn_value {
    hn_vkind kind;
    hn_tensor t;   /* tensors */
    int owned;     /* tensor came from alloc (may be freed) */
    int stream;    /* streams: HN_CALLER_STREAM or pool index */
    int comm;      /* communications: its number in the run, -1 = nothing to wait for */
    int event;     /* ... and its event (hn_rank's comm_events), -1 = none */
} hn_value;
/* Per-run evaluation state of one rank. */
typedef struct hn_exec {
    hn_runtime *rt;       /* NULL in a dry run */
    hn_rank *r;           /* NULL in a dry run */
    const hn_program *p;
    int rank, world, nstreams;
    int dry;
    int reference;        /* running the reference block: no communication */
    int promote;          /* reference: bf16/f16 allocations become f32 */
    int poison;           /* fill fresh allocations with NaN / a pattern */
    hn_value *vals;
    int64_t *ivals;
    int cur;              /* current stream */
    int last_comm;        /* number of the last communication, -1 none */
    int last_event;       /* ... and its event, -1 none */
    int comm_next;        /* number of the next communication */
    /* `via auto` as resolved in this run, by instruction and size: what
     * it reads (the profile, the settings, the tables) holds for a run,
     * and an eager loop of small collectives would otherwise pay the
     * lookups on every call (eval_comm.c, via_of) */
    struct {
        int id1; /* instruction id + 1; 0: empty */
        int n;
        hn_dtype dtype;
        size_t count;
        hn_via via;
    } via_memo[16];
    /* a real run with `wait`s: the event of each communication instruction
     * (by id; -1 none yet), one per instruction however often it runs: a
     * wait captures the record made just before it, and a later record
     * does not change earlier waits, so a loop of millions of
     * communications needs no more events than it has instructions */
    int *event_of;
    int nevents;
    /* per alloc instruction run: its allocations so far this run, by id
     * (open addressing: id + 1 and count in pairs; at most half full), not
     * an int per instruction of the program */
    int *occurrence;
    int noccurrence, occurrence_cap;
    hn_comm_log *log;     /* dry run: communications issued */
    unsigned streams_used; /* dry run: bit k, pool stream k is used */
    int fault_seen[HN_MAX_FAULTS]; /* per injected fault: matches so far */
    int fault_skip;       /* a skip fault matched the instruction: it is not issued */
    hn_trace_rank *trace; /* a traced run: this rank's recorder, else NULL */
    const hn_trace_hook *trace_hook; /* ... and its hook, in every origin */
    const hn_graph_ctx *graph;       /* a capture: the graph's state of this rank, in every origin */
    int64_t budget;       /* dry run: instructions left before giving up */
    int64_t records;      /* dry run: communications and allocations left to log */
    /* dry run: the first error of this rank */
    hn_status_t status;
    int err_instr;
    char err[512];
} hn_exec;

/* Evaluates the body (or the reference block) with values bound already.
 * On failure x->status/err/err_instr describe the first error. */
hn_status_t hn_exec_block(hn_exec *x, const hn_block *b);
hn_status_t hn_exec_prepare(hn_exec *x, const hn_program *p, int rank, int world, int nstreams,
                            const int64_t *param_values);
void hn_exec_release(hn_exec *x);


#endif
