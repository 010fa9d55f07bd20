/* Injected faults (HIRNODE_FAULT, docs/RELIABILITY.md): the evaluator sets
 * them off before it issues an instruction of a faulted line on that rank
 * (a group's members too); each kind acts as the failure it stands for. */
#include <signal.h>
#include <stdio.h>
#include <time.h>

#include "eval.h"
#include "fault_inject.h"
#include "../ranks/rank.h"

hn_status_t hn_runtime_set_faults(hn_runtime *rt, const char *spec, hn_strbuf *err)
{
    char msg[256];
    hn_fault_plan plan;
    if (hn_fault_parse(spec, &plan, msg, sizeof(msg)) != HN_OK ||
        hn_fault_plan_check_ranks(&plan, rt->world, msg, sizeof(msg)) != HN_OK ||
        hn_fault_plan_check_process(&plan, rt->world, rt->nlocal, msg, sizeof(msg)) != HN_OK) {
        hn_sb_printf(err, "hirnode: error: %s\n", msg);
        return HN_ERR_INVALID;
    }
    rt->faults = plan;
    return HN_OK;
}

/* What the lines of a body hold: bits of each line's kinds of instruction. */
enum { LINE_ANY = 1, LINE_COMM = 2, LINE_ALLOC = 4 };

static void mark_lines(const hn_block *b, unsigned char *marks, int max)
{
    for (int i = 0; i < b->n; i++) {
        const hn_instr *in = b->items[i];
        int flags = hn_op_table[in->op].flags;
        if (in->line >= 1 && in->line <= max) {
            marks[in->line] |= LINE_ANY;
            /* a scheduled statement's lowered code communicates and allocates */
            if (flags & (HN_OPF_COMM | HN_OPF_PIPE))
                marks[in->line] |= LINE_COMM;
            if (in->op == HN_OP_ALLOC || (flags & HN_OPF_PIPE) || in->on_streams)
                marks[in->line] |= LINE_ALLOC;
        }
        mark_lines(&in->body, marks, max);
        mark_lines(&in->orelse, marks, max);
    }
}

/* The lines marked `need` into sb (when not NULL) as "4, 6-9"; how many
 * runs of lines there are. */
static int lines_text(const unsigned char *marks, int max, int need, hn_strbuf *sb)
{
    int run = 0, n = 0;
    for (int l = 1; l <= max + 1; l++) {
        int ok = l <= max && (marks[l] & need) != 0;
        if (ok && run++ == 0 && sb != NULL)
            hn_sb_printf(sb, "%s%d", n > 0 ? ", " : "", l);
        n += ok && run == 1;
        if (!ok && run > 1 && sb != NULL)
            hn_sb_printf(sb, "%s%d", run > 2 ? "-" : ", ", l - 1);
        if (!ok)
            run = 0;
    }
    return n;
}

hn_status_t hn_faults_check_program(const hn_runtime *rt, const hn_program *p, hn_strbuf *err)
{
    static const char *const holds[] = {"", "instruction of the body", "communication", "", "alloc"};
    static const char *const where[] = {"", "the body's instructions are on lines",
                                        "the body communicates on lines", "", "the body allocates on lines"};
    unsigned char *marks;
    char why[256];
    int max = 0;
    hn_status_t st = HN_OK;
    if (rt->faults.n == 0)
        return HN_OK;
    /* a plan from HIRNODE_FAULT meets the world's processes first here */
    if (hn_fault_plan_check_process(&rt->faults, rt->world, rt->nlocal, why, sizeof(why)) != HN_OK) {
        hn_sb_printf(err, "%s: error: %s\n", p->filename, why);
        return HN_ERR_INVALID;
    }
    for (int i = 0; i < p->ninstrs; i++)
        max = HN_MAX(max, p->instrs[i]->line);
    if ((marks = hn_calloc((size_t)max + 2, 1)) == NULL)
        return HN_ERR_NOMEM;
    mark_lines(&p->body, marks, max);
    for (int i = 0; i < rt->faults.n && st == HN_OK; i++) {
        const hn_fault *f = &rt->faults.f[i];
        int need = f->kind == HN_FAULT_COMM || f->kind == HN_FAULT_SKIP ? LINE_COMM : f->kind == HN_FAULT_OOM ? LINE_ALLOC : LINE_ANY;
        char text[64];
        if (f->line <= max && (marks[f->line] & need))
            continue;
        hn_fault_text(f, text, sizeof(text));
        hn_sb_printf(err, "%s: error: fault '%s': line %d holds no %s (", p->filename, text, f->line, holds[need]);
        if (lines_text(marks, max, need, NULL) == 0)
            hn_sb_append(err, need == LINE_ALLOC ? "the body allocates nothing" : "the body has none");
        else
            hn_sb_printf(err, "%s ", where[need]);
        lines_text(marks, max, need, err);
        hn_sb_append(err, ")\n");
        st = HN_ERR_INVALID;
    }
    hn_free(marks);
    return st;
}

static void sleep_ms(double ms)
{
    struct timespec ts;
    ts.tv_sec = (time_t)(ms / 1e3);
    ts.tv_nsec = (long)((ms - (double)ts.tv_sec * 1e3) * 1e6);
    nanosleep(&ts, NULL);
}

/* One fault of the plan, matched: HN_OK to issue the instruction, else an
 * error with its message in msg (empty: held until the run's abort). */
static hn_status_t set_off(hn_exec *x, const hn_instr *in, const hn_fault *f, char *msg, size_t cap)
{
    hn_runtime *rt = x->rt;
    hn_dstream *s;
    hn_origin o;
    hn_status_t st;
    if (((f->kind == HN_FAULT_COMM || f->kind == HN_FAULT_SKIP) && !(hn_op_table[in->op].flags & HN_OPF_COMM)) ||
        (f->kind == HN_FAULT_OOM && in->op != HN_OP_ALLOC))
        return HN_OK; /* communications only; allocations only */
    if (f->kind == HN_FAULT_SKIP && x->graph != NULL)
        return HN_OK; /* captured whole: the rank skips its replays instead (hn_faults_skip_replay) */
    __atomic_add_fetch(&rt->faults_fired, 1, __ATOMIC_RELAXED);
    switch (f->kind) {
    case HN_FAULT_ISSUE:
        snprintf(msg, cap, "the device refused the instruction (injected fault)");
        return HN_ERR_DEVICE;
    case HN_FAULT_ASYNC:
    case HN_FAULT_TRAP:
        o = (hn_origin){&rt->sink, x->rank, in->id, x->trace_hook, x->graph};
        if (x->cur == HN_CALLER_STREAM)
            s = x->r->active;
        else if ((st = hn_rank_stream(x->r, x->cur, &s)) != HN_OK) {
            snprintf(msg, cap, "stream %d was not made before the run", x->cur);
            return st;
        }
        if ((st = rt->dev->inject_fault(s, f->kind == HN_FAULT_TRAP, &o)) != HN_OK)
            snprintf(msg, cap, "cannot issue an injected fault: %s", hn_status_string(st));
        return st;
    case HN_FAULT_COMM:
        /* like an asynchronous NCCL error: every communicator is aborted
         * at the end of the run and the teams are made anew */
        __atomic_store_n(&rt->teams_dead, 1, __ATOMIC_RELEASE);
        snprintf(msg, cap, "its communicator failed (injected fault); the communicators are aborted and made "
                 "anew");
        return HN_ERR_DEVICE;
    case HN_FAULT_STOP:
        /* as if the rank's thread hung: its peers time out, or the
         * watchdog names it; then it is released */
        while (!__atomic_load_n(rt->abort_flag, __ATOMIC_ACQUIRE))
            sleep_ms(1);
        return HN_ERR_ABORTED;
    case HN_FAULT_SKIP:
        /* as if the rank lost its part of a collective: the peers (on the
         * latency path, the rings, NCCL) wait for it until the deadline
         * names it */
        x->fault_skip = 1;
        return HN_OK;
    case HN_FAULT_SLOW:
        sleep_ms(f->ms);
        return HN_OK;
    case HN_FAULT_KILL:
        /* as if the process crashed: its peers in other processes must
         * notice (hn_fault_plan_check_process refuses it in one process) */
        raise(SIGKILL);
        return HN_ERR_ABORTED; /* not reached */
    case HN_FAULT_SIGSTOP:
        /* as if the machine froze the process; whoever continues it
         * (SIGCONT) finds the run as its peers left it */
        raise(SIGSTOP);
        return HN_OK;
    case HN_FAULT_OOM: {
        size_t free_b = 0, total_b = 0;
        rt->dev->mem_info(rt->dev_ctx, x->rank, &free_b, &total_b);
        snprintf(msg, cap, "cannot allocate '%s' (injected fault): device %d has %zu of %zu bytes free",
                 x->p->names[in->dst], x->rank, free_b, total_b);
        return HN_ERR_NOMEM;
    }
    default:
        return HN_OK;
    }
}

hn_status_t hn_faults_set_off(hn_exec *x, const hn_instr *in, char *msg, size_t cap)
{
    const hn_fault_plan *plan = &x->rt->faults;
    msg[0] = '\0';
    for (int i = 0; i < plan->n; i++) {
        const hn_fault *f = &plan->f[i];
        hn_status_t st;
        if (f->rank != x->rank || f->line != in->line)
            continue;
        x->fault_seen[i]++;
        if (f->occurrence != 0 && x->fault_seen[i] != f->occurrence)
            continue;
        if ((st = set_off(x, in, f, msg, cap)) != HN_OK)
            return st;
    }
    return HN_OK;
}

int hn_faults_skip_replay(hn_runtime *rt, int rank)
{
    for (int i = 0; i < rt->faults.n; i++)
        if (rt->faults.f[i].kind == HN_FAULT_SKIP && rt->faults.f[i].rank == rank) {
            __atomic_add_fetch(&rt->faults_fired, 1, __ATOMIC_RELAXED);
            return 1;
        }
    return 0;
}
