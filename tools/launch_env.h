/* What the launcher of process mode (launch.c) hands its workers, and
 * what it reads of another launcher's (launch_env.c): the workers'
 * environment and the store of a world of several nodes. */
#ifndef HN_TOOLS_LAUNCH_ENV_H
#define HN_TOOLS_LAUNCH_ENV_H

#include <stddef.h>

#include "launch.h"

/* The environment of the workers: the launcher's without its own
 * HIRNODE_WORLD, _RANK, _RENDEZVOUS, _WORKER and _NODES (and _STORE when
 * store is not NULL), then HIRNODE_WORLD=world, the rank's entry (points
 * at rank_env, written before each fork), HIRNODE_RENDEZVOUS=dir (dir not
 * NULL), HIRNODE_NODES=nodes (nodes > 1), HIRNODE_STORE=store (store not
 * NULL) and HIRNODE_WORKER=1. One block: free() it. NULL when out of
 * memory. */
char **hn_cli_worker_env(int world, int nodes, const char *dir, const char *store, char *rank_env);

/* The store's address of a world of several nodes (after
 * hn_cli_procs_setup): --store, else HIRNODE_STORE, else with every node
 * here 127.0.0.1 and a free port, into buf; *store NULL when the workers
 * find it themselves (MASTER_ADDR and MASTER_PORT). 0, else errno (no
 * free port found). */
int hn_cli_world_store(const hn_cli_procs *p, char *buf, size_t cap, const char **store);

/* Whether the environment names a store (HIRNODE_STORE, or MASTER_ADDR
 * and MASTER_PORT). */
int hn_cli_env_store(void);

#endif
