/* The runtime's settings: one table of name, variable, default and help.
 * Values come from HIRNODE_* variables; the CLI's flags override them and
 * `hirnode info` prints the effective values. */
#include <stdlib.h>
#include <string.h>

#include "config.h"

static const hn_setting settings[] = {
    {"backend", "HIRNODE_BACKEND", "auto", "device backend: auto, cuda or host"},
    {"streams", "HIRNODE_STREAMS", "3", "value of `nstreams` in programs (1-16)"},
    {"timeout", "HIRNODE_TIMEOUT", "60", "seconds any wait may last before the run fails"},
    {"host_delay_us", "HIRNODE_HOST_DELAY_US", "0",
     "host backend: random delay before each piece of stream work, microseconds"},
    {"host_mem_mib", "HIRNODE_HOST_MEM_MIB", "0",
     "host backend: memory of each emulated device, MiB (0: half the machine's, shared)"},
    {"seed", "HIRNODE_SEED", "1", "seed of generated inputs and of the random delays"},
    {"log", "HIRNODE_LOG", "warn", "log level: off, error, warn, info, debug, trace"},
    {"nccl_blocking", "HIRNODE_NCCL_BLOCKING", "1",
     "nccl: 1 blocking communicators (fast issue; the watchdog aborts a stuck one), 0 non-blocking"},
    {"default_via", "HIRNODE_DEFAULT_VIA", "auto",
     "cuda: collectives without `via`: auto (NCCL or p2p by measured crossovers) or nccl"},
    {"graphs", "HIRNODE_GRAPHS", "0",
     "1: repeated runs and launches of one configuration are captured once and replayed as graphs"},
    {"replay_threads", "HIRNODE_REPLAY_THREADS", "0",
     "1: a replay launches every rank's graph at once from the rank threads; 0: one after another from the "
     "caller's thread"},
    {"auto_ll", "HIRNODE_AUTO_LL", "0",
     "1: via auto may pick the latency path (via ll) below its crossovers, estimates until measured on 2 GPUs"},
    {"nccl_max_ctas", "HIRNODE_NCCL_MAX_CTAS", "0",
     "nccl: most thread blocks (SMs) one collective takes, e.g. 8 inside pipelines (0: NCCL's default)"},
    {"p2p_sync", "HIRNODE_P2P_SYNC", "events",
     "p2p: how devices wait for each other: events (cross-device events) or flags (stream memory operations)"},
    {"p2p_pieces", "HIRNODE_P2P_PIECES", "4", "p2p: most pieces of a reduce-scatter ring step (1-64)"},
    {"p2p_ag_pieces", "HIRNODE_P2P_AG_PIECES", "1", "p2p: most pieces of an allgather ring step (1: whole steps)"},
    {"p2p_piece_kib", "HIRNODE_P2P_PIECE_KIB", "4096", "p2p: smallest piece of a ring step, KiB"},
    {"p2p_lanes", "HIRNODE_P2P_LANES", "1", "p2p: side streams (copy lanes) per member (1-4)"},
    {"profile", "HIRNODE_PROFILE", "",
     "the machine profile `hirnode tune` wrote (default: $XDG_CACHE_HOME/hirnode/profile-<GPU>-x<N>.json)"},
    {"fault", "HIRNODE_FAULT", "",
     "injected faults: RANK:LINE[:OCCURRENCE]:KIND[:MS],... with KIND issue, async, trap, comm, stop, slow, oom"},
    {"watchdog_grace_s", "HIRNODE_WATCHDOG_GRACE_S", "5",
     "seconds past the timeout before the watchdog names the ranks still busy and aborts the run"},
    {"spin_us", "HIRNODE_SPIN_US", "500",
     "microseconds idle rank threads spin for the next run before sleeping"},
    {"join_spin", "HIRNODE_JOIN_SPIN", "1",
     "1: the caller spins (yielding) until its run ends; 0: it sleeps after spin_us"},
};

int hn_settings_count(void) { return HN_ARRAY_LEN(settings); }

const hn_setting *hn_setting_at(int i) { return &settings[i]; }

const char *hn_setting_get(const char *name)
{
    for (int i = 0; i < HN_ARRAY_LEN(settings); i++)
        if (strcmp(settings[i].name, name) == 0) {
            const char *env = getenv(settings[i].env);
            return env != NULL && *env ? env : settings[i].def;
        }
    return NULL;
}

void hn_runtime_config_default(hn_runtime_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->ndev = 1;
    cfg->backend = hn_setting_get("backend");
    cfg->nstreams = atoi(hn_setting_get("streams"));
    cfg->timeout_s = atof(hn_setting_get("timeout"));
    cfg->host_delay_us = atof(hn_setting_get("host_delay_us"));
    cfg->seed = strtoull(hn_setting_get("seed"), NULL, 10);
    cfg->graphs = atoi(hn_setting_get("graphs")) != 0;
}
