/* Dynamic verification: a dry run of every rank's control flow for one
 * configuration (shapes, ranges, teams, peers), then a check that every
 * collective is reached by all members of its team in the same order with
 * matching sizes, and that every send has its receive. A program that would
 * hang a communicator is rejected here, naming the instruction and ranks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../ir/parse.h"
#include "eval.h"
#include "../ir/params.h"
#include "verify_run.h"

typedef struct rank_error {
    int instr;
    char msg[512];
    int ranks[256];
    int nranks;
} rank_error;

static void where(hn_strbuf *sb, const hn_program *p, int instr)
{
    if (instr >= 0 && instr < p->ninstrs)
        hn_sb_printf(sb, "%s:%d:%d", p->filename, p->instrs[instr]->line, p->instrs[instr]->col);
    else
        hn_sb_append(sb, p->filename);
}

static void ranks_text(hn_strbuf *sb, const int *ranks, int n)
{
    hn_sb_append(sb, n == 1 ? "rank " : "ranks ");
    for (int i = 0; i < n; i++)
        hn_sb_printf(sb, i ? ", %d" : "%d", ranks[i]);
}

static void rec_text(hn_strbuf *sb, const hn_program *p, const hn_comm_rec *r)
{
    if (r->is_p2p)
        hn_sb_printf(sb, "%s of %zu x %s", r->kind ? "send" : "recv", r->count, hn_dtype_name(r->dtype));
    else if (r->norm)
        hn_sb_printf(sb, "allreduce_rmsnorm of %zu x %s (rows of %zu)", r->count, hn_dtype_name(r->dtype),
                     r->hidden);
    else
        hn_sb_printf(sb, "%s of %zu x %s", hn_coll_name((hn_coll_kind)r->kind), r->count,
                     hn_dtype_name(r->dtype));
    if (!r->is_p2p && (r->kind == HN_COLL_ALLREDUCE || r->kind == HN_COLL_REDUCE_SCATTER ||
                       r->kind == HN_COLL_REDUCE))
        hn_sb_printf(sb, " op %s", hn_redop_name(r->redop));
    if (!r->is_p2p && (r->kind == HN_COLL_BROADCAST || r->kind == HN_COLL_REDUCE ||
                       r->kind == HN_COLL_GATHER || r->kind == HN_COLL_SCATTER))
        hn_sb_printf(sb, " root %d", r->root);
    if (r->via != HN_VIA_DEFAULT)
        hn_sb_printf(sb, " via %s%s", hn_via_name((hn_via)r->via), hn_via_variant((hn_via)r->via, r->algo));
    hn_sb_append(sb, " (");
    where(sb, p, r->instr);
    hn_sb_append(sb, ")");
}

static int same_sig(const hn_comm_rec *a, const hn_comm_rec *b)
{
    return a->via == b->via && a->algo == b->algo && a->kind == b->kind && a->count == b->count && a->dtype == b->dtype && a->redop == b->redop &&
           a->root == b->root && a->norm == b->norm && a->hidden == b->hidden;
}

/* A distinct team of one rank's log, to look it up by its members. */
typedef struct team_key {
    const int *members;
    int n, id;
} team_key;

/* One rank's log indexed for matching. Its records are put in lists, each
 * in issue order: list t < nteams holds the collectives of the rank's t-th
 * distinct team (numbered by first use), list nteams + 2 * peer + kind the
 * receives from (kind 0) or sends to (kind 1) that peer. "The k-th
 * collective on a team" and "the k-th message from s to d" are then one
 * look-up, not a scan of the log: matching stays linear in the number of
 * communications (a dry run may log millions). */
typedef struct log_index {
    int *order; /* record indices, list by list */
    int *start; /* list l is order[start[l] .. start[l + 1]) */
    int nteams;
    team_key *keys; /* the distinct teams, sorted by members */
} log_index;

static int key_cmp(const void *a, const void *b)
{
    const team_key *x = a, *y = b;
    if (x->n != y->n)
        return x->n < y->n ? -1 : 1;
    return memcmp(x->members, y->members, (size_t)x->n * sizeof(int));
}

static void index_free(log_index *ix, int world)
{
    for (int r = 0; ix != NULL && r < world; r++) {
        hn_free(ix[r].order);
        hn_free(ix[r].start);
        hn_free(ix[r].keys);
    }
    hn_free(ix);
}

static int list_of(const log_index *ix, const hn_comm_rec *rec, const int *team_id)
{
    return rec->is_p2p ? ix->nteams + 2 * rec->peer + rec->kind : team_id[rec->team_off];
}

/* NULL when out of memory. */
static log_index *index_logs(const hn_comm_log *logs, int world)
{
    log_index *ix = hn_calloc((size_t)world, sizeof(*ix));
    int *team_id = NULL, ok = ix != NULL;
    for (int r = 0; r < world && ok; r++) {
        const hn_comm_log *l = &logs[r];
        log_index *x = &ix[r];
        int nlists;
        /* number the distinct teams: a team has one offset in the log's pool */
        hn_free(team_id);
        team_id = hn_malloc((size_t)l->nteams_used * sizeof(int) + 1);
        x->keys = hn_malloc((size_t)l->n * sizeof(team_key) + 1);
        if (team_id == NULL || x->keys == NULL) {
            ok = 0;
            break;
        }
        for (int i = 0; i < l->nteams_used; i++)
            team_id[i] = -1;
        for (int i = 0; i < l->n; i++) {
            const hn_comm_rec *rec = &l->recs[i];
            if (!rec->is_p2p && team_id[rec->team_off] < 0) {
                x->keys[x->nteams] = (team_key){hn_rec_team(l, rec), rec->nteam, x->nteams};
                team_id[rec->team_off] = x->nteams++;
            }
        }
        qsort(x->keys, (size_t)x->nteams, sizeof(team_key), key_cmp);
        /* a counting sort of the records by list keeps each list in issue order */
        nlists = x->nteams + 2 * world;
        x->start = hn_calloc((size_t)nlists + 2, sizeof(int));
        x->order = hn_malloc((size_t)l->n * sizeof(int) + 1);
        if (x->start == NULL || x->order == NULL) {
            ok = 0;
            break;
        }
        for (int i = 0; i < l->n; i++)
            x->start[list_of(x, &l->recs[i], team_id) + 2]++;
        for (int t = 2; t <= nlists + 1; t++)
            x->start[t] += x->start[t - 1];
        for (int i = 0; i < l->n; i++)
            x->order[x->start[list_of(x, &l->recs[i], team_id) + 1]++] = i;
    }
    hn_free(team_id);
    if (!ok) {
        index_free(ix, world);
        return NULL;
    }
    return ix;
}

static int list_len(const log_index *ix, int list)
{
    return list < 0 ? 0 : ix->start[list + 1] - ix->start[list];
}

/* k-th record of a list; NULL past its end (or for no list, -1). */
static const hn_comm_rec *list_at(const hn_comm_log *l, const log_index *ix, int list, int k)
{
    return k < list_len(ix, list) ? &l->recs[ix->order[ix->start[list] + k]] : NULL;
}

/* The list of this team at a rank; -1 if the rank has no collective on it. */
static int team_list(const log_index *ix, const int *members, int n)
{
    team_key want = {members, n, -1};
    const team_key *k = bsearch(&want, ix->keys, (size_t)ix->nteams, sizeof(team_key), key_cmp);
    return k != NULL ? k->id : -1;
}

static int p2p_list(const log_index *ix, int is_send, int peer)
{
    return ix->nteams + 2 * peer + is_send;
}

static void team_text(hn_strbuf *sb, const int *team, int n)
{
    hn_sb_append(sb, "[");
    for (int t = 0; t < n; t++)
        hn_sb_printf(sb, t ? ", %d" : "%d", team[t]);
    hn_sb_append(sb, "]");
}

/* Every member of a team issues the same collectives on it in the same
 * order. A team is checked from the first of its members (in team order)
 * that issues anything on it, so that a collective which the other
 * members never reach is found whichever member reaches it. */
static int match_teams(const hn_program *p, int world, const hn_comm_log *logs, const log_index *ix,
                       hn_strbuf *diag)
{
    int errors = 0;
    for (int r = 0; r < world; r++)
        for (int t = 0; t < ix[r].nteams; t++) {
            const hn_comm_rec *first = list_at(&logs[r], &ix[r], t, 0);
            const int *team = hn_rec_team(&logs[r], first);
            int n = first->nteam, checked_before = 0;
            for (int m = 0; m < n && team[m] != r; m++)
                checked_before |= team_list(&ix[team[m]], team, n) >= 0;
            if (checked_before)
                continue;
            for (int k = 0;; k++) {
                const hn_comm_rec *lead = list_at(&logs[r], &ix[r], t, k);
                int bad = 0;
                for (int m = 0; m < n && !bad; m++) {
                    int other = team[m];
                    const hn_comm_rec *o;
                    if (other == r)
                        continue;
                    o = list_at(&logs[other], &ix[other], team_list(&ix[other], team, n), k);
                    if (lead == NULL && o == NULL)
                        continue;
                    bad = 1;
                    if (lead == NULL || o == NULL) {
                        const hn_comm_rec *has = lead ? lead : o;
                        where(diag, p, has->instr);
                        hn_sb_append(diag, ": error: ranks diverge on team ");
                        team_text(diag, team, n);
                        hn_sb_printf(diag, ": rank %d reaches ", lead ? r : other);
                        rec_text(diag, p, has);
                        hn_sb_printf(diag, " as communication #%d, but rank %d has only %d on this team; "
                                     "it would hang\n", k, lead ? other : r, k);
                    } else if (!same_sig(lead, o)) {
                        where(diag, p, lead->instr);
                        hn_sb_append(diag, ": error: ranks diverge on team ");
                        team_text(diag, team, n);
                        hn_sb_printf(diag, ", communication #%d: rank %d issues ", k, r);
                        rec_text(diag, p, lead);
                        hn_sb_printf(diag, ", rank %d issues ", other);
                        rec_text(diag, p, o);
                        hn_sb_append(diag, "\n");
                    } else {
                        bad = 0;
                    }
                }
                if (bad) {
                    errors++;
                    break;
                }
                if (lead == NULL)
                    break;
            }
        }
    return errors;
}

static int match_p2p(const hn_program *p, int world, const hn_comm_log *logs, const log_index *ix,
                     hn_strbuf *diag)
{
    int errors = 0;
    for (int s = 0; s < world; s++)
        for (int d = 0; d < world; d++)
            for (int k = 0;; k++) {
                const hn_comm_rec *snd = list_at(&logs[s], &ix[s], p2p_list(&ix[s], 1, d), k);
                const hn_comm_rec *rcv = list_at(&logs[d], &ix[d], p2p_list(&ix[d], 0, s), k);
                if (snd == NULL && rcv == NULL)
                    break;
                if (snd == NULL || rcv == NULL) {
                    where(diag, p, (snd ? snd : rcv)->instr);
                    if (snd)
                        hn_sb_printf(diag, ": error: rank %d sends message #%d to rank %d, which "
                                     "never receives it; it would hang\n", s, k, d);
                    else
                        hn_sb_printf(diag, ": error: rank %d receives message #%d from rank %d, "
                                     "which never sends it; it would hang\n", d, k, s);
                    errors++;
                    break;
                }
                if (snd->count != rcv->count || snd->dtype != rcv->dtype || snd->via != rcv->via ||
                    snd->algo != rcv->algo) {
                    where(diag, p, rcv->instr);
                    hn_sb_printf(diag, ": error: message #%d from rank %d to rank %d: ", k, s, d);
                    rec_text(diag, p, snd);
                    hn_sb_append(diag, " against ");
                    rec_text(diag, p, rcv);
                    hn_sb_append(diag, "\n");
                    errors++;
                    break;
                }
            }
    return errors;
}

/* Sends and receives in an order that cannot complete, whatever the
 * communicator: every rank posts one group at a time (a lone send or recv
 * is a group of one), and a group completes only once every partner op is
 * posted too. That is the p2p communicator's rule (a send's copy waits for
 * its receiver's buffer, a receive's stream waits for the data, whatever
 * the protocol) and the CPU communicator's; NCCL may buffer a small
 * message and let a lone cycle through, or, at 2 GPUs and 64 MiB, fault
 * on an illegal address (seen on 2 H200s with NCCL 2.28.3) — its buffering
 * is no contract, so a program is held to the same rule on every backend.
 * Played out on the dry run's logs; the first rank left stuck is reported
 * with the peer and what that peer is stuck on. Collectives are left out:
 * fewer blocking ops only make progress easier, so a hang found is real. */
typedef struct p2p_ref {
    int rank, idx; /* into logs[rank].recs */
} p2p_ref;

/* the end of the post that recs[i] belongs to */
static int post_end(const hn_comm_log *l, int i)
{
    int e = i + 1;
    while (e < l->n && l->recs[e].is_p2p && l->recs[e].group == l->recs[i].group)
        e++;
    return e;
}

static int posted(const hn_comm_log *logs, const int *pos, p2p_ref q)
{
    const hn_comm_log *l = &logs[q.rank];
    return q.idx < pos[q.rank] || (pos[q.rank] < l->n && q.idx < post_end(l, pos[q.rank]));
}

/* Errors found, or -1 when out of memory. Run after match_p2p found every
 * message its partner. */
static int hang_p2p(const hn_program *p, int world, const hn_comm_log *logs, const log_index *ix,
                    hn_strbuf *diag)
{
    int *pos = hn_calloc((size_t)world, sizeof(int));
    p2p_ref **partner = hn_calloc((size_t)world, sizeof(p2p_ref *));
    int errors = 0, changed = 1, ok = pos != NULL && partner != NULL;
    for (int r = 0; r < world && ok; r++)
        ok = (partner[r] = hn_calloc((size_t)logs[r].n + 1, sizeof(p2p_ref))) != NULL;
    /* the partner of the k-th send s -> d is the k-th receive at d from s */
    for (int r = 0; r < world && ok; r++) {
        for (int i = 0; i < logs[r].n; i++)
            partner[r][i] = (p2p_ref){-1, -1};
        for (int peer = 0; peer < world; peer++)
            for (int kind = 0; kind < 2; kind++) {
                int mine = p2p_list(&ix[r], kind, peer), theirs = p2p_list(&ix[peer], !kind, r);
                for (int k = 0; k < list_len(&ix[r], mine) && k < list_len(&ix[peer], theirs); k++)
                    partner[r][ix[r].order[ix[r].start[mine] + k]] =
                        (p2p_ref){peer, ix[peer].order[ix[peer].start[theirs] + k]};
            }
    }
    /* each rank's current post completes once every partner op is posted */
    while (ok && changed) {
        changed = 0;
        for (int r = 0; r < world; r++) {
            int i = pos[r], e, all = 1;
            while (i < logs[r].n && !logs[r].recs[i].is_p2p)
                i++;
            pos[r] = i;
            if (i >= logs[r].n)
                continue;
            e = post_end(&logs[r], i);
            for (int k = i; k < e && all; k++)
                all = partner[r][k].rank >= 0 && posted(logs, pos, partner[r][k]);
            if (all) {
                pos[r] = e;
                changed = 1;
            }
        }
    }
    for (int r = 0; r < world && ok && errors == 0; r++) {
        int i = pos[r];
        for (int k = i; i < logs[r].n && k < post_end(&logs[r], i) && errors == 0; k++) {
            const hn_comm_rec *a = &logs[r].recs[k];
            p2p_ref q = partner[r][k];
            if (q.rank < 0 || posted(logs, pos, q))
                continue;
            where(diag, p, a->instr);
            hn_sb_printf(diag, ": error: rank %d: ", r);
            hn_print_instr_short(diag, p, p->instrs[a->instr]);
            hn_sb_printf(diag, " would hang: rank %d posts its side only after ", q.rank);
            hn_print_instr_short(diag, p, p->instrs[logs[q.rank].recs[pos[q.rank]].instr]);
            hn_sb_append(diag, ", which waits in turn (sends and receives in a cycle); post them together in "
                               "one `group`\n");
            errors++;
        }
    }
    for (int r = 0; r < world && partner != NULL; r++)
        hn_free(partner[r]);
    hn_free(partner);
    hn_free(pos);
    return ok ? errors : -1;
}

/* Binds inputs and outputs to fake buffers of their shapes. */
static hn_status_t bind_dry(hn_exec *x, const hn_program *p, const int64_t *params, int global,
                            hn_strbuf *diag)
{
    for (int k = 0; k < p->ninputs + p->noutputs; k++) {
        const hn_io *io = k < p->ninputs ? &p->inputs[k] : &p->outputs[k - p->ninputs];
        hn_value *v = &x->vals[io->var];
        hn_status_t st = hn_io_tensor(p, io, params, x->rank, x->world, x->nstreams, global, &v->t, diag);
        if (st != HN_OK)
            return st;
        if (global && (v->t.dtype == HN_BF16 || v->t.dtype == HN_F16))
            v->t.dtype = HN_F32;
        v->t.data = (void *)((uintptr_t)(k + 1) << 32);
        v->kind = HN_V_TENSOR;
    }
    return HN_OK;
}

/* ---- the value tables, given back as their variables die ----
 * A dry run's tables hold a value per variable of the program (hn_value is
 * some 170 bytes): a program of a million names has tables of 120 MB while
 * only a few of its variables live at a time. The last top-level statement
 * that names a variable is known before the run; once it has run, the
 * pages of the tables whose variables are all past theirs are given back
 * (madvise: they read as zeros again, and nothing reads them again). */

/* last[var] = i for every variable that instruction `in` (of top-level
 * statement i) or what it encloses names. */
static void last_expr(int *last, const hn_expr *e, int i)
{
    for (; e != NULL; e = e->b) {
        if (e->kind == HN_EX_VAR && e->var >= 0)
            last[e->var] = i;
        last_expr(last, e->a, i);
    }
}

static void last_tref(int *last, const hn_tref *t, int i)
{
    if (t->var >= 0)
        last[t->var] = i;
    for (int k = 0; k < t->nidx; k++)
        last_expr(last, t->idx[k], i);
}

static void last_block(int *last, const hn_block *b, int i);

static void last_instr(int *last, const hn_instr *in, int i)
{
    if (in->dst >= 0)
        last[in->dst] = i;
    for (int k = 0; k < 3; k++)
        last_expr(last, in->e[k], i);
    if (hn_instr_has_streamref(in)) {
        if (in->sref_var >= 0)
            last[in->sref_var] = i;
        if (in->wait_var >= 0)
            last[in->wait_var] = i;
        last_expr(last, in->sref_index, i);
    }
    if (hn_instr_has_operands(in)) {
        last_tref(last, &in->a, i);
        for (int k = 0; k < in->nargs; k++) {
            last_tref(last, &in->args[k].t, i);
            last_expr(last, in->args[k].e, i);
        }
    }
    if (hn_instr_has_all(in)) {
        last_tref(last, &in->b, i);
        for (int k = 0; k < in->type.ndim; k++)
            last_expr(last, in->type.shape[k], i);
        for (int k = 0; k < in->nteam; k++)
            last_expr(last, in->team[k], i);
    }
    last_block(last, &in->body, i);
    last_block(last, &in->orelse, i);
}

static void last_block(int *last, const hn_block *b, int i)
{
    for (int k = 0; k < b->n; k++)
        last_instr(last, b->items[k], i);
}

/* One table's whole pages, by the statement after which they are dead. */
typedef struct page_plan {
    char *first;     /* the first whole page of the table */
    size_t page;
    int npages;
    int *order;      /* pages, by when they die */
    int *dies;       /* per page: after this top-level statement (-1: before any) */
    int next;        /* order[next] is the next page to give back */
} page_plan;

static int dies_cmp(const void *a, const void *b, void *dies)
{
    int x = ((const int *)dies)[*(const int *)a], y = ((const int *)dies)[*(const int *)b];
    return x != y ? (x < y ? -1 : 1) : *(const int *)a - *(const int *)b;
}

/* Plans the pages of base[0 .. n * elem); -1 when out of memory. Tables
 * of fewer than 64 pages are kept whole (plan->npages 0). */
static int plan_pages(page_plan *pl, void *base, size_t elem, int n, const int *last)
{
    uintptr_t lo = (uintptr_t)base, hi = lo + (size_t)n * elem;
    memset(pl, 0, sizeof(*pl));
    pl->page = (size_t)sysconf(_SC_PAGESIZE);
    lo = (lo + pl->page - 1) & ~(uintptr_t)(pl->page - 1);
    hi &= ~(uintptr_t)(pl->page - 1);
    if (base == NULL || hi <= lo || (hi - lo) / pl->page < 64)
        return 0;
    pl->first = (char *)lo;
    pl->npages = (int)((hi - lo) / pl->page);
    pl->order = hn_malloc((size_t)pl->npages * sizeof(int));
    pl->dies = hn_malloc((size_t)pl->npages * sizeof(int));
    if (pl->order == NULL || pl->dies == NULL) {
        hn_free(pl->order);
        hn_free(pl->dies);
        memset(pl, 0, sizeof(*pl));
        return -1;
    }
    for (int g = 0; g < pl->npages; g++) {
        size_t off = (size_t)(lo - (uintptr_t)base) + (size_t)g * pl->page;
        int v0 = (int)(off / elem), v1 = (int)((off + pl->page - 1) / elem), d = -1;
        for (int v = v0; v <= v1 && v < n; v++)
            d = last[v] > d ? last[v] : d;
        pl->dies[g] = d;
        pl->order[g] = g;
    }
    qsort_r(pl->order, (size_t)pl->npages, sizeof(int), dies_cmp, pl->dies);
    return 0;
}

/* Gives back the pages dead once top-level statement i has run, runs of
 * neighbouring pages at once. */
static void release_pages(page_plan *pl, int i)
{
    while (pl->next < pl->npages && pl->dies[pl->order[pl->next]] <= i) {
        int g = pl->order[pl->next++], k = 1;
        while (pl->next < pl->npages && pl->order[pl->next] == g + k && pl->dies[g + k] <= i) {
            pl->next++;
            k++;
        }
        (void)madvise(pl->first + (size_t)g * pl->page, (size_t)k * pl->page, MADV_DONTNEED);
    }
}

static void plan_free(page_plan *pl)
{
    hn_free(pl->order);
    hn_free(pl->dies);
}

/* Runs block b (the body or the reference) statement by statement, giving
 * back the pages of x's tables that the rest of b no longer reads. last:
 * per variable, b's last top-level statement that names it (NULL: keep
 * the tables whole). */
static hn_status_t run_releasing(hn_exec *x, const hn_block *b, const int *last)
{
    page_plan vals, ivals;
    hn_status_t st = HN_OK;
    if (last == NULL || plan_pages(&vals, x->vals, sizeof(*x->vals), x->p->nvars, last) != 0)
        return hn_exec_block(x, b);
    if (plan_pages(&ivals, x->ivals, sizeof(*x->ivals), x->p->nvars, last) != 0) {
        plan_free(&vals);
        return hn_exec_block(x, b);
    }
    if (vals.npages == 0 && ivals.npages == 0) {
        st = hn_exec_block(x, b);
    } else {
        for (int i = 0; i < b->n && st == HN_OK; i++) {
            hn_block one = {&b->items[i], 1, 1};
            st = hn_exec_block(x, &one);
            release_pages(&vals, i);
            release_pages(&ivals, i);
        }
    }
    plan_free(&vals);
    plan_free(&ivals);
    return st;
}

/* Per variable, b's last top-level statement that names it (-1: none);
 * NULL when out of memory. */
static int *last_uses(const hn_program *p, const hn_block *b)
{
    int *last = hn_malloc((size_t)p->nvars * sizeof(int) + 1);
    if (last == NULL)
        return NULL;
    for (int v = 0; v < p->nvars; v++)
        last[v] = -1;
    for (int i = 0; i < b->n; i++)
        last_instr(last, b->items[i], i);
    return last;
}

static void add_error(rank_error **errs, int *n, int *cap, const hn_exec *x)
{
    for (int i = 0; i < *n; i++)
        if ((*errs)[i].instr == x->err_instr && strcmp((*errs)[i].msg, x->err) == 0) {
            if ((*errs)[i].nranks < 256)
                (*errs)[i].ranks[(*errs)[i].nranks++] = x->rank;
            return;
        }
    if (hn_grow((void **)errs, cap, *n, sizeof(**errs)) != 0)
        return;
    (*errs)[*n].instr = x->err_instr;
    snprintf((*errs)[*n].msg, sizeof((*errs)[*n].msg), "%s", x->err);
    (*errs)[*n].ranks[0] = x->rank;
    (*errs)[*n].nranks = 1;
    (*n)++;
}

hn_status_t hn_verify_run(const hn_program *p, int world, int nstreams, const int64_t *params,
                          hn_strbuf *diag, hn_comm_log *logs_out)
{
    hn_comm_log *logs = logs_out;
    log_index *ix = NULL;
    rank_error *errs = NULL;
    int nerrs = 0, errs_cap = 0, mismatches = 0;
    /* one budget for every rank's dry run (and the reference's) together, so
     * that verifying costs at most HN_DRY_RUN_BUDGET instructions and
     * HN_DRY_RUN_RECORDS logged communications and allocations whatever the
     * world size: a budget per rank let 8 ranks play 160 million */
    int64_t budget = HN_DRY_RUN_BUDGET, records = HN_DRY_RUN_RECORDS;
    hn_status_t st = HN_OK;
    int *last;
    if (logs == NULL && (logs = hn_calloc((size_t)world, sizeof(*logs))) == NULL)
        return HN_ERR_NOMEM;
    last = last_uses(p, &p->body); /* NULL: the tables are kept whole */
    for (int r = 0; r <= world; r++) {
        hn_exec x;
        int reference = r == world;
        /* the reference block only once every rank's body passed: its
         * errors most often echo the body's (the same parameters and
         * shapes), and a body that fails never runs anyway */
        if (reference && (!p->has_reference || nerrs > 0))
            break;
        if ((st = hn_exec_prepare(&x, p, reference ? 0 : r, world, nstreams, params)) != HN_OK)
            break;
        x.dry = 1;
        x.budget = budget;
        x.records = records;
        x.log = reference ? NULL : &logs[r];
        x.reference = x.promote = reference;
        if ((st = bind_dry(&x, p, params, reference, diag)) != HN_OK) {
            hn_exec_release(&x);
            break;
        }
        if (reference && last != NULL) { /* the reference's own last uses */
            hn_free(last);
            last = last_uses(p, &p->reference);
        }
        if (run_releasing(&x, reference ? &p->reference : &p->body, last) != HN_OK) {
            if (x.status == HN_ERR_NOMEM) {
                st = HN_ERR_NOMEM;
                hn_exec_release(&x);
                break;
            }
            add_error(&errs, &nerrs, &errs_cap, &x);
        }
        logs[reference ? 0 : r].streams |= x.streams_used; /* the reference runs on rank 0 */
        hn_exec_release(&x);
        budget = x.budget;
        records = x.records;
        if (budget < 0 || records < 0)
            break; /* the rank gave up: the others have nothing left to play */
    }
    for (int i = 0; i < nerrs; i++) {
        const rank_error *e = &errs[i];
        where(diag, p, e->instr);
        hn_sb_append(diag, ": error: ");
        if (e->instr >= 0 && e->nranks == world && world > 1) {
            hn_sb_append(diag, "all ranks");
        } else {
            ranks_text(diag, e->ranks, e->nranks);
        }
        if (e->instr >= 0) {
            hn_sb_append(diag, ": ");
            hn_print_instr_short(diag, p, p->instrs[e->instr]);
        }
        hn_sb_printf(diag, ": %s\n", e->msg);
    }
    if (st == HN_OK && nerrs == 0 && (ix = index_logs(logs, world)) == NULL)
        st = HN_ERR_NOMEM;
    if (st == HN_OK && nerrs == 0)
        mismatches = match_teams(p, world, logs, ix, diag) + match_p2p(p, world, logs, ix, diag);
    if (st == HN_OK && nerrs == 0 && mismatches == 0 &&
        (mismatches = hang_p2p(p, world, logs, ix, diag)) < 0)
        st = HN_ERR_NOMEM;
    if (st == HN_OK && (nerrs > 0 || mismatches > 0))
        st = HN_ERR_VERIFY;
    index_free(ix, world);
    hn_free(last);
    hn_free(errs);
    if (logs != logs_out)
        hn_comm_logs_free(logs, world);
    return st;
}
