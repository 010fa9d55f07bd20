/* The error slot of a runtime: the first failure of a run, named by rank,
 * instruction and source line, and the health of its devices. */
#include <stdio.h>
#include <string.h>

#include "../ir/parse.h"
#include "../world/net.h"
#include "../world/rendezvous.h"
#include "../world/world.h"
#include "run_error.h"

void hn_format_fault(hn_strbuf *sb, const hn_program *p, int rank, int instr, const char *msg)
{
    if (p != NULL && instr >= 0 && instr < p->ninstrs) {
        const hn_instr *in = p->instrs[instr];
        hn_sb_printf(sb, "%s:%d:%d: error: rank %d: ", p->filename, in->line, in->col, rank);
        hn_print_instr_short(sb, p, in);
        hn_sb_printf(sb, ": %s", msg);
    } else {
        hn_sb_printf(sb, "%s: error: rank %d: %s", p != NULL ? p->filename : "hirnode", rank, msg);
    }
}

/* The program whose instructions errors name. Under err_mu: work of a
 * launch still in flight may report a failure while the next is issued. */
void hn_runtime_set_err_prog(hn_runtime *rt, const hn_program *p)
{
    pthread_mutex_lock(&rt->err_mu);
    rt->err_prog = p;
    pthread_mutex_unlock(&rt->err_mu);
}

/* The error text of a call that fails before issuing anything, while
 * launches may be in flight (their failures write it too). */
void hn_runtime_set_error_text(hn_runtime *rt, const char *text)
{
    pthread_mutex_lock(&rt->err_mu);
    snprintf(rt->err_text, sizeof(rt->err_text), "%s", text);
    pthread_mutex_unlock(&rt->err_mu);
}

/* The world's slot decides: the first real failure wins over the
 * "aborted" echoes it causes; the winner's text is copied here (an echo
 * never over a failure, though the two may copy out of order). A world
 * across nodes hears of a failure that won its node's slot here through
 * the link (unless it came from there). */
static void post_failure(hn_runtime *rt, hn_status_t st, int rank, int instr, const char *text, int from_link)
{
    if (hn_world_error_post(rt->world_state, st, rank, instr, text)) {
        pthread_mutex_lock(&rt->err_mu);
        if (rt->err_status == HN_OK || (rt->err_status == HN_ERR_ABORTED && st != HN_ERR_ABORTED)) {
            snprintf(rt->err_text, sizeof(rt->err_text), "%s", text);
            rt->err_status = st;
            HN_DEBUG("%s", rt->err_text);
        }
        pthread_mutex_unlock(&rt->err_mu);
        if (!from_link && rt->net != NULL)
            (void)hn_net_abort(rt->net, st, rank, instr, text); /* a link already down: its loss is the news */
    }
    /* waiters poll the abort word (the text is in place for those who see
     * it); no lock of theirs is taken here */
    hn_world_abort(rt->world_state);
}

void hn_runtime_fail(hn_runtime *rt, int rank, int instr, hn_status_t st, const char *msg)
{
    hn_strbuf sb;
    const char *text;
    hn_sb_init(&sb);
    pthread_mutex_lock(&rt->err_mu);
    hn_format_fault(&sb, rt->err_prog, rank, instr, msg);
    pthread_mutex_unlock(&rt->err_mu);
    text = sb.data ? sb.data : msg;
    if (hn_procs(rt) && st == HN_ERR_TIMEOUT) { /* a wait for another process: is it stopped? */
        char more[HN_WORLD_ERROR_TEXT];
        snprintf(more, sizeof(more), "%s", text);
        hn_rdv_say_stopped(rt->rdv, more, sizeof(more));
        hn_sb_free(&sb);
        hn_sb_init(&sb);
        hn_sb_append(&sb, more);
        text = sb.data ? sb.data : msg;
    }
    post_failure(rt, st, rank, instr, text, 0);
    hn_sb_free(&sb);
}

void hn_runtime_fail_posted(hn_runtime *rt, hn_status_t st, int rank, int instr, const char *text)
{
    post_failure(rt, st, rank, instr, text, 1);
}

static void sink_report(void *ctx, int rank, int instr, hn_status_t st, const char *msg)
{
    hn_runtime_fail(ctx, rank, instr, st, msg);
}

hn_status_t hn_run_error_init(hn_runtime *rt)
{
    hn_status_t st;
    pthread_mutex_init(&rt->err_mu, NULL);
    if (hn_procs(rt))
        st = hn_world_attach(rt->world, rt->cfg.timeout_s, HN_RUNTIME_SHARED_BYTES, hn_rdv_world_base(rt->rdv),
                             rt->first % rt->per_node == 0 /* the node's first process */, &rt->world_state);
    else
        st = hn_world_create_local(rt->world, rt->cfg.timeout_s, HN_RUNTIME_SHARED_BYTES, &rt->world_state);
    if (st != HN_OK)
        return st;
    rt->abort_flag = hn_world_abort_word(rt->world_state);
    rt->sink.report = sink_report;
    rt->sink.ctx = rt;
    rt->sink.abort_flag = rt->abort_flag;
    rt->sink.timeout_s = rt->cfg.timeout_s;
    rt->sink.bell = hn_world_bell(rt->world_state);
    return HN_OK;
}

void hn_run_error_fini(hn_runtime *rt)
{
    hn_world_destroy(rt->world_state);
    rt->world_state = NULL;
    pthread_mutex_destroy(&rt->err_mu);
}

void hn_runtime_clear_error(hn_runtime *rt)
{
    pthread_mutex_lock(&rt->err_mu);
    rt->err_status = HN_OK;
    rt->err_text[0] = '\0';
    pthread_mutex_unlock(&rt->err_mu);
    /* and the abort word; across processes only where all agree that it
     * was read (hn_procs_finish_run) */
    if (!hn_procs(rt))
        hn_world_error_clear(rt->world_state);
}

const char *hn_runtime_error(const hn_runtime *rt) { return rt->err_text; }

hn_status_t hn_runtime_check_devices(hn_runtime *rt)
{
    for (int i = 0; i < rt->nlocal && !rt->lost; i++) {
        char why[320];
        if (rt->dev->health(rt->dev_ctx, rt->first + i, why, sizeof(why)) != HN_OK) {
            snprintf(rt->lost_text, sizeof(rt->lost_text),
                     "hirnode: error: %s; this runtime refuses further runs (destroy it; restart the process "
                     "to use the device again)", why);
            rt->lost = 1;
        }
    }
    return rt->lost ? HN_ERR_DEVICE_LOST : HN_OK;
}
