/* Fault injection: the parser of fault plans. Where each kind takes
 * effect is the evaluator's business (src/exec/eval.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault.h"

static const char *const kind_names[HN_FAULT_KIND_COUNT] = {
    "issue", "async", "trap", "comm", "stop", "slow", "oom", "kill", "sigstop", "skip",
};

const char *hn_fault_kind_name(hn_fault_kind k)
{
    return (unsigned)k < HN_FAULT_KIND_COUNT ? kind_names[k] : "?";
}

/* A whole decimal field in [lo, hi]. */
static int number(const char *s, size_t n, long lo, long hi, long *out)
{
    char buf[24], *end;
    long v;
    if (n == 0 || n >= sizeof(buf))
        return 0;
    memcpy(buf, s, n);
    buf[n] = '\0';
    v = strtol(buf, &end, 10);
    if (*end != '\0' || v < lo || v > hi)
        return 0;
    *out = v;
    return 1;
}

/* fault = RANK ":" LINE [":" OCCURRENCE] ":" KIND [":" MS] */
static hn_status_t parse_one(const char *s, size_t len, hn_fault *f, char *err, size_t errlen)
{
    const char *field[5];
    size_t flen[5];
    int nf = 0, k = -1, kpos;
    long v;
    for (size_t i = 0, start = 0; i <= len; i++)
        if (i == len || s[i] == ':') {
            if (nf == 5) {
                snprintf(err, errlen, "too many fields in fault '%.*s'", (int)len, s);
                return HN_ERR_INVALID;
            }
            field[nf] = s + start;
            flen[nf++] = i - start;
            start = i + 1;
        }
    /* the kind is the first field from the third that names one */
    for (kpos = 2; kpos < nf && k < 0; kpos++)
        for (int j = 0; j < HN_FAULT_KIND_COUNT; j++)
            if (strlen(kind_names[j]) == flen[kpos] && memcmp(kind_names[j], field[kpos], flen[kpos]) == 0)
                k = j;
    kpos--;
    memset(f, 0, sizeof(*f));
    f->occurrence = 1;
    f->ms = 200;
    if (nf < 3 || k < 0 || kpos > 3 || !number(field[0], flen[0], 0, 1 << 20, &v)) {
        snprintf(err, errlen, "fault '%.*s': expected RANK:LINE[:OCCURRENCE]:KIND[:MS] with KIND one of "
                 "issue, async, trap, comm, stop, slow, oom, skip, kill, sigstop", (int)len, s);
        return HN_ERR_INVALID;
    }
    f->rank = (int)v;
    if (!number(field[1], flen[1], 1, 1 << 30, &v)) {
        snprintf(err, errlen, "fault '%.*s': the line must be a positive number", (int)len, s);
        return HN_ERR_INVALID;
    }
    f->line = (int)v;
    if (kpos == 3) {
        if (!number(field[2], flen[2], 0, 1 << 30, &v)) {
            snprintf(err, errlen, "fault '%.*s': the occurrence must be a number (0: every time)", (int)len, s);
            return HN_ERR_INVALID;
        }
        f->occurrence = (int)v;
    }
    f->kind = (hn_fault_kind)k;
    if (kpos + 1 < nf) {
        if (f->kind != HN_FAULT_SLOW || kpos + 2 != nf || !number(field[kpos + 1], flen[kpos + 1], 0, 3600000, &v)) {
            snprintf(err, errlen, "fault '%.*s': only slow takes a last field (milliseconds)", (int)len, s);
            return HN_ERR_INVALID;
        }
        f->ms = (double)v;
    }
    return HN_OK;
}

hn_status_t hn_fault_parse(const char *spec, hn_fault_plan *out, char *err, size_t errlen)
{
    hn_fault_plan plan;
    size_t start = 0, len = spec != NULL ? strlen(spec) : 0;
    memset(&plan, 0, sizeof(plan));
    for (size_t i = 0; i <= len && len > 0; i++)
        if (i == len || spec[i] == ',') {
            hn_status_t st;
            if (plan.n == HN_MAX_FAULTS) {
                snprintf(err, errlen, "more than %d faults", HN_MAX_FAULTS);
                return HN_ERR_INVALID;
            }
            if ((st = parse_one(spec + start, i - start, &plan.f[plan.n], err, errlen)) != HN_OK)
                return st;
            plan.n++;
            start = i + 1;
        }
    *out = plan;
    return HN_OK;
}

void hn_fault_text(const hn_fault *f, char *buf, size_t n)
{
    int k = snprintf(buf, n, "%d:%d", f->rank, f->line);
    if (k >= 0 && (size_t)k < n && f->occurrence != 1)
        k += snprintf(buf + k, n - (size_t)k, ":%d", f->occurrence);
    if (k >= 0 && (size_t)k < n)
        k += snprintf(buf + k, n - (size_t)k, ":%s", hn_fault_kind_name(f->kind));
    if (k >= 0 && (size_t)k < n && f->kind == HN_FAULT_SLOW && f->ms != 200)
        snprintf(buf + k, n - (size_t)k, ":%.0f", f->ms);
}

hn_status_t hn_fault_plan_check_ranks(const hn_fault_plan *plan, int nranks, char *err, size_t errlen)
{
    for (int i = 0; i < plan->n; i++)
        if (plan->f[i].rank >= nranks) {
            char text[64];
            hn_fault_text(&plan->f[i], text, sizeof(text));
            if (nranks == 1)
                snprintf(err, errlen, "fault '%s': rank %d does not exist (the only rank is 0)", text,
                         plan->f[i].rank);
            else
                snprintf(err, errlen, "fault '%s': rank %d does not exist (ranks 0 to %d)", text, plan->f[i].rank,
                         nranks - 1);
            return HN_ERR_INVALID;
        }
    return HN_OK;
}

hn_status_t hn_fault_plan_check_process(const hn_fault_plan *plan, int world, int nlocal, char *err, size_t errlen)
{
    if (nlocal < world)
        return HN_OK;
    for (int i = 0; i < plan->n; i++)
        if (HN_FAULT_IS_PROCESS_KIND(plan->f[i].kind)) {
            char text[64];
            hn_fault_text(&plan->f[i], text, sizeof(text));
            snprintf(err, errlen,
                     "fault '%s': %s acts on the process of rank %d, and this process holds every rank of the "
                     "world (%d): it needs one rank per process (hirnode run --procs N)",
                     text, hn_fault_kind_name(plan->f[i].kind), plan->f[i].rank, world);
            return HN_ERR_INVALID;
        }
    return HN_OK;
}
