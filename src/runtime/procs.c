/* Process mode (procs.h): one rank per process, the world's state in
 * memory every process maps at the same address (src/world/rendezvous.c).
 * Launches and replays stay local; what ends a run is collective, so that
 * every process returns the same first error and recovers together. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../base/settings.h"
#include "../world/net.h"
#include "../world/rendezvous.h"
#include "../world/world.h"
#include "config_cache.h"
#include "procs.h"
#include "../ranks/run_error.h"
#include "../ranks/teams.h"

#define TAG_KIND 0x7072ull /* "pr": the runtime's own exchanges */

static uint64_t next_tag(hn_runtime *rt, unsigned what)
{
    return (TAG_KIND << 48) ^ ((uint64_t)what << 40) ^ ++rt->xseq;
}

/* The world's memory: the block, the board, the shared regions. */
static size_t world_bytes(const hn_runtime *rt) { return hn_world_bytes(rt->world, HN_RUNTIME_SHARED_BYTES); }

hn_status_t hn_procs_join(hn_runtime *rt, const char *dir, const char *check_text, size_t device_bytes, void **arena,
                          size_t *arena_bytes, hn_strbuf *why)
{
    hn_rdv_setup c;
    hn_rdv *r;
    hn_status_t st;
    uint64_t h = 0x9e3779b97f4a7c15ull;
    memset(&c, 0, sizeof(c));
    for (const char *s = check_text; *s != '\0'; s++) /* FNV-1a */
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    c.dir = dir;
    c.world = rt->per_node; /* the processes of this node meet; other nodes only through the link */
    c.rank = rt->first - rt->node * rt->per_node;
    c.timeout_s = rt->cfg.timeout_s;
    c.check = h;
    rt->agreed_hash = h; /* the nodes compare it once linked */
    c.check_text = check_text;
    c.world_bytes = world_bytes(rt);
    c.arena_bytes = device_bytes;
    c.share = rt->dev->share;
    c.ord = rt->cfg.devices != NULL ? rt->cfg.devices[0] : rt->first;
    if ((st = hn_rdv_join(&c, &r, why)) != HN_OK)
        return st;
    rt->rdv = r;
    *arena = hn_rdv_arena(r, c.rank);
    *arena_bytes = device_bytes;
    return HN_OK;
}


/* A process gone: rank is the world's (the link says world ranks). */
static void lost_rank(hn_runtime *rt, int rank, const char *text)
{
    hn_strbuf sb;
    hn_sb_init(&sb);
    pthread_mutex_lock(&rt->err_mu);
    hn_format_fault(&sb, rt->err_prog, rank, -1, text);
    if (rt->death_text[0] == '\0' && sb.data != NULL)
        snprintf(rt->death_text, sizeof(rt->death_text), "%s", sb.data);
    pthread_mutex_unlock(&rt->err_mu);
    hn_sb_free(&sb);
    __atomic_store_n(&rt->world_lost, 1, __ATOMIC_RELEASE);
    hn_runtime_fail(rt, rank, -1, HN_ERR_PEER_LOST, text); /* the text first: those who see dead read it */
    hn_world_mark_dead(rt->world_state, rank);
}

/* the rendezvous names this node's ranks */
static void on_lost(void *ctx, int rank, const char *text)
{
    hn_runtime *rt = ctx;
    lost_rank(rt, rt->node * rt->per_node + rank, text);
}

static void on_link_lost(void *ctx, int rank, const char *text) { lost_rank(ctx, rank, text); }

static void on_link_failed(void *ctx, hn_status_t st, int rank, int instr, const char *text)
{
    hn_runtime_fail_posted(ctx, st, rank, instr, text);
}

hn_status_t hn_procs_watch(hn_runtime *rt) { return hn_rdv_watch(rt->rdv, on_lost, rt); }

void hn_procs_quiet(hn_runtime *rt)
{
    if (rt->rdv != NULL)
        hn_rdv_quiet(rt->rdv);
    hn_net_quiet(rt->net);
}

void hn_procs_unlink(hn_runtime *rt)
{
    if (rt->world_state != NULL)
        hn_world_set_net(rt->world_state, NULL, 0);
    hn_net_close(rt->net);
    rt->net = NULL;
}

void hn_procs_leave(hn_runtime *rt)
{
    hn_procs_unlink(rt);
    /* the link's server goes last: the others' last takes may still be on their way */
    hn_net_server_close(rt->net_server, rt->cfg.timeout_s);
    rt->net_server = NULL;
    if (rt->rdv != NULL)
        hn_rdv_leave(rt->rdv);
    rt->rdv = NULL;
}

/* ---- nodes ---- */

static int env_int(const char *name, int *out)
{
    const char *v = getenv(name);
    char *end;
    long x;
    if (v == NULL || v[0] == '\0')
        return 0;
    x = strtol(v, &end, 10);
    if (*end != '\0' || x < 1 || x > 4096)
        return 0;
    *out = (int)x;
    return 1;
}

hn_status_t hn_procs_nodes(int world, int *nodes, hn_strbuf *why)
{
    int64_t v = 0;
    int ws, local, n = 1;
    const char *from = NULL;
    if (hn_setting_int("nodes", &v, why) != HN_OK)
        return HN_ERR_INVALID;
    if (v > 0) {
        n = (int)v;
        from = "HIRNODE_NODES";
    } else if (env_int("WORLD_SIZE", &ws) && ws == world && env_int("LOCAL_WORLD_SIZE", &local) && ws % local == 0) {
        n = ws / local; /* torchrun */
        from = "WORLD_SIZE / LOCAL_WORLD_SIZE";
    } else if (env_int("SLURM_NTASKS", &ws) && ws == world && env_int("SLURM_NNODES", &local)) {
        n = local;
        from = "SLURM_NNODES";
    }
    if (n > world || world % n != 0) {
        hn_sb_printf(why, "a world of %d ranks cannot be spread evenly over %d nodes (%s)", world, n, from);
        return HN_ERR_INVALID;
    }
    *nodes = n;
    return HN_OK;
}

/* The link's key in the store: the k-th world across nodes this process
 * made (every process makes its runtimes in the same order). */
static void link_key(char *key, size_t cap, int world)
{
    static int links;
    snprintf(key, cap, "hirnode/link/%d/%d", world, __atomic_add_fetch(&links, 1, __ATOMIC_RELAXED));
}

/* Every node runs the same build with the same settings: each node's
 * rendezvous compared its processes' texts; the nodes compare their hashes. */
static hn_status_t agree_across_nodes(hn_runtime *rt, hn_strbuf *why)
{
    uint64_t *all = hn_calloc((size_t)rt->world, sizeof(uint64_t));
    hn_status_t st;
    if (all == NULL)
        return HN_ERR_NOMEM;
    if ((st = hn_procs_xchg(rt, "the nodes' builds and settings", &rt->agreed_hash, sizeof(uint64_t), all)) != HN_OK)
        hn_sb_printf(why, "%s", hn_runtime_error(rt));
    for (int r = 0; st == HN_OK && r < rt->world; r++)
        if (all[r] != all[0]) {
            hn_sb_printf(why, "rank %d (node %d) runs another build of hirnode or other settings than rank 0 "
                         "(node 0): every node must run the same build with the same HIRNODE_* settings (each "
                         "node's processes compare theirs in full)", r, r / rt->per_node);
            st = HN_ERR_MISMATCH;
        }
    hn_free(all);
    return st;
}

hn_status_t hn_procs_link(hn_runtime *rt, const hn_world_store *store, const char *host, hn_strbuf *why)
{
    hn_net_events ev = {on_link_failed, on_link_lost, rt};
    char key[96], addr[400], name[256];
    double silence = HN_MAX(2.0, HN_MIN(rt->cfg.timeout_s / 2, 30.0));
    int port = 0;
    link_key(key, sizeof(key), rt->world);
    if (host == NULL || host[0] == '\0') {
        if (gethostname(name, sizeof(name)) != 0)
            snprintf(name, sizeof(name), "localhost");
        name[sizeof(name) - 1] = '\0';
    }
    if (rt->first == 0) {
        /* on the store's address where there is one (the others reach it), else on every address of
         * this machine, published by its name */
        if ((rt->net_server = hn_net_serve(host != NULL && host[0] != '\0' ? host : NULL, 0, rt->world, silence,
                                           &port, why)) == NULL)
            return HN_ERR_IO;
        snprintf(addr, sizeof(addr), "%s:%d", host != NULL && host[0] != '\0' ? host : name, port);
        if (store->set(store->ctx, key, addr) != 0) {
            hn_sb_printf(why, "rank 0: the store refused %s", key);
            return HN_ERR_IO;
        }
    } else {
        char *colon;
        memset(addr, 0, sizeof(addr));
        if (store->get(store->ctx, key, addr, sizeof(addr), rt->cfg.timeout_s) != 0 || addr[0] == '\0' ||
            (colon = strrchr(addr, ':')) == NULL) {
            hn_sb_printf(why, "rank %d: the store gave no address of the world's link under %s within %.0f s "
                         "(rank 0's process serves it)", rt->first, key, rt->cfg.timeout_s);
            return HN_ERR_TIMEOUT;
        }
        *colon = '\0';
        port = atoi(colon + 1);
        host = addr;
    }
    if ((rt->net = hn_net_connect(rt->first == 0 && (host == NULL || host[0] == '\0') ? "localhost" : host, port,
                                  rt->first, rt->node, silence, &ev, rt->cfg.timeout_s, why)) == NULL)
        return HN_ERR_IO;
    hn_world_set_net(rt->world_state, rt->net, rt->per_node);
    return agree_across_nodes(rt, why);
}

hn_status_t hn_procs_check_lost(hn_runtime *rt)
{
    hn_world_error e;
    if (hn_world_dead_rank(rt->world_state) >= 0)
        __atomic_store_n(&rt->world_lost, 1, __ATOMIC_RELEASE);
    if (!__atomic_load_n(&rt->world_lost, __ATOMIC_ACQUIRE))
        return HN_OK;
    pthread_mutex_lock(&rt->err_mu);
    if (rt->death_text[0] != '\0') { /* the death, not a failure it caused elsewhere first */
        snprintf(rt->err_text, sizeof(rt->err_text), "%s", rt->death_text);
        rt->err_status = HN_ERR_PEER_LOST;
        pthread_mutex_unlock(&rt->err_mu);
        return HN_ERR_PEER_LOST;
    }
    pthread_mutex_unlock(&rt->err_mu);
    if (hn_world_error_get(rt->world_state, &e) == HN_OK && e.status == HN_ERR_PEER_LOST)
        hn_runtime_set_error_text(rt, e.text);
    else if (hn_runtime_error(rt)[0] == '\0')
        hn_runtime_set_error_text(rt, "hirnode: error: a process of the world died: this runtime cannot run "
                                      "again (destroy it)");
    return HN_ERR_PEER_LOST;
}

/* An exchange that itself failed (a process died, never came, diverged):
 * the world cannot go on together. */
static hn_status_t world_broken(hn_runtime *rt, hn_status_t st, const char *what, const hn_strbuf *why)
{
    char text[900];
    if (hn_procs_check_lost(rt) != HN_OK)
        return HN_ERR_PEER_LOST;
    snprintf(text, sizeof(text), "hirnode: error: rank %d, %s: %s", rt->first, what,
             why->data != NULL ? why->data : hn_status_string(st));
    hn_rdv_say_stopped(rt->rdv, text, sizeof(text));
    hn_runtime_set_error_text(rt, text);
    if (st == HN_ERR_TIMEOUT || st == HN_ERR_MISMATCH)
        return st;
    return HN_ERR_ABORTED;
}

static hn_status_t xchg(hn_runtime *rt, const char *what, unsigned kind, unsigned flags, const void *mine,
                        size_t bytes, void *all)
{
    hn_strbuf why;
    hn_status_t st;
    hn_sb_init(&why);
    st = hn_world_xchg(rt->world_state, rt->all_ranks, rt->world, rt->first, next_tag(rt, kind), mine, bytes, all,
                       flags, &why);
    if (st != HN_OK)
        st = world_broken(rt, st, what, &why);
    hn_sb_free(&why);
    return st;
}

hn_status_t hn_procs_xchg(hn_runtime *rt, const char *what, const void *mine, size_t bytes, void *all)
{
    if (hn_procs_check_lost(rt) != HN_OK)
        return HN_ERR_PEER_LOST;
    return xchg(rt, what, 1, 0, mine, bytes, all);
}

/* Whether any process says yes (an exchange of one word each). */
static hn_status_t any_of(hn_runtime *rt, const char *what, unsigned kind, int mine, int *any)
{
    int32_t v = mine, small[64], *all = rt->world <= 64 ? small : hn_calloc((size_t)rt->world, sizeof(int32_t));
    hn_status_t st;
    if (all == NULL)
        return HN_ERR_NOMEM;
    /* the end of a run (kind 2) waits a second past the deadline: a peer
     * still in its run ends it at the deadline naming what it waited for,
     * which is the error, not that it came late here */
    st = xchg(rt, what, kind, HN_WORLD_EVEN_ABORTED | (kind == 2 ? HN_WORLD_PATIENT : 0u), &v, sizeof(v), all);
    *any = 0;
    for (int i = 0; st == HN_OK && i < rt->world; i++)
        *any |= all[i] != 0;
    if (all != small)
        hn_free(all);
    return st;
}

/* Across nodes each node's slot holds the first error its processes saw:
 * all agree on one, the lowest rank's failure (an "aborted" echo only
 * where nobody failed). */
typedef struct error_rec {
    int32_t status, pad;
    char text[HN_WORLD_ERROR_TEXT];
} error_rec;

static hn_status_t agree_error(hn_runtime *rt)
{
    error_rec mine, *all = hn_calloc((size_t)rt->world, sizeof(error_rec));
    hn_status_t st;
    int best = -1;
    if (all == NULL)
        return HN_ERR_NOMEM;
    memset(&mine, 0, sizeof(mine));
    pthread_mutex_lock(&rt->err_mu);
    mine.status = rt->err_status;
    snprintf(mine.text, sizeof(mine.text), "%s", rt->err_text);
    pthread_mutex_unlock(&rt->err_mu);
    st = xchg(rt, "recovery: the first error across nodes", 6, HN_WORLD_EVEN_ABORTED, &mine, sizeof(mine), all);
    for (int i = 0; st == HN_OK && i < rt->world; i++)
        if (all[i].status != HN_OK &&
            (best < 0 || (all[best].status == HN_ERR_ABORTED && all[i].status != HN_ERR_ABORTED)))
            best = i;
    if (best >= 0) {
        pthread_mutex_lock(&rt->err_mu);
        rt->err_status = all[best].status;
        snprintf(rt->err_text, sizeof(rt->err_text), "%s", all[best].text);
        pthread_mutex_unlock(&rt->err_mu);
    }
    hn_free(all);
    return st;
}

/* Every process ends the run here. Nothing of the run is in flight
 * anywhere once the first exchange is done, so every process sees the
 * same abort word and the same first error; the failure path (graphs
 * dropped, communicators aborted and, where one process found them dead,
 * made anew everywhere) runs in every process alike, then rank 0 alone
 * clears the world's error between two barriers. */
hn_status_t hn_procs_finish_run(hn_runtime *rt, hn_status_t st)
{
    hn_world_error e;
    hn_status_t xst, drained;
    int failed, dead;
    if (hn_procs_check_lost(rt) != HN_OK) { /* nobody to agree with */
        xst = HN_ERR_PEER_LOST;
        goto broken;
    }
    if ((xst = any_of(rt, "the end of a run", 2,
                      st != HN_OK || __atomic_load_n(rt->abort_flag, __ATOMIC_ACQUIRE), &failed)) != HN_OK)
        goto broken;
    if (!failed) {
        hn_teams_reset(rt);
        return st;
    }
    dead = __atomic_load_n(&rt->teams_dead, __ATOMIC_ACQUIRE);
    {
        /* abort words first, the streams drained, then the graphs dropped
         * (config_cache.c); a process whose streams did not drain is lost */
        int aborted = 0;
        drained = hn_cache_abort_all(rt, &aborted);
        dead |= aborted;
    }
    if ((xst = any_of(rt, "recovery: the communicators' state", 3, dead, &dead)) != HN_OK)
        goto broken;
    if (dead && drained == HN_OK) {
        hn_teams_destroy(rt);
        hn_cache_forget(rt, NULL, 0, "the communicators were made anew after a failure");
    }
    __atomic_store_n(&rt->teams_dead, 0, __ATOMIC_RELEASE);
    rt->dev->recover(rt->dev_ctx);
    /* the world's first error is every process's */
    if (hn_world_error_get(rt->world_state, &e) == HN_OK && e.status != HN_OK) {
        pthread_mutex_lock(&rt->err_mu);
        if (rt->err_status == HN_OK || rt->err_status == HN_ERR_ABORTED || e.status != HN_ERR_ABORTED) {
            snprintf(rt->err_text, sizeof(rt->err_text), "%s", e.text);
            rt->err_status = e.status;
        }
        pthread_mutex_unlock(&rt->err_mu);
    }
    if (rt->nodes > 1 && (xst = agree_error(rt)) != HN_OK)
        goto broken;
    st = rt->err_status != HN_OK ? rt->err_status : st != HN_OK ? st : HN_ERR_ABORTED;
    if (hn_runtime_check_devices(rt) != HN_OK) {
        snprintf(rt->err_text + strlen(rt->err_text), sizeof(rt->err_text) - strlen(rt->err_text), "%s%s",
                 rt->err_text[0] ? "\n" : "", rt->lost_text);
        st = HN_ERR_DEVICE_LOST;
    }
    if (__atomic_load_n(&rt->world_lost, __ATOMIC_ACQUIRE))
        return HN_ERR_PEER_LOST;
    /* everyone has copied the error: rank 0 clears it, nobody runs before */
    if ((xst = any_of(rt, "recovery: the error read", 4, 0, &failed)) != HN_OK)
        goto broken;
    if (rt->first % rt->per_node == 0) { /* each node's first process: the memory is the node's */
        hn_world_error_clear(rt->world_state);
        hn_teams_reset_shared(rt);
    }
    if ((xst = any_of(rt, "recovery: the error cleared", 5, 0, &failed)) != HN_OK)
        goto broken;
    hn_teams_reset(rt);
    return st;
broken:
    /* a process is gone or diverged: nothing can be agreed any more */
    __atomic_store_n(&rt->world_lost, 1, __ATOMIC_RELEASE);
    {
        int aborted;
        (void)hn_cache_abort_all(rt, &aborted);
    }
    if (xst == HN_ERR_PEER_LOST)
        (void)hn_procs_check_lost(rt);
    return xst;
}

hn_status_t hn_procs_max(hn_runtime *rt, double mine, double *worst)
{
    double small[64], *all;
    hn_status_t st;
    *worst = mine;
    if (!hn_procs(rt))
        return HN_OK;
    all = rt->world <= 64 ? small : hn_calloc((size_t)rt->world, sizeof(double));
    if (all == NULL)
        return HN_ERR_NOMEM;
    st = hn_procs_xchg(rt, "the slowest rank's time", &mine, sizeof(mine), all);
    for (int i = 0; st == HN_OK && i < rt->world; i++)
        *worst = all[i] < 0 || *worst < 0 ? -1 : HN_MAX(*worst, all[i]);
    if (all != small)
        hn_free(all);
    return st;
}

hn_status_t hn_procs_post(hn_runtime *rt, const char *what, const void *mine, size_t bytes, uint64_t *tag)
{
    *tag = next_tag(rt, 7);
    if (hn_procs_check_lost(rt) != HN_OK)
        return HN_ERR_PEER_LOST;
    if (rt->world == rt->per_node) /* one node: nobody to take it */
        return HN_OK;
    if (hn_net_put(rt->net, *tag, rt->first, rt->world - rt->per_node, mine, bytes) != 0) {
        char text[300];
        snprintf(text, sizeof(text), "hirnode: error: rank %d, %s: the world's link between the nodes is down",
                 rt->first, what);
        hn_runtime_set_error_text(rt, text);
        return HN_ERR_PEER_LOST;
    }
    return HN_OK;
}

static int link_stopped(void *arg) { return hn_world_dead_rank(((hn_runtime *)arg)->world_state) >= 0; }

hn_status_t hn_procs_fetch(hn_runtime *rt, const char *what, uint64_t tag, int rank, void *out, size_t bytes)
{
    void *got = NULL;
    size_t len = 0;
    char text[400];
    int r = hn_net_take(rt->net, tag, rank, &got, &len, hn_now() + rt->cfg.timeout_s, link_stopped, rt);
    if (r == 0 && len == bytes) {
        memcpy(out, got, bytes);
        hn_free(got);
        return HN_OK;
    }
    hn_free(got);
    if (hn_procs_check_lost(rt) != HN_OK)
        return HN_ERR_PEER_LOST;
    snprintf(text, sizeof(text), "hirnode: error: rank %d, %s: %s from rank %d (node %d)", rt->first, what,
             r == 0 ? "another size" : r == 1 ? "nothing came within the deadline" : "the world's link is down",
             rank, rank / rt->per_node);
    hn_runtime_set_error_text(rt, text);
    return r == 0 ? HN_ERR_MISMATCH : r == 1 ? HN_ERR_TIMEOUT : HN_ERR_PEER_LOST;
}
