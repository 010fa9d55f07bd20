/* Recording a trace: per rank, while a run is traced, each instruction's
 * issue on the rank's thread (host clock) and its work on its stream,
 * between two timing markers of the device recorded around it; resolved
 * after the run's sync and kept as Chrome trace-event JSON until the trace
 * stops and is written. A rank's recorder is touched only by its own thread
 * during runs, and by the caller's thread between runs. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "../base/json.h"
#include "../ir/parse.h"
#include "../ranks/pool.h"
#include "../ranks/rank.h"
#include "../ranks/run_error.h"
#include "../ranks/teams.h"
#include "trace.h"

/* One span of the run being issued. */
typedef struct pend {
    hn_span_kind kind;
    int dropped;  /* nothing was issued after all (or its markers failed) */
    int instr, track, id, dep;
    int t0, t1;   /* device spans: indices of the markers around the work */
    int64_t h0, h1; /* host spans: ns from the start of the trace */
    /* communications */
    int coll;     /* 1 collective, 0 messages, -1 a piece on a lane */
    int via, lane; /* via: as the instruction says it */
    int comm;      /* the communicator it went through (`via auto` resolved) */
    size_t bytes;
    int info, ninfo; /* ints[info ..]: collective: seq, n, members; messages: (send, peer, k) each */
} pend;

/* Collectives of one team issued so far in this run, for match keys. */
typedef struct team_seq {
    int via, off, n, count;
} team_seq;

struct hn_trace_rank {
    hn_trace *tr;
    int rank;
    hn_trace_hook hook;
    const hn_program *p; /* of the run being traced */
    hn_dtimer **timers;  /* pool, reused run after run */
    int ntimers, timers_cap, tnext;
    pend *pend;
    int npend, pend_cap;
    int *ints;
    int nints, ints_cap;
    team_seq *teams;
    int nteams, teams_cap;
    int *team_ints;
    int nteam_ints, team_ints_cap;
    int *sends, *recvs; /* [via * world + peer]: messages this run */
    int *comm_id;       /* communication (its event index) -> span id, this run */
    int ncomm_id, comm_id_cap;
    int last_id[HN_TRACK_LANE0]; /* the last device span of each stream track, this run */
    hn_dstream *lanes[HN_TRACK_LANES];
    int lane_index[HN_TRACK_LANES];
    int nlanes;
    uint32_t used; /* stream tracks used (bit = track) */
    int run, cur_run, next_id;
    int cur_comm, open_lane; /* pend indices while a communication issues */
    int host_clock;  /* the backend reads markers on the host's clock: no epoch */
    int64_t epoch_h; /* host ns when the run's epoch marker (timer 0) was recorded ... */
    int64_t align;   /* ... and within how long the device reached it */
    hn_strbuf out;   /* finished events, one a line */
    hn_status_t failed;
    long dropped; /* device spans whose markers were never reached */
};

struct hn_trace {
    hn_runtime *rt;
    FILE *f;
    char *path;
    int64_t t0;
    hn_trace_rank *ranks;
};

static int64_t clock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t now(const hn_trace_rank *t) { return clock_ns() - t->tr->t0; }

/* Recording stops at its first failure; the run goes on, the file says so. */
static void stop_recording(hn_trace_rank *t, hn_status_t st, const char *what)
{
    if (t->failed != HN_OK)
        return;
    t->failed = st;
    HN_WARN("trace of rank %d: %s (%s): the trace stops recording here", t->rank, what, hn_status_string(st));
}

static int new_pend(hn_trace_rank *t)
{
    if (hn_grow((void **)&t->pend, &t->pend_cap, t->npend, sizeof(*t->pend)) != 0) {
        stop_recording(t, HN_ERR_NOMEM, "out of memory");
        return -1;
    }
    memset(&t->pend[t->npend], 0, sizeof(*t->pend));
    t->pend[t->npend].id = t->pend[t->npend].dep = -1;
    t->pend[t->npend].t0 = t->pend[t->npend].t1 = -1;
    return t->npend++;
}

/* Marker i of the pool, created when first needed; NULL on failure. */
static hn_dtimer *timer_at(hn_trace_rank *t, int i)
{
    hn_runtime *rt = t->tr->rt;
    hn_status_t st;
    while (t->ntimers <= i) {
        if (hn_grow((void **)&t->timers, &t->timers_cap, t->ntimers, sizeof(*t->timers)) != 0) {
            stop_recording(t, HN_ERR_NOMEM, "out of memory");
            return NULL;
        }
        if ((st = rt->dev->timer_create(rt->dev_ctx, t->rank, &t->timers[t->ntimers])) != HN_OK) {
            stop_recording(t, st, "cannot create a timing marker");
            return NULL;
        }
        t->ntimers++;
    }
    return t->timers[i];
}

/* Records the next marker of the pool on s, for instruction `instr`; its
 * index, or -1. After a failure, the backend drops it like other work. */
static int take_timer(hn_trace_rank *t, hn_dstream *s, int instr)
{
    hn_runtime *rt = t->tr->rt;
    hn_origin o = {&rt->sink, t->rank, instr, NULL, NULL};
    hn_dtimer *m = timer_at(t, t->tnext);
    hn_status_t st;
    if (m == NULL)
        return -1;
    if ((st = rt->dev->timer_record(m, s, &o)) != HN_OK) {
        stop_recording(t, st, "cannot record a timing marker");
        return -1;
    }
    return t->tnext++;
}

static int push_ints(hn_trace_rank *t, const int *v, int n)
{
    int off = t->nints;
    if (n > 0 && hn_grow((void **)&t->ints, &t->ints_cap, t->nints + n - 1, sizeof(int)) != 0) {
        stop_recording(t, HN_ERR_NOMEM, "out of memory");
        return -1;
    }
    memcpy(t->ints + off, v, (size_t)n * sizeof(int));
    t->nints += n;
    return off;
}

/* What a traced instruction is: device work of a kind, a host span only
 * (host_sync blocks, a loop encloses its body), or nothing to trace. */
static int kind_of(hn_op op)
{
    const hn_op_info *i = &hn_op_table[op];
    if (i->form == HN_FORM_COMPUTE)
        return HN_SPAN_COMPUTE;
    if (i->flags & HN_OPF_COMM)
        return HN_SPAN_COMM;
    if (op == HN_OP_WAIT_STREAM || op == HN_OP_WAIT)
        return HN_SPAN_WAIT;
    if (op == HN_OP_HOST_SYNC || op == HN_OP_FOR)
        return HN_SPAN_ISSUE;
    return -1;
}

static hn_dstream *stream_of(hn_rank *r, int idx)
{
    hn_dstream *s = NULL;
    if (idx == HN_CALLER_STREAM)
        return r->active;
    return hn_rank_stream(r, idx, &s) == HN_OK ? s : NULL;
}

int hn_trace_stream_span(const hn_trace_rank *t, int stream)
{
    return stream >= HN_CALLER_STREAM && stream < HN_MAX_STREAMS ? t->last_id[hn_track_of_stream(stream)] : -1;
}

int hn_trace_comm_span(const hn_trace_rank *t, int comm)
{
    return comm >= 0 && comm < t->ncomm_id ? t->comm_id[comm] : -1;
}

/* This run's sequence number of a collective on (via, members). */
static int next_team_seq(hn_trace_rank *t, int via, const int *members, int n)
{
    team_seq *e;
    for (int i = 0; i < t->nteams; i++) {
        e = &t->teams[i];
        if (e->via == via && e->n == n && memcmp(t->team_ints + e->off, members, (size_t)n * sizeof(int)) == 0)
            return e->count++;
    }
    if (hn_grow((void **)&t->teams, &t->teams_cap, t->nteams, sizeof(*t->teams)) != 0 ||
        hn_grow((void **)&t->team_ints, &t->team_ints_cap, t->nteam_ints + n, sizeof(int)) != 0) {
        stop_recording(t, HN_ERR_NOMEM, "out of memory");
        return -1;
    }
    e = &t->teams[t->nteams++];
    e->via = via;
    e->n = n;
    e->off = t->nteam_ints;
    e->count = 1;
    memcpy(t->team_ints + e->off, members, (size_t)n * sizeof(int));
    t->nteam_ints += n;
    return 0;
}

void hn_trace_comm_bytes(hn_trace_rank *t, const hn_trace_step *step, size_t bytes)
{
    if (step->span >= 0)
        t->pend[step->span].bytes = bytes;
}

/* A message is kept as (send, peer, k): k, the messages between this rank
 * and the peer that way on via so far this run, matches it with its other
 * end. */
void hn_trace_message(hn_trace_rank *t, const hn_trace_step *step, int send, int peer, int via, size_t bytes)
{
    int world = t->tr->rt->world, trip[3], *count = send ? t->sends : t->recvs;
    pend *e;
    if (step->span < 0 || t->failed != HN_OK || peer < 0 || peer >= world || via < 0 || via >= HN_VIA_COUNT)
        return;
    trip[0] = send;
    trip[1] = peer;
    trip[2] = count[via * world + peer]++;
    if (push_ints(t, trip, 3) < 0)
        return;
    e = &t->pend[step->span];
    e->ninfo += 3;
    e->bytes += bytes;
}

void hn_trace_team(hn_trace_rank *t, const hn_instr *in, int via, const int *members, int n)
{
    int p = t->cur_comm, info[258], off;
    if (p < 0 || t->failed != HN_OK || n > 256)
        return;
    info[0] = next_team_seq(t, (int)in->via, members, n);
    info[1] = n;
    memcpy(info + 2, members, (size_t)n * sizeof(int));
    if (info[0] < 0 || (off = push_ints(t, info, n + 2)) < 0)
        return;
    t->pend[p].coll = 1;
    t->pend[p].via = (int)in->via;
    t->pend[p].comm = via;
    t->pend[p].info = off;
    t->pend[p].ninfo = n + 2;
}

static void set_comm_id(hn_trace_rank *t, int idx, int id)
{
    if (hn_grow((void **)&t->comm_id, &t->comm_id_cap, idx, sizeof(int)) != 0) {
        stop_recording(t, HN_ERR_NOMEM, "out of memory");
        return;
    }
    while (t->ncomm_id <= idx)
        t->comm_id[t->ncomm_id++] = -1;
    t->comm_id[idx] = id;
}

/* A device span opens: its first marker on s, before the work. */
static int device_begin(hn_trace_rank *t, const hn_instr *in, int kind, int stream, hn_dstream *s, int dep)
{
    int p = new_pend(t);
    pend *e;
    if (p < 0)
        return -1;
    e = &t->pend[p];
    e->kind = (hn_span_kind)kind;
    e->instr = in->id;
    e->track = hn_track_of_stream(stream);
    e->id = t->next_id++;
    if (kind == HN_SPAN_WAIT)
        e->dep = dep;
    if ((t->pend[p].t0 = take_timer(t, s, in->id)) < 0) {
        t->npend--;
        return -1;
    }
    return p;
}

/* Its last marker, after the work; 1 when it is a communication whose
 * bytes and peers are to come. */
static int device_end(hn_trace_rank *t, const hn_instr *in, int p, hn_dstream *s, int comm)
{
    int t1 = take_timer(t, s, in->id);
    pend *e = &t->pend[p];
    if (t1 < 0) {
        e->dropped = 1;
        return 0;
    }
    e->t1 = t1;
    t->last_id[e->track] = e->id;
    t->used |= 1u << e->track;
    if (e->kind != HN_SPAN_COMM)
        return 0;
    if (hn_op_table[in->op].form != HN_FORM_COLL) { /* messages: hn_trace_message, from the evaluator */
        const hn_instr *first = in->op == HN_OP_GROUP ? (in->body.n > 0 ? in->body.items[0] : NULL) : in;
        e->coll = 0;
        e->via = e->comm = first != NULL ? (int)first->via : 0;
        e->info = t->nints;
        e->ninfo = 0;
    }
    set_comm_id(t, comm, e->id);
    return 1;
}

/* The track of a lane stream: the same stream keeps its track. */
static int lane_track(hn_trace_rank *t, hn_dstream *s, int lane)
{
    for (int i = 0; i < t->nlanes; i++)
        if (t->lanes[i] == s)
            return HN_TRACK_LANE0 + i;
    if (t->nlanes == HN_TRACK_LANES)
        return -1;
    t->lanes[t->nlanes] = s;
    t->lane_index[t->nlanes] = lane;
    return HN_TRACK_LANE0 + t->nlanes++;
}

/* The hook in traced origins: a piece of the current communication on
 * one of the communicator's lanes. */
static void lane_mark(void *ctx, hn_dstream *s, int lane, size_t bytes, int end)
{
    hn_trace_rank *t = ctx;
    if (t->failed != HN_OK || t->cur_comm < 0)
        return;
    if (!end) {
        int track = lane_track(t, s, lane), p;
        t->open_lane = -1;
        if (track < 0 || (p = new_pend(t)) < 0)
            return;
        t->pend[p].kind = HN_SPAN_COMM;
        t->pend[p].instr = t->pend[t->cur_comm].instr;
        t->pend[p].track = track;
        t->pend[p].id = t->next_id++;
        t->pend[p].coll = -1;
        t->pend[p].via = t->pend[p].comm = HN_VIA_P2P;
        t->pend[p].lane = lane;
        t->pend[p].bytes = bytes;
        if ((t->pend[p].t0 = take_timer(t, s, t->pend[p].instr)) < 0) {
            t->npend--;
            return;
        }
        t->open_lane = p;
    } else if (t->open_lane >= 0) {
        int t1 = take_timer(t, s, t->pend[t->open_lane].instr);
        if (t1 < 0)
            t->pend[t->open_lane].dropped = 1;
        else
            t->pend[t->open_lane].t1 = t1;
        t->open_lane = -1;
    }
}

static void host_span(hn_trace_rank *t, const hn_instr *in, int64_t h0, int64_t h1)
{
    int p = new_pend(t);
    if (p < 0)
        return;
    t->pend[p].kind = HN_SPAN_ISSUE;
    t->pend[p].instr = in->id;
    t->pend[p].track = HN_TRACK_HOST;
    t->pend[p].h0 = h0;
    t->pend[p].h1 = h1;
}

int hn_trace_step_begin(hn_trace_rank *t, hn_rank *r, const hn_instr *in, int stream, int dep, hn_trace_step *step)
{
    int kind = kind_of(in->op);
    if (kind < 0 || t->failed != HN_OK)
        return 0;
    step->kind = kind;
    step->span = -1;
    step->s = NULL;
    step->h0 = now(t);
    if (hn_span_on_device((hn_span_kind)kind) && (step->s = stream_of(r, stream)) != NULL)
        step->span = device_begin(t, in, kind, stream, step->s, dep);
    t->cur_comm = kind == HN_SPAN_COMM ? step->span : -1;
    return 1;
}

int hn_trace_step_end(hn_trace_rank *t, const hn_instr *in, hn_trace_step *step, hn_status_t st, int comm,
                      int comm_issued)
{
    int64_t h1 = now(t);
    int details = 0;
    t->cur_comm = -1;
    if (step->span >= 0 && t->failed == HN_OK) {
        /* a collective this rank is no member of issues nothing */
        if (st != HN_OK || (step->kind == HN_SPAN_COMM && !comm_issued))
            t->pend[step->span].dropped = 1;
        else
            details = device_end(t, in, step->span, step->s, comm);
    }
    if (t->failed == HN_OK)
        host_span(t, in, step->h0, h1);
    if (!details)
        step->span = -1;
    return details && t->failed == HN_OK;
}

hn_trace_rank *hn_trace_run_begin(hn_trace *tr, hn_rank *r, const hn_program *p, const hn_trace_hook **hook)
{
    hn_trace_rank *t = &tr->ranks[r->local];
    int world = tr->rt->world;
    int64_t h;
    *hook = NULL;
    t->cur_run = t->run++; /* counted even when not recorded: runs keep their numbers on every rank */
    if (t->failed != HN_OK)
        return NULL;
    t->p = p;
    t->npend = t->tnext = t->nints = t->nteams = t->nteam_ints = t->ncomm_id = 0;
    t->cur_comm = t->open_lane = -1;
    memset(t->sends, 0, (size_t)HN_VIA_COUNT * (size_t)world * sizeof(int));
    memset(t->recvs, 0, (size_t)HN_VIA_COUNT * (size_t)world * sizeof(int));
    for (int i = 0; i < HN_TRACK_LANE0; i++)
        t->last_id[i] = -1;
    /* Markers without a host-clock reading are timed from an epoch marker
     * on the caller's stream, idle at a run's start, so the device reaches
     * it at once; waiting for it bounds how far the clocks may be apart.
     * Backends with host-clock markers need none: an epoch there would be
     * work on the caller's stream that a first wait_stream waits for. */
    t->epoch_h = now(t);
    if (timer_at(t, 0) == NULL)
        return NULL;
    t->host_clock = r->rt->dev->timer_host_ns(t->timers[0], &h) != HN_ERR_UNSUPPORTED;
    if (t->host_clock)
        t->tnext = 1; /* timer 0 stays unused */
    else if (take_timer(t, r->active, -1) != 0 || r->rt->dev->stream_sync(r->active) != HN_OK)
        return NULL;
    t->align = now(t) - t->epoch_h;
    *hook = &t->hook;
    return t;
}

/* "ts":..,"dur":.. in microseconds with nanosecond digits, exactly */
static void put_us(hn_strbuf *sb, const char *key, int64_t ns)
{
    uint64_t a = ns < 0 ? (uint64_t)-ns : (uint64_t)ns;
    hn_sb_printf(sb, ",\"%s\":%s%llu.%03llu", key, ns < 0 ? "-" : "", (unsigned long long)(a / 1000),
                 (unsigned long long)(a % 1000));
}

static void put_instr(hn_strbuf *sb, const hn_program *p, const hn_instr *in)
{
    hn_strbuf text;
    char src[64];
    hn_sb_init(&text);
    /* a group lowered from a statement is named by it, once, like its members */
    if (in->op == HN_OP_GROUP && !(in->origin >= 0 && in->origin < p->norigins)) {
        hn_sb_append(&text, "group { ");
        for (int i = 0; i < in->body.n; i++) {
            if (i > 0)
                hn_sb_append(&text, "; ");
            hn_print_instr_short(&text, p, in->body.items[i]);
        }
        hn_sb_append(&text, " }");
    } else {
        hn_print_instr_short(&text, p, in);
    }
    hn_sb_printf(sb, ",\"instr\":%d,\"src\":", in->id);
    snprintf(src, sizeof(src), ":%d:%d", in->line, in->col);
    {
        hn_strbuf where;
        hn_sb_init(&where);
        hn_sb_append(&where, p->filename);
        hn_sb_append(&where, src);
        hn_json_put_string(sb, where.data != NULL ? where.data : "");
        hn_sb_free(&where);
    }
    hn_sb_append(sb, ",\"text\":");
    hn_json_put_string(sb, text.data != NULL ? text.data : "");
    hn_sb_free(&text);
}

static void put_comm(hn_strbuf *sb, const hn_trace_rank *t, const pend *e)
{
    const hn_runtime *rt = t->tr->rt;
    const char *via = hn_via_name((hn_via)e->via);
    const int *v = t->ints + e->info;
    hn_sb_printf(sb, ",\"via\":\"%s\",\"comm\":\"%s\",\"bytes\":%zu", via,
                 hn_runtime_comm(rt, (hn_via)e->comm)->ops->name, e->bytes);
    if (e->coll < 0) {
        hn_sb_printf(sb, ",\"lane\":%d", e->lane);
    } else if (e->coll == 1 && e->ninfo >= 2) {
        hn_sb_printf(sb, ",\"seq\":%d,\"team\":[", v[0]);
        for (int i = 0; i < v[1]; i++)
            hn_sb_printf(sb, i ? ",%d" : "%d", v[2 + i]);
        hn_sb_printf(sb, "],\"match\":\"c:%s:", via);
        for (int i = 0; i < v[1]; i++)
            hn_sb_printf(sb, i ? ",%d" : "%d", v[2 + i]);
        hn_sb_printf(sb, ":%d\"", v[0]);
    } else if (e->coll == 0) {
        for (int dir = 1; dir >= 0; dir--) {
            int first = 1;
            hn_sb_append(sb, dir ? ",\"sends\":[" : ",\"recvs\":[");
            for (int i = 0; i + 2 < e->ninfo; i += 3)
                if (v[i] == dir) {
                    hn_sb_printf(sb, first ? "%d" : ",%d", v[i + 1]);
                    first = 0;
                }
            hn_sb_append(sb, "]");
        }
        hn_sb_append(sb, ",\"match\":\"");
        for (int i = 0; i + 2 < e->ninfo; i += 3) {
            int src = v[i] ? t->rank : v[i + 1], dst = v[i] ? v[i + 1] : t->rank;
            hn_sb_printf(sb, "%sm:%s:%d>%d:%d", i ? " " : "", via, src, dst, v[i + 2]);
        }
        hn_sb_append(sb, "\"");
    }
}

static const char *const cat_names[HN_SPAN_KINDS] = {"compute", "comm", "wait", "issue", "run"};

/* When marker i was reached, in ns of the trace: read on the host's clock
 * where the backend can (exact), else from the run's epoch marker. */
static int marker_ns(const hn_trace_rank *t, int i, int host_clock, int64_t *ns)
{
    const hn_device_ops *dev = t->tr->rt->dev;
    double sec;
    int64_t h;
    if (i < 0)
        return 0;
    if (host_clock) {
        if (dev->timer_host_ns(t->timers[i], &h) != HN_OK)
            return 0;
        *ns = h - t->tr->t0;
        return 1;
    }
    if (dev->timer_elapsed(t->timers[0], t->timers[i], &sec) != HN_OK)
        return 0;
    *ns = t->epoch_h + (int64_t)(sec * 1e9 + (sec < 0 ? -0.5 : 0.5));
    return 1;
}

/* Writes a resolved span; 0 when its markers were never reached. */
static int put_span(hn_trace_rank *t, const pend *e, int host_clock)
{
    const hn_instr *in = t->p->instrs[e->instr];
    int64_t b = e->h0, en = e->h1;
    hn_strbuf *sb = &t->out;
    if (hn_span_on_device(e->kind)) {
        if (!marker_ns(t, e->t0, host_clock, &b) || !marker_ns(t, e->t1, host_clock, &en))
            return 0;
        if (en < b)
            en = b;
    }
    hn_sb_printf(sb, "{\"ph\":\"X\",\"cat\":\"%s\",\"name\":\"%s\",\"pid\":%d,\"tid\":%d", cat_names[e->kind],
                 hn_op_table[in->op].keyword, t->rank, e->track);
    put_us(sb, "ts", b);
    put_us(sb, "dur", en - b);
    hn_sb_printf(sb, ",\"args\":{\"run\":%d", t->cur_run);
    if (e->id >= 0)
        hn_sb_printf(sb, ",\"id\":%d", e->id);
    if (e->kind == HN_SPAN_WAIT)
        hn_sb_printf(sb, ",\"dep\":%d", e->dep);
    put_instr(sb, t->p, in);
    if (e->kind == HN_SPAN_COMM)
        put_comm(sb, t, e);
    hn_sb_append(sb, "}},\n");
    return 1;
}

void hn_trace_run_end(hn_trace_rank *t, int ok)
{
    hn_runtime *rt = t->tr->rt;
    int64_t h_end = now(t);
    int host_clock = t->host_clock;
    hn_strbuf *sb = &t->out;
    /* a rank that issued and synchronized well may still be in a failed run */
    ok = ok && !__atomic_load_n(rt->abort_flag, __ATOMIC_ACQUIRE);
    for (int i = 0; i < t->npend && t->failed == HN_OK; i++) {
        const pend *e = &t->pend[i];
        /* after a failure, markers behind it were dropped: so are their spans */
        if (!e->dropped && !put_span(t, e, host_clock) && ok)
            t->dropped++;
    }
    hn_sb_printf(sb, "{\"ph\":\"X\",\"cat\":\"run\",\"name\":\"run %d\",\"pid\":%d,\"tid\":%d", t->cur_run, t->rank,
                 HN_TRACK_HOST);
    put_us(sb, "ts", t->epoch_h);
    put_us(sb, "dur", h_end - t->epoch_h);
    hn_sb_printf(sb, ",\"args\":{\"run\":%d,\"ok\":%s,\"clock\":\"%s\"", t->cur_run, ok ? "true" : "false",
                 host_clock ? "host" : "epoch");
    if (!host_clock) /* how far device and host times may be apart */
        put_us(sb, "align_us", t->align);
    hn_sb_append(sb, ",\"program\":");
    hn_json_put_string(sb, t->p->filename);
    hn_sb_append(sb, "}},\n");
    if (t->rank == 0) { /* a mark across every process */
        hn_sb_printf(sb, "{\"ph\":\"i\",\"s\":\"g\",\"name\":\"run %d\",\"pid\":0,\"tid\":%d", t->cur_run,
                     HN_TRACK_HOST);
        put_us(sb, "ts", t->epoch_h);
        hn_sb_append(sb, "},\n");
    }
    if (sb->failed)
        stop_recording(t, HN_ERR_NOMEM, "out of memory");
}

/* ---- the public calls: start and stop ---- */

static void rank_free(hn_trace_rank *t)
{
    hn_free(t->timers);
    hn_free(t->pend);
    hn_free(t->ints);
    hn_free(t->teams);
    hn_free(t->team_ints);
    hn_free(t->sends);
    hn_free(t->recvs);
    hn_free(t->comm_id);
    hn_sb_free(&t->out);
}

static void trace_free(hn_trace *tr)
{
    if (tr->ranks != NULL)
        for (int i = 0; i < tr->rt->nlocal; i++)
            rank_free(&tr->ranks[i]);
    hn_free(tr->ranks);
    hn_free(tr->path);
    hn_free(tr);
}

hn_status_t hn_runtime_trace_start(hn_runtime *rt, const char *path)
{
    hn_trace *tr;
    hn_status_t st = HN_ERR_NOMEM;
    if (rt == NULL || path == NULL || *path == '\0')
        return HN_ERR_INVALID;
    /* why it fails goes to hn_runtime_error (said once, by the caller) */
    if (rt->trace != NULL) {
        char text[512];
        snprintf(text, sizeof(text), "a trace is running already (to %s)", rt->trace->path);
        hn_runtime_set_error_text(rt, text);
        return HN_ERR_INVALID;
    }
    if ((tr = hn_calloc(1, sizeof(*tr))) == NULL) {
        hn_runtime_set_error_text(rt, "cannot start a trace: out of memory");
        return HN_ERR_NOMEM;
    }
    tr->rt = rt;
    if ((tr->ranks = hn_calloc((size_t)rt->nlocal, sizeof(*tr->ranks))) == NULL)
        goto undo;
    if (hn_procs(rt) && rt->first != 0) { /* each process its own file: PATH for rank 0, PATH.rankR */
        size_t n = strlen(path) + 32;
        if ((tr->path = hn_malloc(n)) != NULL)
            snprintf(tr->path, n, "%s.rank%d", path, rt->first);
    } else {
        tr->path = hn_strdup(path);
    }
    if (tr->path == NULL)
        goto undo;
    for (int i = 0; i < rt->nlocal; i++) { /* a recorder per local rank, counts per peer of the world */
        hn_trace_rank *t = &tr->ranks[i];
        t->tr = tr;
        t->rank = rt->first + i;
        t->hook.lane = lane_mark;
        t->hook.ctx = t;
        hn_sb_init(&t->out);
        t->sends = hn_calloc((size_t)HN_VIA_COUNT * (size_t)rt->world, sizeof(int));
        t->recvs = hn_calloc((size_t)HN_VIA_COUNT * (size_t)rt->world, sizeof(int));
        if (t->sends == NULL || t->recvs == NULL)
            goto undo;
    }
    if ((tr->f = fopen(tr->path, "w")) == NULL) {
        char text[512];
        snprintf(text, sizeof(text), "cannot write the trace to %s: %s", tr->path, strerror(errno));
        hn_runtime_set_error_text(rt, text);
        st = HN_ERR_IO;
        goto undo;
    }
    tr->t0 = clock_ns();
    rt->trace = tr;
    return HN_OK;
undo:
    if (st == HN_ERR_NOMEM)
        hn_runtime_set_error_text(rt, "cannot start a trace: out of memory");
    trace_free(tr);
    return st;
}

/* Markers belong to their device: destroyed on its rank's thread. */
static hn_status_t timers_free_on_rank(hn_rank *r, void *arg)
{
    hn_trace_rank *t = &((hn_trace *)arg)->ranks[r->local];
    for (int i = 0; i < t->ntimers; i++)
        r->rt->dev->timer_destroy(t->timers[i]);
    t->ntimers = 0;
    return HN_OK;
}

static const char *track_name(const hn_trace_rank *t, int track, char *buf, size_t n)
{
    if (track == HN_TRACK_HOST)
        return "host: rank thread (issue)";
    if (track == HN_TRACK_CALLER)
        return "caller stream";
    if (track < HN_TRACK_LANE0) {
        snprintf(buf, n, "stream %d", track - HN_TRACK_STREAM0);
    } else {
        int i = track - HN_TRACK_LANE0, same = 0;
        for (int k = 0; k < i; k++)
            same += t->lane_index[k] == t->lane_index[i];
        snprintf(buf, n, same ? "p2p lane %d (%d)" : "p2p lane %d", t->lane_index[i], same + 1);
    }
    return buf;
}

static void put_metadata(hn_strbuf *sb, const hn_trace *tr)
{
    for (int i = 0; i < tr->rt->nlocal; i++) {
        const hn_trace_rank *t = &tr->ranks[i];
        int r = t->rank;
        hn_sb_printf(sb, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"args\":{\"name\":\"rank %d\"}},\n", r, r);
        hn_sb_printf(sb, "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%d,\"args\":{\"sort_index\":%d}},\n", r,
                     r);
        for (int track = 0; track < HN_TRACK_LANE0 + t->nlanes; track++) {
            char buf[64];
            /* the host and the caller always; pool streams when used; every lane seen */
            int named = track <= HN_TRACK_CALLER || track >= HN_TRACK_LANE0 || (t->used & (1u << track));
            if (!named)
                continue;
            hn_sb_printf(sb, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":", r,
                         track);
            hn_json_put_string(sb, track_name(t, track, buf, sizeof(buf)));
            hn_sb_printf(sb, "}},\n{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":%d,\"tid\":%d,"
                             "\"args\":{\"sort_index\":%d}},\n", r, track, track);
        }
    }
}

hn_status_t hn_runtime_trace_stop(hn_runtime *rt)
{
    hn_trace *tr;
    hn_strbuf tail;
    hn_status_t failed = HN_OK;
    long dropped = 0;
    int runs = 0, ok;
    if (rt == NULL || rt->trace == NULL)
        return HN_ERR_INVALID;
    tr = rt->trace;
    rt->trace = NULL;
    (void)hn_runtime_exec_all(rt, timers_free_on_rank, tr);
    hn_sb_init(&tail);
    put_metadata(&tail, tr);
    for (int i = 0; i < rt->nlocal; i++) {
        dropped += tr->ranks[i].dropped;
        runs = HN_MAX(runs, tr->ranks[i].run);
        if (failed == HN_OK)
            failed = tr->ranks[i].failed;
    }
    if (tail.len >= 2) /* the last event takes no comma */
        tail.len -= 2;
    hn_sb_printf(&tail, "\n],\n\"displayTimeUnit\":\"ns\",\n"
                        "\"otherData\":{\"hirnode\":\"%s\",\"backend\":\"%s\",\"ranks\":%d,\"runs\":%d,"
                        "\"dropped\":%ld,\"complete\":%s",
                 hn_version(), rt->dev->name, rt->world, runs, dropped, failed == HN_OK ? "true" : "false");
    if (failed != HN_OK)
        hn_sb_printf(&tail, ",\"stopped\":\"%s\"", hn_status_string(failed));
    hn_sb_append(&tail, "}}\n");
    ok = !tail.failed && fputs("{\"traceEvents\":[\n", tr->f) >= 0;
    for (int i = 0; i < rt->nlocal && ok; i++)
        if (tr->ranks[i].out.len > 0)
            ok = fwrite(tr->ranks[i].out.data, 1, tr->ranks[i].out.len, tr->f) == tr->ranks[i].out.len;
    ok = ok && fwrite(tail.data, 1, tail.len, tr->f) == tail.len;
    ok = (fclose(tr->f) == 0) && ok;
    if (!ok)
        HN_ERROR("cannot write the trace to %s", tr->path);
    hn_sb_free(&tail);
    trace_free(tr);
    return ok ? HN_OK : HN_ERR_IO;
}
