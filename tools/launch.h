/* Process mode from the command line (launch.c): `--procs N` makes the
 * command (run, bench collectives, bench overlap) a launcher of N worker
 * processes of the same command line, one rank of the world each. */
#ifndef HN_TOOLS_LAUNCH_H
#define HN_TOOLS_LAUNCH_H

#include "options.h"

struct hn_runtime_config;

/* --procs and --rendezvous as a command's options set them. */
typedef struct hn_cli_procs {
    int n;                  /* --procs N: ranks, one per process; 0: not given */
    const char *rendezvous; /* --rendezvous DIR; NULL: the launcher makes one under /tmp */
    int launcher;           /* set by hn_cli_procs_setup: this process starts the workers */
} hn_cli_procs;

#define HN_PROCS_OPTIONS(p)                                                                                   \
    HN_INT("--procs", "N", &(p)->n, 1, 256,                                                                    \
           "process mode: N ranks, one per process (--gpus, if given, must be N):\n"                          \
           "N workers of this command; rank 0's output as it comes, another\n"                                  \
           "rank's at the end when it or rank 0 failed"),                                                     \
        HN_TEXT("--rendezvous", "DIR", &(p)->rendezvous,                                                       \
                "--procs: the directory where the workers meet (yours, not writable\n"                          \
                "by others; default: a fresh one under /tmp, removed at the end)")

/* After a command's options are parsed, with cfg->ndev 0 where --gpus was
 * not given (set it to 0 before parsing). Without --procs: cfg->ndev
 * becomes ndev_default when it is 0. With --procs N: --gpus must be N and
 * --devices (NULL: the command has none) list N ordinals; in the launcher
 * cfg->ndev becomes N and p->launcher 1 (call hn_cli_launch once the
 * command has checked what it can check once); in a worker
 * (HIRNODE_WORKER=1, which the launcher sets) cfg->ndev becomes 1 and
 * devices its rank's ordinal. Returns -1 to go on, else the exit code
 * after a usage error on stderr ("NAME: ..."). */
int hn_cli_procs_setup(const char *name, hn_cli_procs *p, struct hn_runtime_config *cfg, hn_cli_devices *devices,
                       int ndev_default);

/* A process another launcher started (torchrun: RANK, WORLD_SIZE > 1,
 * LOCAL_RANK) that says nothing of its own ranks (cfg->ndev 0, no
 * --devices, no --procs, no HIRNODE_WORLD): one rank of that world —
 * cfg->world WORLD_SIZE, cfg->rank RANK, cfg->ndev 1, on device
 * LOCAL_RANK (0 when unset); the runtime meets the others through its
 * launcher's store (MASTER_ADDR, HIRNODE_STORE). Before
 * hn_cli_procs_setup. Returns -1 to go on (joined or not), else the exit
 * code after a usage error on stderr. */
int hn_cli_join_launcher(const char *name, const hn_cli_procs *p, struct hn_runtime_config *cfg,
                         hn_cli_devices *devices);

/* The launcher: starts p->n workers, each /proc/self/exe with argv (the
 * command line as given) and HIRNODE_WORLD, HIRNODE_RANK,
 * HIRNODE_RENDEZVOUS and HIRNODE_WORKER=1 in its environment, in a
 * process group of their own that dies with the launcher. Rank 0 writes
 * to the launcher's stdout and stderr; the others' output is kept and
 * printed ("rank R: ...") when rank 0 or that rank failed. After the first
 * worker ends (or stops), the others get 2 * timeout_s + 5 s (a wait for a
 * stopped rank times out in the run and again where the run ends); then SIGTERM, and
 * SIGKILL 2 s later. SIGINT, SIGTERM and SIGHUP are passed on to the
 * workers. A worker killed by a signal, stopped or overdue is named on
 * stderr. Returns the exit code: rank 0's when every worker exited with a
 * code of the same kind (0; 2; other failures), else 1; after a SIGINT,
 * SIGTERM or SIGHUP it ends this process by that signal. Call from a
 * process with one thread. */
int hn_cli_launch(const char *name, const hn_cli_procs *p, double timeout_s, char **argv);

#endif
