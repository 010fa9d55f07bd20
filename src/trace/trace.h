/* Tracing: what the evaluator and the runtime call while a trace runs
 * (trace.c records, per rank, each instruction's issue on the rank's thread
 * and its work on its stream, timed by the device's markers, and writes
 * Chrome trace-event JSON), and what reads such a file back for `hirnode
 * trace`: the spans (trace_read.c), the busy time, overlap figure and
 * critical path (trace_stats.c, pure functions over spans) and a picture
 * (trace_svg.c). docs/TRACING.md describes the format and the figures. */
#ifndef HN_TRACE_H
#define HN_TRACE_H

#include "../ranks/runtime_int.h"

/* ---- tracks: the Chrome trace's tids within a rank's process ---- */
#define HN_TRACK_HOST 0    /* the rank's thread: runs and issue spans */
#define HN_TRACK_CALLER 1  /* the caller stream */
#define HN_TRACK_STREAM0 2 /* pool stream k is HN_TRACK_STREAM0 + k */
#define HN_TRACK_LANE0 32  /* p2p copy lanes, numbered as first used */
#define HN_TRACK_LANES 16  /* most lanes a rank's trace tells apart */

/* The track of stream index `stream` (HN_CALLER_STREAM or a pool index). */
static inline int hn_track_of_stream(int stream)
{
    return stream == HN_CALLER_STREAM ? HN_TRACK_CALLER : HN_TRACK_STREAM0 + stream;
}

/* ---- recording (trace.c) ----
 * The recorder knows nothing of the evaluator's state: the evaluator
 * (src/exec/eval_trace.c), a layer above, hands it what it evaluated —
 * the span a wait waits for, a communication's bytes, team or peers. */

/* At the start of a traced run of program p, on the rank's thread: the
 * rank's recorder, and in *hook the hook for the run's origins; NULL (and
 * *hook NULL) when recording has failed before. */
hn_trace_rank *hn_trace_run_begin(hn_trace *tr, hn_rank *r, const hn_program *p, const hn_trace_hook **hook);
/* After the run's streams are synchronized: the run's spans get their
 * device times and go into the recording. In a failed run (ok = 0, or
 * another rank failed) the device spans whose markers were never reached
 * (dropped behind the failure) are left out. */
void hn_trace_run_end(hn_trace_rank *t, int ok);

/* One instruction of a traced run, between hn_trace_step_begin and
 * hn_trace_step_end around its handler. */
typedef struct hn_trace_step {
    int kind;      /* its span kind (hn_span_kind) */
    int span;      /* its device span (pending), -1 none */
    hn_dstream *s; /* ... on this stream */
    int64_t h0;    /* when its issue began */
} hn_trace_step;

/* What a wait waits for: the last device span of this run on stream index
 * `stream` (HN_CALLER_STREAM or a pool index), the span of the run's
 * communication number `comm`; -1 for none. */
int hn_trace_stream_span(const hn_trace_rank *t, int stream);
int hn_trace_comm_span(const hn_trace_rank *t, int comm);
/* Before the handler of instruction in, issued on r's stream index
 * `stream`: its issue begins, and a device span opens with a marker on
 * the stream; dep: for a wait, the span it waits for. 0 when nothing is
 * to be recorded (not a traced instruction, or recording has stopped):
 * then no hn_trace_step_end. */
int hn_trace_step_begin(hn_trace_rank *t, hn_rank *r, const hn_instr *in, int stream, int dep, hn_trace_step *step);
/* After the handler returned st; comm: the number the run's next
 * communication had before it, comm_issued: whether it issued one (a
 * collective this rank is no member of issues nothing). 1 when the
 * instruction is a communication whose span was recorded: the evaluator
 * then hands over its bytes (hn_trace_comm_bytes, a collective; its team
 * came during the handler, hn_trace_team) or its messages
 * (hn_trace_message, each valid peer in order). */
int hn_trace_step_end(hn_trace_rank *t, const hn_instr *in, hn_trace_step *step, hn_status_t st, int comm,
                      int comm_issued);
void hn_trace_comm_bytes(hn_trace_rank *t, const hn_trace_step *step, size_t bytes);
/* A message of the step: a send to `peer` (send = 1) or a receive from it,
 * on communicator via, of `bytes`. */
void hn_trace_message(hn_trace_rank *t, const hn_trace_step *step, int send, int peer, int via, size_t bytes);
/* The team of the collective being issued (between hn_trace_step_begin
 * and hn_trace_step_end) and the communicator it goes through (`via auto`
 * resolved), handed over by the evaluator once it has evaluated them: its
 * match keys count the team's collectives. */
void hn_trace_team(hn_trace_rank *t, const hn_instr *in, int via, const int *members, int n);

/* ---- spans, as read back (trace_read.c) ---- */

typedef enum hn_span_kind {
    HN_SPAN_COMPUTE, /* device: a compute op (copy, fill, matmul, ...) */
    HN_SPAN_COMM,    /* device: a communication, or a piece of it on a lane */
    HN_SPAN_WAIT,    /* device: wait_stream / wait, as long as the stream waited */
    HN_SPAN_ISSUE,   /* host: the rank's thread issuing an instruction */
    HN_SPAN_RUN,     /* host: one run, from its start to the end of its sync */
    HN_SPAN_KINDS
} hn_span_kind;

static inline int hn_span_on_device(hn_span_kind k) { return k <= HN_SPAN_WAIT; }

typedef struct hn_span {
    int rank, track;
    hn_span_kind kind;
    int64_t begin, end; /* nanoseconds from the start of the trace */
    int run;            /* which run (iteration), from 0 */
    int id;             /* device spans: unique in the rank, in issue order; else -1 */
    int dep;            /* waits: the id of the span waited for (same rank); else -1 */
    int instr;          /* instruction id; -1 for runs */
    int key0, nkeys;    /* communications: their match keys, keys[key0 .. key0 + nkeys) */
    const char *name;   /* the instruction's keyword, or "run N" */
    const char *text;   /* the instruction ("" for runs) */
    const char *src;    /* file:line:col ("" for runs) */
} hn_span;

/* The order of spans in a trace: by rank, track, begin, then id. */
static inline int hn_span_order(const hn_span *x, const hn_span *y)
{
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    if (x->track != y->track)
        return x->track < y->track ? -1 : 1;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

typedef struct hn_trace_track {
    int rank, track;
    char *name;
} hn_trace_track;

/* A trace file read back. Spans sorted by (rank, track, begin, id). */
typedef struct hn_trace_data {
    hn_span *spans;
    int nspans;
    /* match keys, interned: spans of one communication on its members
     * share a key (collectives: team and sequence; messages: sender,
     * receiver and sequence) */
    int *keys;         /* key ids of the spans' match keys, back to back */
    int nkeys;
    char **key_names;  /* by key id, e.g. "c:p2p:0,1,2,3:5", "m:nccl:2>3:0" */
    int nkey_names;
    hn_trace_track *tracks; /* sorted by (rank, track) */
    int ntracks;
    int nranks, nruns;
    char *backend, *program;
    char **strings; /* what the spans' strings point into */
    int nstrings;
} hn_trace_data;

/* Reads a trace written by hirnode (len bytes of text). Errors into err
 * ("line:col: ..." for bad JSON, or what is missing). On failure *out is
 * left empty (nothing to free). */
hn_status_t hn_trace_load(const char *text, size_t len, hn_trace_data *out, hn_strbuf *err);
/* The same from a file: a regular file of at most HN_TRACE_MAX_BYTES;
 * HN_ERR_IO if it is not one or cannot be read. */
#define HN_TRACE_MAX_BYTES ((uint64_t)1 << 30)
hn_status_t hn_trace_load_file(const char *path, hn_trace_data *out, hn_strbuf *err);
void hn_trace_data_free(hn_trace_data *t);
/* The track's name ("stream 2", "p2p lane 0", ...), "?" if unnamed. */
const char *hn_trace_track_name(const hn_trace_data *t, int rank, int track);

/* ---- figures (trace_stats.c): pure functions over spans ---- */

/* Busy time of one track: the union of its compute and communication
 * spans (waits are not work); each kind's sum beside it. */
typedef struct hn_track_busy {
    int rank, track;
    int64_t busy, compute, comm, wait;
    int nspans;
} hn_track_busy;

/* Per device track of the spans of `run` (-1: all runs), sorted by (rank,
 * track); *out is the caller's to free (hn_free). */
hn_status_t hn_trace_busy(const hn_span *s, int n, int run, hn_track_busy **out, int *nout);

/* The overlap figure: of the time communications take (each
 * communication span counted on its own track), the part during which the
 * same rank runs compute on another of its tracks. rank and run: -1 for
 * all. figure = hidden / comm (0 when comm is 0). */
typedef struct hn_overlap {
    int64_t comm, hidden;
} hn_overlap;

hn_status_t hn_trace_overlap(const hn_span *s, int n, int rank, int run, hn_overlap *out);
static inline double hn_overlap_figure(const hn_overlap *o)
{
    return o->comm > 0 ? (double)o->hidden / (double)o->comm : 0.0;
}

/* One piece of a critical path: [from, to) on span `span` (an index into
 * the spans), or idle (span = -1: no traced work of the path ran, e.g. the
 * stream waited for the host to issue). */
typedef struct hn_path_seg {
    int span;
    int64_t from, to;
} hn_path_seg;

/* The critical path of `run`: from the device span that ends last, back
 * through what released each span: its predecessor on its track, the span
 * a wait waited for, or for a communication the same communication on the
 * member that started it last (keys: the spans' match keys). Segments in
 * time order into *out (hn_free); none if the run has no device spans.
 * docs/TRACING.md defines it exactly. */
hn_status_t hn_trace_critical_path(const hn_span *s, int n, const int *keys, int run, hn_path_seg **out,
                                   int *nout);

/* ---- picture (trace_svg.c) ---- */

/* The timeline of `run` (-1: all runs) as a standalone SVG, `width`
 * pixels wide: a row per rank and device track, compute and communication
 * in two colours (waits pale), a time axis, the overlap figure in the
 * title. Appended to out. */
hn_status_t hn_trace_svg(const hn_trace_data *t, int run, int width, hn_strbuf *out);
/* n traces (1 to HN_TRACE_SVG_MAX; run runs[k] of t[k]) one above the
 * other, each from its own start, on one time scale. */
#define HN_TRACE_SVG_MAX 8
hn_status_t hn_trace_svg_stack(const hn_trace_data *const *t, const int *runs, int n, int width, hn_strbuf *out);

#endif
