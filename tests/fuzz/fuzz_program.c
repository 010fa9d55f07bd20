/* Fuzz target: program text through parse, static verify, print round trip,
 * parameter resolution and the dry run of every rank (make fuzz). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/parse.h"
#include "fuzz.h"
#include "hirnode/runtime.h"
#include "sched/lower.h"
#include "ir/params.h"
#include "ranks/runtime_int.h"
#include "exec/verify_run.h"

/* Parameter values beyond the small ones a byte gives directly. */
static const int64_t EXTREMES[] = {
    INT64_MAX,           INT64_MIN,          (int64_t)1 << 62,    -((int64_t)1 << 62),
    (int64_t)1 << 32,    -((int64_t)1 << 32), (int64_t)1 << 31,   INT32_MAX,
    INT32_MIN,           (int64_t)1 << 40,   (int64_t)1 << 20,    1000000007,
    INT64_MAX / 2 + 1,   65536,              4096,                255,
};

typedef struct fuzz_header {
    int ranks, nstreams;
    long fail_at; /* 0: no allocation fails */
    int noverrides;
    int which[2];
    int64_t value[2];
} fuzz_header;

static void read_header(const uint8_t *h, fuzz_header *out)
{
    memset(out, 0, sizeof(*out));
    out->ranks = 1 + h[0] % 8;
    out->nstreams = 1 + h[1] % HN_MAX_STREAMS;
    out->fail_at = (long)h[2] | (long)h[3] << 8;
    for (int k = 0; k < 2; k++) {
        uint8_t which = h[4 + 2 * k], v = h[5 + 2 * k];
        if (which & 0x80)
            continue;
        out->which[out->noverrides] = which;
        out->value[out->noverrides] = v < 0xc0 ? (int64_t)v - 0x20
                                               : EXTREMES[(v - 0xc0) % HN_ARRAY_LEN(EXTREMES)];
        out->noverrides++;
    }
}

static void broken(hn_fuzz_outcome *out, const char *what, const char *diag)
{
    if (out->broken[0] == '\0')
        snprintf(out->broken, sizeof(out->broken), "%s%s%.300s", what, diag ? ": " : "",
                 diag ? diag : "");
}

/* A rejection says where and why: `file:line:col: error: ...`. With an
 * allocation failing on purpose the text may be missing or cut short (the
 * message itself could not grow: text NULL, or the buffer's `failed`). */
static int located(const char *diag, int cut, long fail_at)
{
    if (diag == NULL || *diag == '\0' || cut)
        return fail_at != 0;
    return strstr(diag, "error: ") != NULL;
}

/* parse(print(p)) is p, and printing it again gives the same text. */
static void round_trip(const hn_program *p, hn_fuzz_outcome *out)
{
    char *printed = hn_program_print(p), *again = NULL, *diag = NULL;
    hn_program *q = NULL;
    if (printed == NULL) {
        broken(out, "print failed", NULL);
        return;
    }
    if (hn_program_parse(printed, strlen(printed), "printed.hir", &q, &diag) != HN_OK)
        broken(out, "the printed program does not parse", diag);
    else if (!hn_prog_equal(p, q))
        broken(out, "parse(print(p)) differs from p", printed);
    else if ((again = hn_program_print(q)) == NULL || strcmp(again, printed) != 0)
        broken(out, "printing the reparsed program gives other text", printed);
    hn_string_free(again);
    hn_string_free(diag);
    hn_string_free(printed);
    hn_program_destroy(q);
}

/* Whether a rejection keeps its promises: an expected status (out of
 * memory only when an allocation fails on purpose) and a located error. */
static int rejected_well(hn_status_t st, hn_status_t want1, hn_status_t want2, const char *diag,
                         int cut, long fail_at)
{
    if (st == HN_ERR_NOMEM)
        return fail_at != 0;
    return (st == want1 || st == want2) && located(diag, cut, fail_at);
}

/* Resolves the parameters with the header's overrides, then dry-runs
 * every rank and matches their communications. */
static void dry_run(const hn_program *p, const fuzz_header *h, hn_fuzz_outcome *out)
{
    const char *names[2];
    int64_t *params = calloc((size_t)p->nparams + 1, sizeof(int64_t));
    hn_strbuf diag;
    hn_status_t st;
    int n = p->nparams > 0 ? h->noverrides : 0;
    if (params == NULL)
        return;
    for (int k = 0; k < n; k++)
        names[k] = p->names[p->params[h->which[k] % p->nparams].var];
    hn_sb_init(&diag);
    st = hn_params_resolve(p, h->ranks, h->nstreams, n, names, h->value, params, &diag);
    if (st != HN_OK &&
        !rejected_well(st, HN_ERR_INVALID, HN_ERR_VERIFY, diag.data, diag.failed, h->fail_at))
        broken(out, "parameters rejected without a located error", diag.data);
    if (st == HN_OK) {
        out->stage = HN_FUZZ_RESOLVED;
        st = hn_verify_run(p, h->ranks, h->nstreams, params, &diag, NULL);
        if (st == HN_OK)
            out->stage = HN_FUZZ_VERIFIED;
        else if (!rejected_well(st, HN_ERR_VERIFY, HN_ERR_VERIFY, diag.data, diag.failed,
                                h->fail_at))
            broken(out, "dry run rejected the program without a located error", diag.data);
    }
    /* pipelined statements and stream-parallel loops: the lowering, and
     * the lowered program's own dry run (what a run would execute) */
    if (st == HN_OK && p->has_sched) {
        hn_program *lp = NULL;
        st = hn_sched_lower(p, h->ranks, 1, h->nstreams, params, NULL, &lp, &diag, NULL);
        if (st == HN_OK)
            st = hn_verify_run(lp, h->ranks, h->nstreams, params, &diag, NULL);
        if (st != HN_OK && !rejected_well(st, HN_ERR_VERIFY, HN_ERR_UNSUPPORTED, diag.data, diag.failed,
                                          h->fail_at) &&
            !rejected_well(st, HN_ERR_INVALID, HN_ERR_VERIFY, diag.data, diag.failed, h->fail_at))
            broken(out, "lowering rejected the program without a located error", diag.data);
        hn_prog_free(lp);
    }
    hn_sb_free(&diag);
    free(params);
}

void hn_fuzz_program(const uint8_t *data, size_t size, hn_fuzz_outcome *out)
{
    static const uint8_t DEFAULT_HEADER[HN_FUZZ_HEADER] = {3, 2, 0, 0, 0xff, 0, 0xff, 0};
    const uint8_t *header = size >= HN_FUZZ_HEADER ? data : DEFAULT_HEADER;
    size_t skip = size >= HN_FUZZ_HEADER ? HN_FUZZ_HEADER : 0;
    const char *text = (const char *)data + skip;
    size_t len = size - skip;
    hn_log_level_t level = hn_log_level();
    fuzz_header h;
    hn_program *p = NULL;
    char *diag = NULL;
    hn_status_t st;
    memset(out, 0, sizeof(*out));
    read_header(header, &h);
    out->ranks = h.ranks;
    out->nstreams = h.nstreams;
    hn_log_set_level(HN_LOG_OFF); /* rejections are expected; their text is checked */
    hn_alloc_fail_after(h.fail_at);
    st = hn_program_parse(text, len, "fuzz.hir", &p, &diag);
    if (st != HN_OK && !rejected_well(st, HN_ERR_PARSE, HN_ERR_VERIFY, diag, 0, h.fail_at))
        broken(out, "parse rejected the program without a located error", diag);
    if (st == HN_OK) {
        out->stage = HN_FUZZ_PARSED;
        /* the round trip would fail for the injected failure, not for p */
        if (h.fail_at == 0)
            round_trip(p, out);
        dry_run(p, &h, out);
    }
    hn_alloc_fail_after(0);
    hn_log_set_level(level);
    hn_string_free(diag);
    hn_program_destroy(p);
}

#ifdef HN_FUZZ_ENTRY
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    hn_fuzz_outcome out;
    hn_fuzz_program(data, size, &out);
    if (out.broken[0] != '\0') {
        fprintf(stderr, "fuzz: %d ranks, %d streams: %s\n", out.ranks, out.nstreams, out.broken);
        abort();
    }
    return 0;
}
#endif
