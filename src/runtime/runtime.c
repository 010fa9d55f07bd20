/* The public API of the runtime (include/hirnode/runtime.h): create and
 * destroy, runs and launches, sync and query, device memory, streams for
 * embedders, forget. The work is done by the layers below
 * (docs/INTERNALS.md "Scheduling and runtime"); the calls of tracing
 * and graphs are defined with them (trace.c, graph.c). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "bind.h"
#include "../base/settings.h"
#include "config_cache.h"
#include "../model/cost.h"
#include "graph.h"
#include "issue.h"
#include "meet.h"
#include "../ranks/pool.h"
#include "../model/profile.h"
#include "prepare.h"
#include "procs.h"
#include "../ranks/rank.h"
#include "register.h"
#include "run.h"
#include "../ranks/run_error.h"
#include "../ranks/teams.h"
#include "../trace/trace.h"
#include "../world/store_tcp.h"

/* ---- create / destroy ---- */

/* NULL, with why: backend d has fewer devices than the ranks need. */
static const hn_device_ops *too_few(const hn_device_ops *d, const hn_runtime_config *cfg, int need, hn_strbuf *why)
{
    const char *visible = d->visible_env != NULL ? getenv(d->visible_env) : NULL;
    int count = d->device_count();
    if (cfg->devices == NULL)
        hn_sb_printf(why, "backend '%s' has %d device%s, %d rank%s asked", d->name, count, count == 1 ? "" : "s",
                     cfg->ndev, cfg->ndev == 1 ? "" : "s");
    else
        hn_sb_printf(why, "backend '%s' has %d device%s, device %d asked", d->name, count, count == 1 ? "" : "s",
                     need - 1);
    if (visible != NULL)
        hn_sb_printf(why, " (%s=%s)", d->visible_env, visible);
    return NULL;
}

/* The backend cfg names, with devices for every rank's ordinal (need: the
 * highest ordinal + 1); NULL with why. say: an info line when `auto`
 * falls back to an emulated backend. */
static const hn_device_ops *pick_backend(const hn_runtime_config *cfg, int need, int say, hn_strbuf *why)
{
    const char *name = cfg->backend != NULL ? cfg->backend : "auto";
    const hn_device_ops *const *all = hn_device_backends();
    const hn_device_ops *d;
    if (strcmp(name, "auto") == 0) {
        for (int i = 0; all[i] != NULL; i++)
            if (!all[i]->emulated && all[i]->device_count() >= need)
                return all[i];
        /* ordinals named on a machine with GPUs are GPUs: one past them is
         * an error, not a reason to emulate */
        for (int i = 0; cfg->devices != NULL && all[i] != NULL; i++)
            if (!all[i]->emulated && all[i]->device_count() > 0)
                return too_few(all[i], cfg, need, why);
        for (int i = 0; all[i] != NULL; i++)
            if (all[i]->emulated) {
                if (say)
                    HN_INFO("no GPU backend has %d device%s; using the %s (CPU emulation) backend", need,
                            need == 1 ? "" : "s", all[i]->name);
                return all[i];
            }
        hn_sb_printf(why, "no backend of this build has %d device%s", need, need == 1 ? "" : "s");
        return NULL;
    }
    if ((d = hn_device_find(name)) == NULL) {
        hn_sb_printf(why, "unknown backend '%s' (this build has auto", name);
        for (int i = 0; all[i] != NULL; i++)
            hn_sb_printf(why, ", %s", all[i]->name);
        hn_sb_printf(why, ")");
        return NULL;
    }
    return d->device_count() < need ? too_few(d, cfg, need, why) : d;
}

/* The highest device ordinal cfg's ranks use, + 1. */
static int devices_needed(const hn_runtime_config *cfg)
{
    int need = 0;
    for (int r = 0; r < cfg->ndev; r++)
        need = HN_MAX(need, (cfg->devices != NULL ? cfg->devices[r] : cfg->rank + r) + 1);
    return need;
}

const hn_device_ops *hn_runtime_pick_backend(const hn_runtime_config *cfg, hn_strbuf *why)
{
    return pick_backend(cfg, devices_needed(cfg), 0, why);
}

/* The watchdog's hook (pool.c), past a run's deadline: every graph's
 * device-side waits and every communicator aborted, which releases a rank
 * stuck in one; teams found dead are made anew at the end of the run. */
static void on_deadline(hn_runtime *rt)
{
    hn_cache_graphs_abort(rt);
    hn_teams_aborted(rt, hn_teams_abort(rt));
}

static void teardown(hn_runtime *rt, int nthreads)
{
    hn_procs_quiet(rt); /* from here on, a process that goes is no failure */
    if (rt->trace != NULL && !rt->stuck) /* written while the rank threads still run */
        (void)hn_runtime_trace_stop(rt);
    if (nthreads == rt->nlocal && !rt->stuck) {
        hn_runtime_collect_launches(rt); /* within the deadline, or the runtime is lost (stuck) */
        hn_graphs_free(rt); /* on the rank threads, before the teams */
    }
    if (__atomic_load_n(&rt->stuck, __ATOMIC_ACQUIRE)) {
        /* a rank thread never came back from a call on its device, or the
         * device's work never ended after the abort (the runtime said it
         * is lost): freeing device memory would wait for that work, and
         * the thread may still use the runtime, so all of it is left */
        static const char error_prefix[] = "hirnode: error: "; /* the text is an error's; the log says warn */
        const char *why = rt->lost_text;
        if (strncmp(why, error_prefix, sizeof(error_prefix) - 1) == 0)
            why += sizeof(error_prefix) - 1;
        HN_WARN("%s: its rank threads and memory are left behind", why);
        hn_pool_stop(rt, nthreads);
        return;
    }
    /* communicators go before streams and buffers, and before the
     * registered memory they reach */
    hn_teams_fini(rt);
    if (nthreads == rt->nlocal)
        hn_reg_fini(rt);
    if (nthreads == rt->nlocal)
        hn_runtime_exec_all(rt, hn_rank_fini, NULL);
    hn_pool_stop(rt, nthreads);
    if (rt->dev_ctx != NULL)
        rt->dev->fini(rt->dev_ctx);
    hn_pool_fini(rt);
    hn_procs_unlink(rt); /* the link's thread reports into the world: it goes first */
    hn_run_error_fini(rt);
    if (hn_procs(rt))
        hn_procs_leave(rt); /* the world's memory, after everything in it */
    hn_cache_fini(rt);
    hn_bind_fini(rt);
    hn_free(rt->job_status);
    hn_free(rt->all_ranks);
    hn_free(rt->devices);
    hn_free(rt->world_devices);
    hn_free(rt->ranks);
    hn_free(rt);
}

/* The world of cfg (world 0: ndev, all ranks in this process) checked:
 * the ranks this process drives lie in it, and a world larger than them
 * is refused: the ranks of other processes could not be reached. */
static hn_status_t check_world(hn_runtime_config *cfg, hn_strbuf *why)
{
    if (cfg->world == 0)
        cfg->world = cfg->ndev;
    if (cfg->world < 1 || cfg->world > 256) {
        hn_sb_printf(why, "world of %d ranks out of range [1, 256]", cfg->world);
        return HN_ERR_INVALID;
    }
    if (cfg->world < cfg->ndev) {
        hn_sb_printf(why, "a world of %d rank%s cannot hold the %d ranks this process drives", cfg->world,
                     cfg->world == 1 ? "" : "s", cfg->ndev);
        return HN_ERR_INVALID;
    }
    if (cfg->rank < 0 || cfg->rank > cfg->world - cfg->ndev) {
        hn_sb_printf(why, "ranks %d .. %d asked of a world of %d ranks (rank %d, ndev %d)", cfg->rank,
                     cfg->rank + cfg->ndev - 1, cfg->world, cfg->rank, cfg->ndev);
        return HN_ERR_INVALID;
    }
    if (cfg->world == cfg->ndev)
        return HN_OK;
    if (cfg->rendezvous == NULL || cfg->rendezvous[0] == '\0') {
        hn_sb_printf(why, "a world of %d ranks with %d in this process needs a rendezvous directory "
                     "(hn_runtime_config.rendezvous, HIRNODE_RENDEZVOUS) or its launcher's store (HIRNODE_STORE, "
                     "or MASTER_ADDR and MASTER_PORT)", cfg->world, cfg->ndev);
        return HN_ERR_INVALID;
    }
    if (cfg->ndev != 1) {
        hn_sb_printf(why, "a world across processes takes one rank per process (this one asks for %d)", cfg->ndev);
        return HN_ERR_UNSUPPORTED;
    }
    return HN_OK;
}

/* What every process of a world must agree on, as text (the rendezvous
 * compares its hash, and shows it when they differ): the build, the
 * backend, the streams and every setting that steers a decision. */
static void agreed_text(const hn_runtime_config *cfg, const char *backend, hn_strbuf *sb)
{
    static const char *const own[] = {"log", "fault", "rank", "rendezvous", "store", "seed", NULL};
    hn_sb_printf(sb, "hirnode %s, backend %s, %d streams, timeout %g s, graphs %d", hn_version(), backend,
                 cfg->nstreams, cfg->timeout_s, cfg->graphs);
    for (int i = 0; i < hn_settings_count(); i++) {
        const hn_setting *set = hn_setting_at(i);
        const char *v = getenv(set->env);
        int mine = 0;
        for (int k = 0; own[k] != NULL; k++)
            mine |= strcmp(own[k], set->name) == 0;
        if (!mine && v != NULL)
            hn_sb_printf(sb, ", %s=%s", set->env, v);
    }
}

/* How a world across nodes links up: the store its processes met
 * through, and the store's host where known (the link is served there). */
typedef struct link_via {
    const hn_world_store *store;
    const char *host;
} link_via;

/* The runtime of cfg_in, or an error with why (one line, no location). */
static hn_status_t create(const hn_runtime_config *cfg_in, const link_via *link, hn_runtime **out, hn_strbuf *why)
{
    hn_runtime_config cfg;
    hn_runtime_settings set;
    hn_strbuf bad;
    hn_runtime *rt;
    hn_device_setup ds;
    hn_status_t st = HN_OK;
    int nthreads = 0, need = 0;
    void *arena = NULL;
    size_t arena_bytes = 0;
    if (cfg_in == NULL || out == NULL) {
        hn_sb_printf(why, "no hn_runtime_config or no place for the runtime (NULL)");
        return HN_ERR_INVALID;
    }
    cfg = *cfg_in;
    if (cfg.ndev < 1 || cfg.ndev > 256) {
        hn_sb_printf(why, "rank count %d out of range [1, 256]", cfg.ndev);
        return HN_ERR_INVALID;
    }
    if ((st = check_world(&cfg, why)) != HN_OK)
        return st;
    if (cfg.nstreams < 1 || cfg.nstreams > HN_MAX_STREAMS) {
        hn_sb_printf(why, "stream count %d out of range [1, %d]", cfg.nstreams, HN_MAX_STREAMS);
        return HN_ERR_INVALID;
    }
    for (int r = 0; r < cfg.ndev; r++) {
        int d = cfg.devices != NULL ? cfg.devices[r] : cfg.rank + r;
        if (d < 0 || d > 4095) {
            hn_sb_printf(why, "rank %d: device ordinal %d out of range [0, 4095]", cfg.rank + r, d);
            return HN_ERR_INVALID;
        }
        need = HN_MAX(need, d + 1);
    }
    if (cfg.timeout_s <= 0)
        cfg.timeout_s = 60.0;
    /* every HIRNODE_* variable checked: a bad one is refused, not guessed;
       the checker's lines (one per bad variable) become one line */
    hn_sb_init(&bad);
    st = hn_settings_read_runtime(cfg.world, &set, &bad);
    if (st != HN_OK) {
        for (const char *line = bad.data, *nl; line != NULL && *line != '\0'; line = nl + 1) {
            if ((nl = strchr(line, '\n')) == NULL)
                nl = line + strlen(line) - 1;
            hn_sb_appendn(why, line, (size_t)(nl - line) + (*nl != '\n'));
            if (nl[1] != '\0')
                hn_sb_append(why, "; ");
        }
        hn_sb_free(&bad);
        return st;
    }
    hn_sb_free(&bad);
    if ((rt = hn_calloc(1, sizeof(*rt))) == NULL)
        return HN_ERR_NOMEM;
    rt->cfg = cfg;
    rt->world = cfg.world;
    rt->first = cfg.rank;
    rt->nlocal = cfg.ndev;
    rt->cfg.rendezvous = NULL; /* the caller's: read while creating only (below) */
    rt->spin_us = set.spin_us;
    rt->watchdog_grace_s = set.watchdog_grace_s;
    rt->faults = set.faults;
    rt->join_spin = set.join_spin;
    rt->auto_graphs = cfg.graphs;
    (void)hn_replay_path_parse(set.replay, &rt->replay); /* checked with the settings */
    rt->on_deadline = on_deadline;
    hn_pool_init(rt);
    rt->nodes = 1;
    if (rt->world > rt->nlocal && (st = hn_procs_nodes(rt->world, &rt->nodes, why)) != HN_OK)
        goto undo;
    rt->per_node = rt->world / rt->nodes;
    rt->node = rt->first / rt->per_node;
    if (rt->nodes > 1 && link == NULL) {
        hn_sb_printf(why, "a world of %d nodes meets through a store: its launcher's (HIRNODE_STORE=host:port, or "
                     "MASTER_ADDR and MASTER_PORT) or the caller's (hn_runtime_create_store)", rt->nodes);
        st = HN_ERR_INVALID;
        goto undo;
    }
    if ((rt->dev = pick_backend(&cfg, need, 1, why)) == NULL) {
        st = HN_ERR_INVALID;
        goto undo;
    }
    if (rt->world > rt->nlocal) {
        hn_strbuf agreed;
        if (rt->dev->share == NULL) {
            hn_sb_printf(why, "the %s backend cannot share its memory with other processes (a world across "
                         "processes)", rt->dev->name);
            st = HN_ERR_UNSUPPORTED;
            goto undo;
        }
        hn_sb_init(&agreed);
        agreed_text(&cfg, rt->dev->name, &agreed);
        arena_bytes = set.shared_mem_bytes > 0 ? set.shared_mem_bytes
                                               : rt->dev->share->default_bytes(rt->world, set.host_mem_bytes);
        st = hn_procs_join(rt, cfg.rendezvous, agreed.data != NULL ? agreed.data : "", arena_bytes, &arena, &arena_bytes, why);
        hn_sb_free(&agreed);
        if (st != HN_OK)
            goto undo;
    }
    if ((st = hn_run_error_init(rt)) != HN_OK) {
        hn_sb_printf(why, "cannot make the world of %d ranks: %s", rt->world, hn_status_string(st));
        goto undo;
    }
    rt->ranks = hn_calloc((size_t)rt->nlocal, sizeof(*rt->ranks));
    rt->job_status = hn_calloc((size_t)rt->nlocal, sizeof(*rt->job_status));
    rt->all_ranks = hn_calloc((size_t)rt->world, sizeof(int));
    rt->devices = hn_calloc((size_t)rt->nlocal, sizeof(int));
    if (rt->ranks == NULL || rt->job_status == NULL || rt->all_ranks == NULL || rt->devices == NULL) {
        st = HN_ERR_NOMEM;
        goto undo;
    }
    for (int i = 0; i < rt->world; i++)
        rt->all_ranks[i] = i;
    for (int i = 0; i < rt->nlocal; i++)
        rt->devices[i] = cfg.devices != NULL ? cfg.devices[i] : rt->first + i;
    rt->cfg.devices = rt->devices; /* the copy: the caller's array may go */
    if (rt->nodes > 1 && (st = hn_procs_link(rt, link->store, link->host, why)) != HN_OK)
        goto undo;
    rt->compute = hn_device_compute(rt->dev);
    rt->profile = hn_profile_for(rt->dev, rt->world);
    rt->default_auto = hn_default_via_auto(rt->dev);
    memset(&ds, 0, sizeof(ds));
    ds.ndev = rt->nlocal;
    ds.host_delay_us = cfg.host_delay_us;
    ds.host_mem_bytes = set.host_mem_bytes;
    ds.seed = cfg.seed;
    ds.sink = &rt->sink;
    ds.ordinals = rt->devices;
    ds.first = rt->first;
    if (arena != NULL) {
        ds.arena = &arena;
        ds.arena_bytes = arena_bytes;
    }
    if ((st = rt->dev->init(&ds, &rt->dev_ctx)) != HN_OK) {
        hn_sb_printf(why, "cannot start the %s backend: %s", rt->dev->name, hn_status_string(st));
        goto undo;
    }
    if ((st = hn_pool_start(rt, &nthreads)) != HN_OK) {
        hn_sb_printf(why, "cannot start the rank threads: %s", hn_status_string(st));
        goto undo;
    }
    if ((st = hn_pool_exec(rt, hn_rank_init, NULL, 0)) != HN_OK) {
        hn_sb_printf(why, "cannot set up the %s devices: %s (the backend's error is logged)", rt->dev->name,
                     hn_status_string(st));
        goto undo;
    }
    if ((st = hn_teams_init(rt)) != HN_OK) {
        hn_sb_printf(why, "cannot set up the communicators: %s (the error is logged)", hn_status_string(st));
        goto undo;
    }
    if (hn_procs(rt) && (st = hn_procs_watch(rt)) != HN_OK) {
        hn_sb_printf(why, "cannot watch the other processes: %s", hn_status_string(st));
        goto undo;
    }
    /* which ranks share a device (NCCL and the latency path take one per
     * device): ordinals as every process numbers them, alike under one
     * launcher */
    if (hn_procs(rt) &&
        ((rt->world_devices = hn_calloc((size_t)rt->world, sizeof(int))) == NULL ||
         (st = hn_procs_xchg(rt, "the devices of the ranks", &rt->devices[0], sizeof(int), rt->world_devices)) !=
             HN_OK)) {
        hn_sb_printf(why, "cannot learn the other processes' devices: %s",
                     rt->world_devices == NULL ? "out of memory" : hn_runtime_error(rt));
        st = rt->world_devices == NULL ? HN_ERR_NOMEM : st;
        goto undo;
    }
    if (hn_procs(rt))
        HN_INFO("runtime: rank %d of a world of %d processes on the %s backend", rt->first, rt->world,
                rt->dev->name);
    else
        HN_INFO("runtime: %d rank%s on the %s backend", rt->nlocal, rt->nlocal == 1 ? "" : "s", rt->dev->name);
    *out = rt;
    return HN_OK;
undo:
    teardown(rt, nthreads);
    return st;
}

/* Creates through a store: a world across processes with no directory
 * meets first (hn_meet_store; node by node in a world across nodes), and
 * the runtime of the process that made a directory keeps it, to remove
 * it when destroyed. host: the store's, where known. */
static hn_status_t create_met(const hn_runtime_config *cfg, const hn_world_store *store, const char *host,
                              hn_runtime **out, hn_strbuf *why)
{
    hn_runtime_config c = *cfg;
    link_via link = {store, host};
    hn_status_t st = HN_OK;
    char dir[4096];
    int made = 0, nodes = 1;
    if (c.world > c.ndev && (st = hn_procs_nodes(c.world, &nodes, why)) != HN_OK)
        return st;
    if (c.world > c.ndev && (c.rendezvous == NULL || c.rendezvous[0] == '\0') &&
        (st = hn_meet_store(store, c.world, nodes > 1 ? c.rank / (c.world / nodes) : -1, c.rank % (c.world / nodes),
                            c.timeout_s > 0 ? c.timeout_s : 60, dir, sizeof(dir), &made, why)) == HN_OK)
        c.rendezvous = dir;
    if (st == HN_OK)
        st = create(&c, &link, out, why);
    if (st == HN_OK && made && ((*out)->made_rdv = hn_strdup(dir)) == NULL)
        HN_WARN("no memory to keep the rendezvous directory %s: it stays when the runtime goes", dir);
    else if (st != HN_OK && made)
        hn_meet_remove(dir);
    return st;
}

static int tcp_set(void *ctx, const char *key, const char *value) { return hn_tcp_store_set(ctx, key, value); }
static int tcp_get(void *ctx, const char *key, char *value, size_t cap, double timeout_s)
{
    return hn_tcp_store_get(ctx, key, value, cap, timeout_s);
}

/* hn_runtime_create's way: a world across processes given no directory,
 * or across nodes, meets through its launcher's store (HIRNODE_STORE, or
 * torchrun's MASTER_ADDR and MASTER_PORT + 1), served by rank 0's process
 * for the time of the meeting: once created, every process has been
 * there (and the nodes have their link). */
static hn_status_t create_any(const hn_runtime_config *cfg, hn_runtime **out, hn_strbuf *why)
{
    char host[256];
    int port, found, world, nodes = 1;
    hn_tcp_store *ts;
    hn_status_t st;
    if (cfg == NULL || out == NULL)
        return create(cfg, NULL, out, why);
    world = cfg->world == 0 ? cfg->ndev : cfg->world;
    if (world <= cfg->ndev)
        return create(cfg, NULL, out, why);
    if (world <= 256 && (st = hn_procs_nodes(world, &nodes, why)) != HN_OK)
        return st;
    if (nodes == 1 && cfg->rendezvous != NULL && cfg->rendezvous[0] != '\0')
        return create(cfg, NULL, out, why);
    if ((found = hn_tcp_store_address(host, sizeof(host), &port, why)) <= 0)
        return found < 0 ? HN_ERR_INVALID : create(cfg, NULL, out, why);
    if ((ts = hn_tcp_store_open(host, port, cfg->rank == 0, cfg->timeout_s > 0 ? cfg->timeout_s : 60, why)) ==
        NULL) {
        hn_sb_printf(why, " (rank %d of a world of %d meeting through its launcher's store)", cfg->rank, world);
        return HN_ERR_IO;
    }
    {
        hn_world_store store = {tcp_set, tcp_get, ts};
        st = create_met(cfg, &store, host, out, why);
    }
    hn_tcp_store_close(ts);
    return st;
}

hn_status_t hn_runtime_create_ex(const hn_runtime_config *cfg, hn_runtime **out, char **diag)
{
    hn_strbuf why;
    hn_status_t st;
    if (diag != NULL)
        *diag = NULL;
    hn_sb_init(&why);
    st = create_any(cfg, out, &why);
    if (st != HN_OK && diag != NULL)
        *diag = why.data != NULL ? hn_sb_take(&why) : hn_strdup(hn_status_string(st));
    hn_sb_free(&why);
    return st;
}

hn_status_t hn_runtime_create_store(const hn_runtime_config *cfg, const hn_world_store *store, hn_runtime **out,
                                    char **diag)
{
    hn_strbuf why;
    hn_status_t st;
    if (diag != NULL)
        *diag = NULL;
    hn_sb_init(&why);
    if (cfg == NULL || out == NULL || store == NULL || store->set == NULL || store->get == NULL) {
        hn_sb_printf(&why, "hn_runtime_create_store needs a configuration, a store with set and get, and out");
        st = HN_ERR_INVALID;
    } else {
        st = create_met(cfg, store, NULL, out, &why);
    }
    if (st != HN_OK && diag != NULL)
        *diag = why.data != NULL ? hn_sb_take(&why) : hn_strdup(hn_status_string(st));
    hn_sb_free(&why);
    return st;
}

hn_status_t hn_runtime_create(const hn_runtime_config *cfg, hn_runtime **out)
{
    hn_strbuf why;
    hn_status_t st;
    hn_sb_init(&why);
    if ((st = create_any(cfg, out, &why)) != HN_OK && why.data != NULL)
        HN_ERROR("%s", why.data); /* no caller to hand it to: logged, once */
    hn_sb_free(&why);
    return st;
}

void hn_runtime_destroy(hn_runtime *rt)
{
    char *made;
    if (rt == NULL)
        return;
    made = rt->made_rdv;
    teardown(rt, rt->nlocal);
    if (made != NULL) { /* the world's meeting place, made here (hn_runtime_create_store) */
        hn_meet_remove(made);
        hn_free(made);
    }
}

/* (a NULL runtime answers as none: no rank, no backend) */
int hn_runtime_size(const hn_runtime *rt) { return rt != NULL ? rt->nlocal : 0; }
int hn_runtime_world(const hn_runtime *rt) { return rt != NULL ? rt->world : 0; }
int hn_runtime_first_rank(const hn_runtime *rt) { return rt != NULL ? rt->first : -1; }
const char *hn_runtime_backend(const hn_runtime *rt) { return rt != NULL ? rt->dev->name : "none"; }
hn_device_kind hn_runtime_device_kind(const hn_runtime *rt) { return rt != NULL ? rt->dev->kind : HN_DEVICE_KIND_NONE; }

int hn_runtime_device(const hn_runtime *rt, int rank)
{
    return rt != NULL ? hn_runtime_device_of(rt, rank) : -1;
}

/* ---- device memory on a rank's thread ---- */

typedef struct mem_job {
    int rank, op;
    size_t bytes;
    void *ptr;
    void *dst;
    const void *src;
    size_t free_bytes, total_bytes;
} mem_job;

static hn_status_t mem_on_rank(hn_rank *r, void *arg)
{
    mem_job *j = arg;
    hn_runtime *rt = r->rt;
    if (r->rank != j->rank)
        return HN_OK;
    switch (j->op) {
    case 0: return rt->dev->mem_alloc(rt->dev_ctx, r->rank, j->bytes, &j->ptr);
    case 1: rt->dev->mem_free(rt->dev_ctx, r->rank, j->ptr); return HN_OK;
    case 2: return rt->dev->copy_to_device(rt->dev_ctx, r->rank, j->dst, j->src, j->bytes);
    case 3: return rt->dev->copy_to_host(rt->dev_ctx, r->rank, j->dst, j->src, j->bytes);
    default: return rt->dev->mem_info(rt->dev_ctx, r->rank, &j->free_bytes, &j->total_bytes);
    }
}

static hn_status_t mem_call(hn_runtime *rt, mem_job *j)
{
    hn_status_t st;
    if (rt == NULL || !hn_runtime_drives(rt, j->rank))
        return HN_ERR_INVALID;
    /* memory calls need the devices idle: launches in flight first */
    if ((st = hn_runtime_finish_launches(rt)) != HN_OK)
        return st;
    return hn_pool_exec(rt, mem_on_rank, j, 0);
}

hn_status_t hn_runtime_mem_info(hn_runtime *rt, int rank, size_t *free_bytes, size_t *total_bytes)
{
    mem_job j = {rank, 4, 0, NULL, NULL, NULL, 0, 0};
    hn_status_t st;
    if (free_bytes == NULL || total_bytes == NULL)
        return HN_ERR_INVALID;
    if ((st = mem_call(rt, &j)) == HN_OK) {
        *free_bytes = j.free_bytes;
        *total_bytes = j.total_bytes;
    }
    return st;
}

hn_status_t hn_runtime_alloc(hn_runtime *rt, int rank, size_t bytes, void **ptr)
{
    mem_job j = {rank, 0, bytes, NULL, NULL, NULL, 0, 0};
    hn_status_t st;
    if (ptr == NULL)
        return HN_ERR_INVALID;
    st = mem_call(rt, &j);
    /* the programs' cached buffers first give way */
    if (st == HN_ERR_NOMEM && hn_prepare_release(rt, NULL) > 0)
        st = mem_call(rt, &j);
    /* the block is known from here on: bindings into it are checked against
     * its end (none of 0 bytes: CUDA may give NULL, which free ignores) */
    if (st == HN_OK && j.ptr != NULL && (st = hn_bind_note_block(&rt->ranks[rank - rt->first], j.ptr, bytes)) != HN_OK) {
        mem_job undo = {rank, 1, 0, j.ptr, NULL, NULL, 0, 0};
        (void)mem_call(rt, &undo);
    }
    if (st == HN_OK) {
        *ptr = j.ptr;
    } else if (st == HN_ERR_NOMEM) {
        size_t free_b = 0, total_b = 0;
        (void)hn_runtime_mem_info(rt, rank, &free_b, &total_b);
        snprintf(rt->err_text, sizeof(rt->err_text), "cannot allocate %zu bytes on device %d: %zu of %zu bytes free",
                 bytes, rank, free_b, total_b);
    }
    return st;
}

void hn_runtime_free(hn_runtime *rt, int rank, void *ptr)
{
    mem_job j = {rank, 1, 0, ptr, NULL, NULL, 0, 0};
    if (rt == NULL || ptr == NULL || !hn_runtime_drives(rt, rank))
        return;
    /* the launches in flight first (a failure of theirs is kept for the
     * next sync); then only what hn_runtime_alloc gave out on that rank,
     * once — freed whether they failed or not */
    hn_runtime_collect_launches(rt);
    if (!hn_bind_drop_block(&rt->ranks[rank - rt->first], ptr)) {
        HN_WARN("hn_runtime_free: %p is no block of hn_runtime_alloc on rank %d (freed already?): ignored", ptr,
                rank);
        return;
    }
    (void)hn_pool_exec(rt, mem_on_rank, &j, 0);
}

/* a copy of n bytes at device address p of rank: within p's block when p
 * points into one of hn_runtime_alloc */
static hn_status_t copy_call(hn_runtime *rt, mem_job *j, const void *p, size_t n)
{
    if (rt == NULL || !hn_runtime_drives(rt, j->rank) || (n > 0 && (j->dst == NULL || j->src == NULL)))
        return HN_ERR_INVALID;
    if (hn_bind_fits(&rt->ranks[j->rank - rt->first], p, n) == 0) {
        snprintf(rt->err_text, sizeof(rt->err_text),
                 "hirnode: error: a copy of %zu bytes at %p on rank %d runs past the end of its block from "
                 "hn_runtime_alloc", n, p, j->rank);
        return HN_ERR_INVALID;
    }
    return mem_call(rt, j);
}

hn_status_t hn_runtime_upload(hn_runtime *rt, int rank, void *dst, const void *src, size_t n)
{
    mem_job j = {rank, 2, n, NULL, dst, src, 0, 0};
    return copy_call(rt, &j, dst, n);
}

hn_status_t hn_runtime_download(hn_runtime *rt, int rank, void *dst, const void *src, size_t n)
{
    mem_job j = {rank, 3, n, NULL, dst, src, 0, 0};
    return copy_call(rt, &j, src, n);
}

/* ---- runs and launches ---- */

hn_status_t hn_runtime_run(hn_runtime *rt, const hn_program *p, const hn_run_args *args)
{
    hn_resolved rs = {0};
    hn_status_t st;
    if (rt == NULL || p == NULL || args == NULL)
        return HN_ERR_INVALID;
    if ((st = hn_runtime_enter(rt, 0, 0)) != HN_OK || (st = hn_runtime_resolve(rt, p, args, &rs)) != HN_OK)
        return st;
    st = hn_runtime_run_bound(rt, p, rs.params, (void *const *const *)rs.io, 0);
    hn_resolved_free(&rs);
    return st;
}

hn_status_t hn_runtime_launch(hn_runtime *rt, const hn_program *p, const hn_run_args *args, void *const *streams)
{
    hn_resolved rs = {0};
    hn_status_t st;
    if (rt == NULL || p == NULL || args == NULL)
        return HN_ERR_INVALID;
    if ((st = hn_runtime_enter(rt, p->uid, 1)) != HN_OK || (st = hn_runtime_resolve(rt, p, args, &rs)) != HN_OK)
        return st;
    st = hn_runtime_launch_bound(rt, p, rs.params, (void *const *const *)rs.io, streams);
    hn_resolved_free(&rs);
    return st;
}

hn_status_t hn_runtime_sync(hn_runtime *rt)
{
    hn_status_t st;
    if (rt == NULL)
        return HN_ERR_INVALID;
    st = hn_runtime_finish_launches(rt);
    hn_graphs_collect(rt); /* what the caller's destroyed graphs held */
    return st != HN_OK ? st : hn_runtime_take_pending(rt);
}

static hn_status_t query_on_rank(hn_rank *r, void *arg)
{
    hn_status_t st = HN_OK;
    int *busy = arg;
    hn_dstream *s[HN_MAX_STREAMS + 1];
    int n = 0;
    s[n++] = r->caller;
    for (int k = 0; k < HN_MAX_STREAMS; k++)
        if (r->streams[k] != NULL)
            s[n++] = r->streams[k];
    for (int i = 0; i < n && st == HN_OK; i++)
        if ((st = r->rt->dev->stream_query(s[i])) == HN_ERR_BUSY) {
            __atomic_store_n(busy, 1, __ATOMIC_RELAXED);
            st = HN_OK;
        }
    /* on an embedder's stream: up to ran_done, without touching it */
    if (st == HN_OK && r->adopted != NULL && (st = r->rt->dev->event_query(r->ran_done)) == HN_ERR_BUSY) {
        __atomic_store_n(busy, 1, __ATOMIC_RELAXED);
        st = HN_OK;
    }
    return st;
}

hn_status_t hn_runtime_query(hn_runtime *rt)
{
    int busy = 0;
    hn_status_t st;
    if (rt == NULL)
        return HN_ERR_INVALID;
    if (rt->inflight == 0)
        return hn_runtime_take_pending(rt);
    if (__atomic_load_n(rt->abort_flag, __ATOMIC_ACQUIRE)) /* failed: collect */
        return hn_runtime_finish_launches(rt);
    st = hn_pool_exec(rt, query_on_rank, &busy, 0);
    if (st != HN_OK)
        return hn_runtime_finish_launches(rt);
    return busy ? HN_ERR_BUSY : hn_runtime_finish_launches(rt);
}

void hn_runtime_forget(hn_runtime *rt, const hn_program *p)
{
    if (rt == NULL || p == NULL)
        return;
    hn_runtime_collect_launches(rt); /* its work first */
    hn_cache_forget(rt, p, HN_FORGET_BUFFERS | HN_FORGET_LOWERED, "hn_runtime_forget gave its program's buffers back");
}

/* ---- streams for embedders without their own ---- */

typedef struct stream_job {
    int rank, destroy;
    void *native;
} stream_job;

static hn_status_t stream_on_rank(hn_rank *r, void *arg)
{
    stream_job *j = arg;
    hn_runtime *rt = r->rt;
    hn_dstream *s;
    hn_status_t st;
    if (r->rank != j->rank)
        return HN_OK;
    if (j->destroy) {
        for (int i = 0; i < r->nuser_streams; i++)
            if (rt->dev->stream_native(r->user_streams[i]) == j->native) {
                if (r->adopted != NULL && r->adopted_native == j->native) {
                    hn_teams_forget_stream(rt, r->rank, r->adopted);
                    rt->dev->stream_release(r->adopted);
                    r->adopted = NULL;
                }
                rt->dev->stream_destroy(r->user_streams[i]);
                r->user_streams[i] = r->user_streams[--r->nuser_streams];
                return HN_OK;
            }
        return HN_ERR_INVALID;
    }
    if (hn_grow((void **)&r->user_streams, &r->user_streams_cap, r->nuser_streams, sizeof(*r->user_streams)) != 0)
        return HN_ERR_NOMEM;
    if ((st = rt->dev->stream_create(rt->dev_ctx, r->rank, &s)) != HN_OK)
        return st;
    r->user_streams[r->nuser_streams++] = s;
    j->native = rt->dev->stream_native(s);
    return HN_OK;
}

hn_status_t hn_runtime_stream_create(hn_runtime *rt, int rank, void **stream)
{
    stream_job j = {rank, 0, NULL};
    hn_status_t st;
    if (rt == NULL || stream == NULL || !hn_runtime_drives(rt, rank))
        return HN_ERR_INVALID;
    if ((st = hn_pool_exec(rt, stream_on_rank, &j, 0)) == HN_OK)
        *stream = j.native;
    return st;
}

void hn_runtime_stream_destroy(hn_runtime *rt, int rank, void *stream)
{
    stream_job j = {rank, 1, stream};
    if (rt == NULL || stream == NULL || !hn_runtime_drives(rt, rank))
        return;
    hn_runtime_collect_launches(rt); /* its work first */
    (void)hn_pool_exec(rt, stream_on_rank, &j, 0);
}
