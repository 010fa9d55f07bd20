/* `hirnode trace summary|svg FILE`: what a trace written by --trace says —
 * busy time per rank and track, the overlap figure, the critical path —
 * and its timeline as an SVG picture. Exit codes: 0 ok, 1 the picture
 * could not be written, 2 bad usage or a file that is no hirnode trace. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/runtime/tools.h"

#include "options.h"

int hn_cli_trace(int argc, char **argv);

static const char trace_usage[] =
    "usage: hirnode trace summary FILE [--run N|last|all]\n"
    "       hirnode trace svg FILE [FILE...] -o OUT.svg [--run N|last|all] [--width PX]\n"
    "hirnode trace summary|svg --help lists the options.\n";

static const char trace_more[] =
    "FILE is a trace written by `hirnode run --trace FILE` (or bench, or\n"
    "hn_runtime_trace_start). svg stacks several traces one above the other\n"
    "on one time scale.\n";

enum { RUN_ALL = -1 };

static const char *const kind_names[HN_SPAN_KINDS] = {"compute", "communication", "waiting", "issue", "run"};

/* The span of each selected run: from its first run span's start to its
 * last's end over the ranks, summed. */
static int64_t runs_length(const hn_trace_data *t, int run)
{
    int64_t total = 0;
    for (int k = 0; k < t->nruns; k++) {
        int64_t b = INT64_MAX, e = INT64_MIN;
        if (run >= 0 && k != run)
            continue;
        for (int i = 0; i < t->nspans; i++)
            if (t->spans[i].run == k && (t->spans[i].kind == HN_SPAN_RUN || hn_span_on_device(t->spans[i].kind))) {
                b = HN_MIN(b, t->spans[i].begin);
                e = HN_MAX(e, t->spans[i].end);
            }
        if (e > b)
            total += e - b;
    }
    return total;
}

static void print_busy(const hn_trace_data *t, int run)
{
    hn_track_busy *b = NULL;
    int n = 0;
    double len = (double)runs_length(t, run);
    if (hn_trace_busy(t->spans, t->nspans, run, &b, &n) != HN_OK) {
        fprintf(stderr, "trace: out of memory\n");
        return;
    }
    printf("\nbusy time per rank and track (us; share of the run%s, %.1f us)\n", run == RUN_ALL ? "s" : "",
           len / 1e3);
    printf("%5s  %-22s %11s %7s %11s %11s %11s %6s\n", "rank", "track", "busy", "share", "compute", "comm", "wait",
           "spans");
    for (int i = 0; i < n; i++)
        printf("%5d  %-22s %11.1f %6.1f%% %11.1f %11.1f %11.1f %6d\n", b[i].rank,
               hn_trace_track_name(t, b[i].rank, b[i].track), (double)b[i].busy / 1e3,
               len > 0 ? 100.0 * (double)b[i].busy / len : 0.0, (double)b[i].compute / 1e3, (double)b[i].comm / 1e3,
               (double)b[i].wait / 1e3, b[i].nspans);
    hn_free(b);
}

static void print_overlap(const hn_trace_data *t, int run)
{
    hn_overlap all;
    if (hn_trace_overlap(t->spans, t->nspans, -1, run, &all) != HN_OK)
        return;
    if (all.comm == 0) {
        printf("\noverlap: no communication\n");
        return;
    }
    printf("\noverlap: %.1f%% of the communications' time is hidden under compute on another track "
           "(%.1f of %.1f us)\n", 100.0 * hn_overlap_figure(&all), (double)all.hidden / 1e3, (double)all.comm / 1e3);
    for (int r = 0; r < t->nranks; r++) {
        hn_overlap o;
        if (hn_trace_overlap(t->spans, t->nspans, r, run, &o) == HN_OK && o.comm > 0)
            printf("  rank %d: %5.1f%% (%.1f of %.1f us)\n", r, 100.0 * hn_overlap_figure(&o), (double)o.hidden / 1e3,
                   (double)o.comm / 1e3);
    }
}

typedef struct on_path {
    const hn_span *s; /* one span of the instruction */
    int64_t ns;
} on_path;

static int by_time_desc(const void *a, const void *b)
{
    const on_path *x = a, *y = b;
    return x->ns > y->ns ? -1 : x->ns < y->ns;
}

static void print_path(const hn_trace_data *t, int run, int detail)
{
    hn_path_seg *seg = NULL;
    int n = 0, nins = 0;
    int64_t kinds[HN_SPAN_KINDS] = {0}, idle = 0, total;
    on_path *ins;
    if (hn_trace_critical_path(t->spans, t->nspans, t->keys, run, &seg, &n) != HN_OK || n == 0) {
        printf("critical path of run %d: no device spans\n", run);
        hn_free(seg);
        return;
    }
    ins = calloc((size_t)n, sizeof(*ins));
    total = seg[n - 1].to - seg[0].from;
    for (int i = 0; i < n; i++) {
        int64_t d = seg[i].to - seg[i].from;
        const hn_span *s;
        int k;
        if (seg[i].span < 0) {
            idle += d;
            continue;
        }
        s = &t->spans[seg[i].span];
        kinds[s->kind] += d;
        for (k = 0; ins != NULL && k < nins; k++)
            if (ins[k].s->instr == s->instr && ins[k].s->src == s->src && ins[k].s->kind == s->kind)
                break;
        if (ins != NULL && k == nins)
            ins[nins++].s = s;
        if (ins != NULL)
            ins[k].ns += d;
    }
    printf("critical path of run %d: %.1f us: compute %.1f%%, communication %.1f%%, waiting %.1f%%, idle %.1f%%\n",
           run, (double)total / 1e3, 100.0 * (double)kinds[HN_SPAN_COMPUTE] / (double)total,
           100.0 * (double)kinds[HN_SPAN_COMM] / (double)total, 100.0 * (double)kinds[HN_SPAN_WAIT] / (double)total,
           100.0 * (double)idle / (double)total);
    if (detail && ins != NULL) {
        const hn_span *first = seg[0].span >= 0 ? &t->spans[seg[0].span] : NULL;
        const hn_span *last = &t->spans[seg[n - 1].span];
        qsort(ins, (size_t)nins, sizeof(*ins), by_time_desc);
        printf("  time on it by instruction:\n");
        for (int k = 0; k < nins && k < 12; k++)
            printf("  %6.1f%% %11.1f us  %-13s %s  (%s)\n", 100.0 * (double)ins[k].ns / (double)total,
                   (double)ins[k].ns / 1e3, kind_names[ins[k].s->kind], ins[k].s->text, ins[k].s->src);
        if (first != NULL)
            printf("  from rank %d %s (%s) to rank %d %s (%s), %d segments\n", first->rank,
                   hn_trace_track_name(t, first->rank, first->track), first->text, last->rank,
                   hn_trace_track_name(t, last->rank, last->track), last->text, n);
    }
    free(ins);
    hn_free(seg);
}

static int summary(const char *file, const hn_trace_data *t, int run)
{
    printf("trace %s: %s, %d rank%s on the %s backend, %d run%s\n", file, t->program != NULL ? t->program : "?",
           t->nranks, t->nranks == 1 ? "" : "s", t->backend, t->nruns, t->nruns == 1 ? "" : "s");
    if (t->nruns == 0) {
        printf("no runs\n");
        return 0;
    }
    if (run == RUN_ALL)
        printf("all runs (--run N for one)\n");
    else
        printf("run %d%s\n", run, run == t->nruns - 1 ? " (the last; --run N or --run all for others)" : "");
    print_busy(t, run);
    print_overlap(t, run);
    printf("\n");
    if (run == RUN_ALL)
        for (int k = 0; k < t->nruns; k++)
            print_path(t, k, 0);
    else
        print_path(t, run, 1);
    return 0;
}

static int svg(const hn_trace_data *const *t, const int *runs, int n, int width, const char *out)
{
    hn_strbuf sb;
    FILE *f;
    int ok;
    hn_sb_init(&sb);
    if (hn_trace_svg_stack(t, runs, n, width, &sb) != HN_OK) {
        fprintf(stderr, "trace: out of memory\n");
        hn_sb_free(&sb);
        return 1;
    }
    f = fopen(out, "w");
    ok = f != NULL && fwrite(sb.data, 1, sb.len, f) == sb.len;
    ok = (f != NULL && fclose(f) == 0) && ok;
    if (!ok)
        fprintf(stderr, "trace: cannot write %s\n", out);
    hn_sb_free(&sb);
    return ok ? 0 : 1;
}

/* The run that --run names in t: RUN_ALL, or an index; -3 if none. */
static int pick_run(const hn_trace_data *t, const char *runs)
{
    int64_t v;
    if (strcmp(runs, "all") == 0)
        return RUN_ALL;
    if (strcmp(runs, "last") == 0)
        return t->nruns - 1;
    return hn_parse_int64("--run", runs, 0, t->nruns - 1, &v, NULL) == HN_OK ? (int)v : -3;
}

int hn_cli_trace(int argc, char **argv)
{
    const char *cmd = argc > 2 ? argv[2] : "", *files[HN_TRACE_SVG_MAX], *out = NULL, *runs = "last";
    int width = 1400, nfiles = 0, rc = 0, loaded = 0, run[HN_TRACE_SVG_MAX];
    hn_trace_data t[HN_TRACE_SVG_MAX];
    const hn_trace_data *tp[HN_TRACE_SVG_MAX];
    int is_svg = strcmp(cmd, "svg") == 0;
    const hn_option table[] = {
        HN_TEXT("--run", "N|last|all", &runs, "the run to show (default: the last one)"),
        HN_TEXT("-o", "OUT.svg", &out, "the picture to write (needed)"),
        HN_INT("--width", "PX", &width, 200, 100000, "the picture's width (default 1400)"),
    };
    hn_command c = {is_svg ? "hirnode trace svg" : "hirnode trace summary", is_svg ? " FILE [FILE...]" : " FILE",
                    table, is_svg ? 3 : 1, files, is_svg ? HN_TRACE_SVG_MAX : 1, &nfiles, trace_more};
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        fputs(trace_usage, stdout);
        return HN_EXIT_OK;
    }
    if (strcmp(cmd, "summary") != 0 && !is_svg) {
        fprintf(stderr, "hirnode trace: %s\n%s", *cmd ? "unknown command" : "which command?", trace_usage);
        return HN_EXIT_USAGE;
    }
    if ((rc = hn_cli_parse(&c, argc, argv, 3)) >= 0)
        return rc;
    rc = 0;
    if (nfiles == 0)
        return hn_cli_usage_error(&c, "which trace? (%s%s)", c.name, c.synopsis);
    if (is_svg && out == NULL)
        return hn_cli_usage_error(&c, "where to? (-o OUT.svg)");
    for (int k = 0; k < nfiles && rc == 0; k++) {
        hn_strbuf err;
        hn_sb_init(&err);
        if (hn_trace_load_file(files[k], &t[k], &err) != HN_OK) {
            fprintf(stderr, "%s: error: %s\n", files[k], err.data != NULL ? err.data : "cannot read the trace");
            rc = 2;
        } else {
            loaded++;
            tp[k] = &t[k];
            if ((run[k] = pick_run(&t[k], runs)) == -3) {
                fprintf(stderr, "trace: --run %s: %s has runs 0 to %d\n", runs, files[k], t[k].nruns - 1);
                rc = 2;
            }
        }
        hn_sb_free(&err);
    }
    if (rc == 0)
        rc = is_svg ? svg(tp, run, nfiles, width, out) : summary(files[0], &t[0], run[0]);
    if (rc == 0 && out != NULL)
        printf("%s\n", out);
    for (int k = 0; k < loaded; k++)
        hn_trace_data_free(&t[k]);
    return rc;
}
