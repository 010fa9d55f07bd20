/* The timeline of a trace as one standalone SVG file, no dependency: a
 * row per rank and device track, compute and communication in two
 * colours (waits pale), a time axis, the overlap figure in the title;
 * each span's instruction in its tooltip. Several traces stack one above
 * the other on one time scale, each from its own start, so that a pipeline
 * and its baseline compare at a glance. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "trace.h"

#define LEFT 190   /* the row labels */
#define RIGHT 24
#define LEGEND 40  /* the legend, at the top */
#define TITLE 26   /* a block's title */
#define ROW 18
#define RANK_GAP 10
#define AXIS 36    /* a block's time axis */
#define BLOCK_GAP 18

static const char *const fill[HN_SPAN_KINDS] = {"#3b6fb6", "#e8822a", "#d9d9d9", "#999999", "#999999"};

static void put_text(hn_strbuf *sb, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '&': hn_sb_append(sb, "&amp;"); break;
        case '<': hn_sb_append(sb, "&lt;"); break;
        case '>': hn_sb_append(sb, "&gt;"); break;
        case '"': hn_sb_append(sb, "&quot;"); break;
        case '\'': hn_sb_append(sb, "&apos;"); break;
        default:
            /* XML 1.0 has no place for other control characters */
            if ((unsigned char)*s >= 0x20 || *s == '\t' || *s == '\n')
                hn_sb_appendn(sb, s, 1);
        }
    }
}

/* A time in the unit that suits the tick step, in ns. */
static void fmt_time(char *buf, size_t n, double ns, double step)
{
    if (step >= 1e6)
        snprintf(buf, n, "%g ms", ns / 1e6);
    else if (step >= 1e3)
        snprintf(buf, n, "%g us", ns / 1e3);
    else
        snprintf(buf, n, "%g ns", ns);
}

/* Ticks every 1, 2 or 5 x 10^k ns, about eight of them. */
static double tick_step(double range)
{
    double raw = range / 8, mag = pow(10, floor(log10(raw > 0 ? raw : 1)));
    return raw <= mag ? mag : raw <= 2 * mag ? 2 * mag : raw <= 5 * mag ? 5 * mag : 10 * mag;
}

static int in_run(const hn_span *s, int run) { return run < 0 || s->run == run; }

/* What a block needs before drawing: its time range and row count. */
typedef struct block {
    const hn_trace_data *t;
    int run;
    int64_t t0, t1;
    int rows, ranks;
    hn_overlap ov;
} block;

static hn_status_t measure(block *b)
{
    const hn_trace_data *t = b->t;
    int last_rank = -1, last_track = -1;
    b->t0 = INT64_MAX;
    b->t1 = INT64_MIN;
    for (int i = 0; i < t->nspans; i++) { /* sorted by (rank, track, begin) */
        const hn_span *s = &t->spans[i];
        if (!in_run(s, b->run))
            continue;
        if (s->kind == HN_SPAN_RUN || hn_span_on_device(s->kind)) {
            b->t0 = HN_MIN(b->t0, s->begin);
            b->t1 = HN_MAX(b->t1, s->end);
        }
        if (hn_span_on_device(s->kind) && (s->rank != last_rank || s->track != last_track)) {
            b->ranks += s->rank != last_rank;
            b->rows++;
            last_rank = s->rank;
            last_track = s->track;
        }
    }
    if (b->t0 > b->t1)
        b->t0 = b->t1 = 0;
    return hn_trace_overlap(t->spans, t->nspans, -1, b->run, &b->ov);
}

static int block_height(const block *b)
{
    return TITLE + b->rows * ROW + (b->ranks > 0 ? b->ranks - 1 : 0) * RANK_GAP + AXIS;
}

static void draw_title(hn_strbuf *out, const block *b, int y)
{
    const hn_trace_data *t = b->t;
    hn_sb_printf(out, "<text x=\"10\" y=\"%d\" font-size=\"13\" font-weight=\"bold\">", y + 17);
    put_text(out, t->program != NULL ? t->program : "trace");
    hn_sb_printf(out, " \xc2\xb7 %d rank%s, %s backend", t->nranks, t->nranks == 1 ? "" : "s",
                 t->backend != NULL ? t->backend : "?");
    if (b->run >= 0)
        hn_sb_printf(out, ", run %d", b->run);
    if (b->ov.comm > 0)
        hn_sb_printf(out, " \xe2\x80\x94 overlap %.1f%%: of %.1f us of communication, %.1f us hidden under compute",
                     100.0 * hn_overlap_figure(&b->ov), (double)b->ov.comm / 1e3, (double)b->ov.hidden / 1e3);
    else
        hn_sb_append(out, " \xe2\x80\x94 overlap: no communication");
    hn_sb_append(out, "</text>\n");
}

/* The rows of one block, in one pass over its spans; returns the y below. */
static int draw_rows(hn_strbuf *out, const block *b, int y, int width, double scale)
{
    const hn_trace_data *t = b->t;
    int last_rank = -1, last_track = -1, r = -1;
    y -= ROW;
    for (int i = 0; i < t->nspans; i++) {
        const hn_span *s = &t->spans[i];
        double x, w;
        if (!hn_span_on_device(s->kind) || !in_run(s, b->run))
            continue;
        if (s->rank != last_rank || s->track != last_track) {
            r++;
            y += ROW;
            if (s->rank != last_rank) {
                if (last_rank >= 0)
                    y += RANK_GAP;
                hn_sb_printf(out, "<line x1=\"10\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"#bbbbbb\"/>\n",
                             width - RIGHT, y - RANK_GAP / 2, y - RANK_GAP / 2);
            }
            last_rank = s->rank;
            last_track = s->track;
            hn_sb_printf(out, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\"/>\n", LEFT, y,
                         width - LEFT - RIGHT, ROW, r % 2 ? "#f4f4f4" : "#fbfbfb");
            hn_sb_printf(out, "<text x=\"10\" y=\"%d\">rank %d \xc2\xb7 ", y + ROW - 5, s->rank);
            put_text(out, hn_trace_track_name(t, s->rank, s->track));
            hn_sb_append(out, "</text>\n");
        }
        x = LEFT + (double)(s->begin - b->t0) * scale;
        w = (double)(s->end - s->begin) * scale;
        hn_sb_printf(out, "<rect class=\"%s\" x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"%s\"><title>",
                     s->kind == HN_SPAN_COMPUTE ? "compute" : s->kind == HN_SPAN_COMM ? "comm" : "wait", x,
                     y + (s->kind == HN_SPAN_WAIT ? 6 : 2), w < 0.5 ? 0.5 : w, s->kind == HN_SPAN_WAIT ? 6 : ROW - 4,
                     fill[s->kind]);
        put_text(out, s->text);
        hn_sb_printf(out, " (%.3f us, run %d) ", (double)(s->end - s->begin) / 1e3, s->run);
        put_text(out, s->src);
        hn_sb_append(out, "</title></rect>\n");
    }
    return y + ROW;
}

/* A time axis from 0 to `range` ns at the given scale. */
static void draw_axis(hn_strbuf *out, int y, int width, double range, double scale)
{
    double step = tick_step(range);
    char a[48];
    hn_sb_printf(out, "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", LEFT, width - RIGHT, y + 6,
                 y + 6);
    for (double v = 0; v <= range + 1e-9; v += step) {
        double x = LEFT + v * scale;
        fmt_time(a, sizeof(a), v, step);
        hn_sb_printf(out, "<line x1=\"%.2f\" x2=\"%.2f\" y1=\"%d\" y2=\"%d\" stroke=\"black\"/>"
                          "<text x=\"%.2f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n",
                     x, x, y + 6, y + 11, x, y + 24, a);
    }
}

hn_status_t hn_trace_svg_stack(const hn_trace_data *const *t, const int *runs, int n, int width, hn_strbuf *out)
{
    block blocks[HN_TRACE_SVG_MAX];
    int64_t range = 1;
    int height = LEGEND, y;
    double scale;
    if (n < 1 || n > HN_TRACE_SVG_MAX)
        return HN_ERR_INVALID;
    if (width < LEFT + RIGHT + 100)
        width = LEFT + RIGHT + 100;
    for (int k = 0; k < n; k++) {
        hn_status_t st;
        memset(&blocks[k], 0, sizeof(blocks[k]));
        blocks[k].t = t[k];
        blocks[k].run = runs[k];
        if ((st = measure(&blocks[k])) != HN_OK)
            return st;
        range = HN_MAX(range, blocks[k].t1 - blocks[k].t0);
        height += block_height(&blocks[k]) + (k > 0 ? BLOCK_GAP : 0);
    }
    /* one scale for every block: the longest fills the width */
    scale = (double)(width - LEFT - RIGHT) / (double)range;
    hn_sb_printf(out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
                      "font-family=\"sans-serif\" font-size=\"11\">\n"
                      "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"white\"/>\n",
                 width, height, width, height, width, height);
    {
        static const char *const label[3] = {"compute", "communication", "wait"};
        for (int k = 0; k < 3; k++)
            hn_sb_printf(out, "<rect x=\"%d\" y=\"12\" width=\"12\" height=\"12\" fill=\"%s\"/>"
                              "<text x=\"%d\" y=\"22\">%s</text>\n", 10 + k * 130, fill[k], 26 + k * 130, label[k]);
        hn_sb_printf(out, "<text x=\"%d\" y=\"22\" text-anchor=\"end\" fill=\"#555555\">time from the first span "
                          "of each trace</text>\n", width - RIGHT);
    }
    y = LEGEND;
    for (int k = 0; k < n; k++) {
        if (k > 0)
            y += BLOCK_GAP;
        draw_title(out, &blocks[k], y);
        y = draw_rows(out, &blocks[k], y + TITLE, width, scale);
        draw_axis(out, y, width, (double)range, scale);
        y += AXIS;
    }
    hn_sb_append(out, "</svg>\n");
    return out->failed ? HN_ERR_NOMEM : HN_OK;
}

hn_status_t hn_trace_svg(const hn_trace_data *t, int run, int width, hn_strbuf *out)
{
    return hn_trace_svg_stack(&t, &run, 1, width, out);
}
