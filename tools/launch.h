/* Process mode from the command line (launch.c): `--procs N` makes the
 * command (run, bench collectives, bench overlap) a launcher of N worker
 * processes of the same command line, one rank of the world each;
 * `--nodes N --procs M` of a world of N nodes of M ranks each, all here or
 * (`--node K`) node K's. */
#ifndef HN_TOOLS_LAUNCH_H
#define HN_TOOLS_LAUNCH_H

#include "options.h"

struct hn_runtime_config;

/* --procs, --nodes, --node, --store and --rendezvous as a command's
 * options set them (a zeroed one: none given). */
typedef struct hn_cli_procs {
    int n;                  /* --procs N: ranks, one per process (of each node); 0: not given */
    const char *rendezvous; /* --rendezvous DIR; NULL: the launcher makes one under /tmp */
    int launcher;           /* set by hn_cli_procs_setup: this process starts the workers */
    int nodes;              /* --nodes N: nodes of --procs ranks each; 0: not given (hn_cli_procs_setup: 1) */
    int node;               /* --node K: only node K's ranks here; -1 (hn_cli_procs_setup): all */
    const char *store;      /* --store HOST:PORT; NULL: not given */
    int node_given;         /* set by --node (hn_cli_take_node) */
} hn_cli_procs;

/* --node K (HN_CALL with a hn_cli_procs as its dest). */
int hn_cli_take_node(const char *value, void *dest, struct hn_strbuf *err);

#define HN_PROCS_OPTIONS(p)                                                                                   \
    HN_INT("--procs", "N", &(p)->n, 1, 256,                                                                   \
           "process mode: N ranks, one per process (--gpus, if given, must be N;\n"                           \
           "with --nodes: the ranks started here): N workers of this command; the\n"                          \
           "first one's output as it comes, another's at the end when it or the\n"                            \
           "first one failed"),                                                                               \
        HN_INT("--nodes", "N", &(p)->nodes, 1, 64,                                                            \
               "--procs M: a world of N nodes of M ranks each (default 1), rank r\n"                          \
               "on node r / M; without --node all N * M workers start here"),                                 \
        HN_CALL("--node", "K", hn_cli_take_node, (p),                                                         \
                "--nodes N: start node K's M workers only, ranks K*M to K*M+M-1 on\n"                         \
                "devices 0 to M-1 (the other nodes: the same command with their K)"),                         \
        HN_TEXT("--store", "HOST:PORT", &(p)->store,                                                          \
                "--nodes N: where rank 0 serves the world's store (default\n"                                 \
                "$HIRNODE_STORE, else with all nodes here a free port of 127.0.0.1;\n"                        \
                "with --node it or MASTER_ADDR and MASTER_PORT must say)"),                                   \
        HN_TEXT("--rendezvous", "DIR", &(p)->rendezvous,                                                      \
                "--procs: the directory where the workers meet (yours, not writable\n"                        \
                "by others; default: a fresh one under /tmp, removed at the end;\n"                           \
                "not with --nodes N > 1: those workers meet through the store)")

/* After a command's options are parsed, with cfg->ndev 0 where --gpus was
 * not given (set it to 0 before parsing). Without --procs: cfg->ndev
 * becomes ndev_default when it is 0 (--nodes, --node and --store go with
 * --procs, --node with --nodes). With --procs M and --nodes N (default
 * 1): the ranks started here are the world's N * M, or with --node K node
 * K's M (ranks K*M to K*M+M-1); --gpus must be their number and --devices
 * (NULL: the command has none) list one ordinal for each; --node needs a
 * store (--store, HIRNODE_STORE, or MASTER_ADDR and MASTER_PORT) and
 * --rendezvous one node. In the launcher cfg->ndev becomes the number
 * started here and p->launcher 1 (call hn_cli_launch once the command has
 * checked what it can check once); in a worker (HIRNODE_WORKER=1, which
 * the launcher sets) cfg->ndev becomes 1 and its device that of its rank
 * among those started here: --devices' entry, else with --node its local
 * rank (cfg->devices), else its rank. p->nodes becomes at least 1 and
 * p->node -1 without --node. Returns -1 to go on, else the exit code after
 * a usage error on stderr ("NAME: ..."). */
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

/* The launcher: starts the workers of the ranks this launcher starts
 * (hn_cli_procs_setup: p->n, or with --nodes N all N * p->n, or with --node
 * K node K's), each /proc/self/exe with argv (the command line as given)
 * and HIRNODE_WORLD, HIRNODE_RANK (its rank in the world) and
 * HIRNODE_WORKER=1 in its environment, and with one node
 * HIRNODE_RENDEZVOUS; with several nodes no HIRNODE_RENDEZVOUS but
 * HIRNODE_NODES and HIRNODE_STORE (--store, else the launcher's
 * HIRNODE_STORE, else with every node here 127.0.0.1 and a free port;
 * unset where MASTER_ADDR and MASTER_PORT say), in a process group of
 * their own that dies with the launcher. The first of them (rank 0, or
 * with --node K rank K*M) writes to the launcher's stdout and stderr; the
 * others' output is kept and printed ("rank R: ...") when the first or
 * that rank failed. After the first worker ends (or stops), the others
 * get 2 * timeout_s + 5 s (a wait for a stopped rank times out in the run
 * and again where the run ends); then SIGTERM, and SIGKILL 2 s later.
 * SIGINT, SIGTERM and SIGHUP are passed on to the workers. A worker killed
 * by a signal, stopped or overdue is named on stderr. Returns the exit
 * code: the first one's when every worker exited with a code of the same
 * kind (0; 2; other failures), else 1; after a SIGINT, SIGTERM or SIGHUP
 * it ends this process by that signal. Call from a process with one
 * thread. */
int hn_cli_launch(const char *name, const hn_cli_procs *p, double timeout_s, char **argv);

#endif
