/* The runtime's settings: one typed table of name, variable, default, kind
 * and range, help. Values come from HIRNODE_* variables, read strictly by
 * one getter per kind with the options' messages; a runtime refuses to
 * start on a bad one; the CLI's flags override them and `hirnode info`
 * prints the effective values. */
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "settings.h"

#define WORDS(...) ((const char *const[]){__VA_ARGS__, NULL})
#define WORD(n, e, d, w, h) {n, e, d, HN_SET_WORD, WORDS w, 0, 0, 0, 0, h}
#define FLAG(n, e, d, h) {n, e, d, HN_SET_FLAG, NULL, 0, 1, 0, 0, h}
#define INT(n, e, d, lo, hi, h) {n, e, d, HN_SET_INT, NULL, lo, hi, 0, 0, h}
#define NUMBER(n, e, d, lo, hi, h) {n, e, d, HN_SET_NUMBER, NULL, 0, 0, lo, hi, h}

static const hn_setting settings[] = {
    WORD("backend", "HIRNODE_BACKEND", "auto", ("auto", "cuda", "host"), "device backend: auto, cuda or host"),
    INT("streams", "HIRNODE_STREAMS", "3", 1, HN_MAX_STREAMS, "value of `nstreams` in programs (1-16)"),
    NUMBER("timeout", "HIRNODE_TIMEOUT", "60", 0.001, 1e6, "seconds any wait may last before the run fails"),
    NUMBER("host_delay_us", "HIRNODE_HOST_DELAY_US", "0", 0, 1e6,
           "host backend: random delay before each piece of stream work, microseconds"),
    INT("host_mem_mib", "HIRNODE_HOST_MEM_MIB", "0", 0, (int64_t)1 << 30,
        "host backend: memory of each emulated device, MiB (0: half the machine's, shared)"),
    INT("shared_mem_mib", "HIRNODE_SHARED_MEM_MIB", "0", 0, (int64_t)1 << 30,
        "a world across processes: each rank's device memory the others can reach, MiB, made when the runtime "
        "starts (0: the host backend's memory per device; cuda: 4096)"),
    INT("seed", "HIRNODE_SEED", "1", 0, INT64_MAX, "seed of generated inputs and of the random delays"),
    WORD("log", "HIRNODE_LOG", "warn", ("off", "error", "warn", "info", "debug", "trace"),
         "log level: off, error, warn, info, debug, trace"),
    FLAG("nccl_blocking", "HIRNODE_NCCL_BLOCKING", "1",
         "nccl: 1 blocking communicators (fast issue; the watchdog aborts a stuck one), 0 non-blocking"),
    WORD("default_via", "HIRNODE_DEFAULT_VIA", "auto", ("auto", "nccl"),
         "cuda: collectives without `via`: auto (NCCL or p2p by measured crossovers) or nccl"),
    FLAG("graphs", "HIRNODE_GRAPHS", "0",
         "1: repeated runs and launches of one configuration are captured once and replayed as graphs"),
    WORD("replay", "HIRNODE_REPLAY", "bells", ("bells", "jobs", "caller"),
         "how a replay launches every rank's graph: bells (rank threads rung by doorbells they spin on, rank 0 "
         "from the caller's thread), jobs (a job of every rank thread), caller (one after another from the "
         "caller's thread)"),
    WORD("auto_ll", "HIRNODE_AUTO_LL", "auto", ("auto", "1", "0"),
         "via auto picks the latency path (via ll) below its crossovers: auto (once they are measured on GPUs, "
         "src/model/cost.c), 1 (always), 0 (never)"),
    FLAG("ll_probe", "HIRNODE_LL_PROBE", "0",
         "1: the latency path's kernels stamp each call, and every member prints where its calls' time went when "
         "its team goes (diagnostics)"),
    INT("nccl_max_ctas", "HIRNODE_NCCL_MAX_CTAS", "0", 0, 128,
        "nccl: most thread blocks (SMs) one collective takes, e.g. 8 inside pipelines (0: NCCL's default)"),
    WORD("p2p_sync", "HIRNODE_P2P_SYNC", "events", ("events", "flags"),
         "p2p: how devices wait for each other: events (cross-device events) or flags (stream memory operations)"),
    INT("p2p_pieces", "HIRNODE_P2P_PIECES", "4", 1, 64, "p2p: most pieces of a reduce-scatter ring step (1-64)"),
    INT("p2p_ag_pieces", "HIRNODE_P2P_AG_PIECES", "1", 1, 64,
        "p2p: most pieces of an allgather ring step (1: whole steps)"),
    INT("p2p_piece_kib", "HIRNODE_P2P_PIECE_KIB", "4096", 1, (int64_t)1 << 30, "p2p: smallest piece of a ring step, KiB"),
    INT("p2p_lanes", "HIRNODE_P2P_LANES", "1", 1, 4, "p2p: side streams (copy lanes) per member (1-4)"),
    INT("p2p_small_kib", "HIRNODE_P2P_SMALL_KIB", "256", 0, 65536,
        "p2p: an allreduce of at most this many KiB per member crosses once (every member's input pushed into "
        "slots of its peers') instead of a reduce-scatter and an allgather ring; 0: the rings always"),
    WORD("p2p_graph_copy", "HIRNODE_P2P_GRAPH_COPY", "engine", ("engine", "kernel"),
         "p2p: copies inside captured graphs by the copy engines (engine) or by SM kernels (kernel: a graph "
         "then waits for its peers on no copy-engine queue)"),
    {"profile", "HIRNODE_PROFILE", "", HN_SET_PATH, NULL, 0, 0, 0, 0,
     "the machine profile `hirnode tune` wrote (default: $XDG_CACHE_HOME/hirnode/profile-<GPU>-x<N>.json)"},
    {"fault", "HIRNODE_FAULT", "", HN_SET_FAULTS, NULL, 0, 0, 0, 0,
     "injected faults: RANK:LINE[:OCCURRENCE]:KIND[:MS],... with KIND issue, async, trap, comm, stop, slow, oom, "
     "skip, and with one rank per process (hirnode run --procs) kill (SIGKILL) or sigstop (SIGSTOP)"},
    NUMBER("watchdog_grace_s", "HIRNODE_WATCHDOG_GRACE_S", "1", 0, 1e6,
           "seconds past the timeout before the watchdog names the ranks still busy and aborts the run"),
    NUMBER("spin_us", "HIRNODE_SPIN_US", "500", 0, 1e7,
           "microseconds idle rank threads spin for the next run before sleeping"),
    FLAG("join_spin", "HIRNODE_JOIN_SPIN", "1",
         "1: the caller spins (yielding) until its run ends; 0: it sleeps after spin_us"),
    INT("world", "HIRNODE_WORLD", "0", 0, 256,
        "ranks of the whole run across processes (0: the ranks of this process; more needs process mode)"),
    INT("rank", "HIRNODE_RANK", "0", 0, 255, "the first rank this process drives in the world"),
    WORD("hier_allreduce", "HIRNODE_HIER_ALLREDUCE", "auto", ("auto", "1", "0"),
         "across nodes, an allreduce of the whole world as reduce-scatter inside each node, allreduce across, "
         "allgather inside: auto (where the model finds it faster), 1 (always), 0 (never)"),
    INT("nodes", "HIRNODE_NODES", "0", 0, 256,
        "nodes of a world across processes: rank r on node r / (world / nodes); the nodes meet through the "
        "store and talk through NCCL (0: torchrun's WORLD_SIZE / LOCAL_WORLD_SIZE, Slurm's SLURM_NNODES, else 1)"),
    {"rendezvous", "HIRNODE_RENDEZVOUS", "", HN_SET_PATH, NULL, 0, 0, 0, 0,
     "a directory every process of a world larger than one process reaches (process mode)"},
    {"store", "HIRNODE_STORE", "", HN_SET_ADDRESS, NULL, 0, 0, 0, 0,
     "host:port where rank 0's process serves the store a world of processes meets through when no "
     "rendezvous directory is given (default: MASTER_ADDR, port MASTER_PORT + 1, when both are set)"},
};

int hn_settings_count(void) { return HN_ARRAY_LEN(settings); }

const hn_setting *hn_setting_at(int i) { return &settings[i]; }

const hn_setting *hn_setting_find(const char *name)
{
    for (int i = 0; i < HN_ARRAY_LEN(settings); i++)
        if (strcmp(settings[i].name, name) == 0)
            return &settings[i];
    return NULL;
}

static const char *text_of(const hn_setting *s)
{
    const char *env = getenv(s->env);
    return env != NULL && *env ? env : s->def;
}

const char *hn_setting_get(const char *name)
{
    const hn_setting *s = hn_setting_find(name);
    return s != NULL ? text_of(s) : NULL;
}

/* The value of `text` by s's kind into the out of its kind; HN_ERR_INVALID
 * with the line into err when it is not one. */
typedef union setting_value {
    int64_t i;
    double d;
    const char *w;
    hn_fault_plan *faults;
} setting_value;

static hn_status_t parse(const hn_setting *s, const char *text, setting_value *v, hn_strbuf *err)
{
    static const char *const bits[] = {"0", "1"};
    int k;
    switch (s->kind) {
    case HN_SET_WORD: {
        int n = 0;
        while (s->words[n] != NULL)
            n++;
        if (hn_parse_word(s->env, text, s->words, n, &k, err) != HN_OK)
            return HN_ERR_INVALID;
        v->w = s->words[k];
        return HN_OK;
    }
    case HN_SET_FLAG:
        if (hn_parse_word(s->env, text, bits, 2, &k, err) != HN_OK)
            return HN_ERR_INVALID;
        v->i = k;
        return HN_OK;
    case HN_SET_INT: return hn_parse_int64(s->env, text, s->lo, s->hi, &v->i, err);
    case HN_SET_NUMBER: return hn_parse_double(s->env, text, s->dlo, s->dhi, &v->d, err);
    case HN_SET_FAULTS: {
        char why[256];
        hn_fault_plan plan;
        if (hn_fault_parse(text, &plan, why, sizeof(why)) != HN_OK) {
            if (err != NULL)
                hn_sb_printf(err, "%s: %s", s->env, why);
            return HN_ERR_INVALID;
        }
        if (v->faults != NULL)
            *v->faults = plan;
        return HN_OK;
    }
    case HN_SET_PATH:
        for (const char *c = text; *c != '\0'; c++)
            if ((unsigned char)*c < 0x20 || *c == 0x7f || c - text >= 4095) {
                if (err != NULL)
                    hn_sb_printf(err, "%s: expected a file's path (below 4096 bytes, no control characters)", s->env);
                return HN_ERR_INVALID;
            }
        v->w = text;
        return HN_OK;
    case HN_SET_ADDRESS: {
        const char *colon = strrchr(text, ':');
        char *end;
        long port = colon != NULL ? strtol(colon + 1, &end, 10) : 0;
        int ok = text[0] == '\0' ||
                 (colon != NULL && colon > text && colon - text < 256 && colon[1] >= '0' && colon[1] <= '9' &&
                  *end == '\0' && port >= 1 && port <= 65535);
        for (const char *c = text; ok && c < colon; c++)
            ok = (unsigned char)*c > 0x20 && *c != 0x7f;
        if (!ok) {
            if (err != NULL)
                hn_sb_printf(err, "%s: expected host:port (a port from 1 to 65535)", s->env);
            return HN_ERR_INVALID;
        }
        v->w = text;
        return HN_OK;
    }
    }
    return HN_ERR_INVALID;
}

hn_status_t hn_setting_check(const hn_setting *s, hn_strbuf *err)
{
    setting_value v;
    memset(&v, 0, sizeof(v));
    return parse(s, text_of(s), &v, err);
}

/* The value of setting `name`, which must be of `kind`: the variable's,
 * else (with the line into err) the default's. */
static hn_status_t get(const char *name, hn_setting_kind kind, setting_value *v, hn_strbuf *err)
{
    const hn_setting *s = hn_setting_find(name);
    hn_status_t st;
    if (s == NULL || s->kind != kind) {
        if (err != NULL)
            hn_sb_printf(err, "no setting '%s' of that kind", name);
        return HN_ERR_INVALID;
    }
    if ((st = parse(s, text_of(s), v, err)) != HN_OK)
        (void)parse(s, s->def, v, NULL); /* the table's defaults parse */
    return st;
}

hn_status_t hn_setting_word(const char *name, const char **out, hn_strbuf *err)
{
    setting_value v = {.w = NULL};
    hn_status_t st = get(name, HN_SET_WORD, &v, err);
    *out = v.w;
    return st;
}

hn_status_t hn_setting_path(const char *name, const char **out, hn_strbuf *err)
{
    setting_value v = {.w = NULL};
    hn_status_t st = get(name, HN_SET_PATH, &v, err);
    *out = v.w;
    return st;
}

hn_status_t hn_setting_address(const char *name, const char **out, hn_strbuf *err)
{
    setting_value v = {.w = NULL};
    hn_status_t st = get(name, HN_SET_ADDRESS, &v, err);
    *out = v.w;
    return st;
}

hn_status_t hn_setting_flag(const char *name, int *out, hn_strbuf *err)
{
    setting_value v = {.i = 0};
    hn_status_t st = get(name, HN_SET_FLAG, &v, err);
    *out = (int)v.i;
    return st;
}

hn_status_t hn_setting_int(const char *name, int64_t *out, hn_strbuf *err)
{
    setting_value v = {.i = 0};
    hn_status_t st = get(name, HN_SET_INT, &v, err);
    *out = v.i;
    return st;
}

hn_status_t hn_setting_number(const char *name, double *out, hn_strbuf *err)
{
    setting_value v = {.d = 0};
    hn_status_t st = get(name, HN_SET_NUMBER, &v, err);
    *out = v.d;
    return st;
}

hn_status_t hn_setting_faults(const char *name, hn_fault_plan *out, hn_strbuf *err)
{
    setting_value v = {.faults = out};
    memset(out, 0, sizeof(*out));
    return get(name, HN_SET_FAULTS, &v, err);
}

hn_status_t hn_settings_check(hn_strbuf *err)
{
    hn_status_t st = HN_OK;
    for (int i = 0; i < HN_ARRAY_LEN(settings); i++) {
        size_t before = err != NULL ? err->len : 0;
        if (hn_setting_check(&settings[i], err) != HN_OK) {
            st = HN_ERR_INVALID;
            if (err != NULL && err->len > before)
                hn_sb_append(err, "\n");
        }
    }
    return st;
}

void hn_runtime_config_default(hn_runtime_config *cfg)
{
    int64_t streams, seed, world, rank;
    /* a bad variable leaves its default here; hn_runtime_create refuses it */
    memset(cfg, 0, sizeof(*cfg));
    cfg->ndev = 1;
    (void)hn_setting_word("backend", &cfg->backend, NULL);
    (void)hn_setting_int("streams", &streams, NULL);
    cfg->nstreams = (int)streams;
    (void)hn_setting_number("timeout", &cfg->timeout_s, NULL);
    (void)hn_setting_number("host_delay_us", &cfg->host_delay_us, NULL);
    (void)hn_setting_int("seed", &seed, NULL);
    cfg->seed = (uint64_t)seed;
    (void)hn_setting_flag("graphs", &cfg->graphs, NULL);
    (void)hn_setting_int("world", &world, NULL);
    (void)hn_setting_int("rank", &rank, NULL);
    cfg->world = (int)world;
    cfg->rank = (int)rank;
    (void)hn_setting_path("rendezvous", &cfg->rendezvous, NULL);
    if (cfg->rendezvous != NULL && *cfg->rendezvous == '\0')
        cfg->rendezvous = NULL;
}

hn_status_t hn_settings_read_runtime(int world, hn_runtime_settings *out, hn_strbuf *err)
{
    int64_t mib;
    char why[256];
    memset(out, 0, sizeof(*out));
    if (hn_settings_check(err) != HN_OK)
        return HN_ERR_INVALID;
    (void)hn_setting_number("spin_us", &out->spin_us, NULL);
    (void)hn_setting_number("watchdog_grace_s", &out->watchdog_grace_s, NULL);
    (void)hn_setting_flag("join_spin", &out->join_spin, NULL);
    (void)hn_setting_word("replay", &out->replay, NULL);
    (void)hn_setting_int("host_mem_mib", &mib, NULL);
    out->host_mem_bytes = (uint64_t)mib > (SIZE_MAX >> 20) ? SIZE_MAX : (size_t)mib << 20;
    (void)hn_setting_int("shared_mem_mib", &mib, NULL);
    out->shared_mem_bytes = (uint64_t)mib > (SIZE_MAX >> 20) ? SIZE_MAX : (size_t)mib << 20;
    (void)hn_setting_faults("fault", &out->faults, NULL);
    if (hn_fault_plan_check_ranks(&out->faults, world, why, sizeof(why)) != HN_OK) {
        hn_sb_printf(err, "HIRNODE_FAULT: %s\n", why);
        return HN_ERR_INVALID;
    }
    return HN_OK;
}
