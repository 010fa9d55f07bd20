/* Process mode's environment (launch_env.h): what a worker is handed (its
 * world, rank, rendezvous or store), the store of a world of several
 * nodes, and a process another launcher (torchrun) started joining its
 * world. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "hirnode/runtime.h"

#include "../src/runtime/tools.h"
#include "launch_env.h"

extern char **environ;

/* A decimal in [lo, hi] from variable `var`: 1, 0 when unset, -1 when not one. */
static int env_int(const char *var, int lo, int hi, int *out)
{
    const char *v = getenv(var);
    char *end;
    long x;
    if (v == NULL || *v == '\0')
        return 0;
    x = strtol(v, &end, 10);
    if (*end != '\0' || x < lo || x > hi)
        return -1;
    *out = (int)x;
    return 1;
}

int hn_cli_join_launcher(const char *name, const hn_cli_procs *p, hn_runtime_config *cfg, hn_cli_devices *devices)
{
    hn_command c = {name, "", NULL, 0, NULL, 0, NULL, NULL};
    const char *own = getenv("HIRNODE_WORLD");
    int world = 0, rank = 0, local = 0, hw, hr, hl;
    if (p->n != 0 || cfg->ndev != 0 || (devices != NULL && devices->n > 0) || (own != NULL && *own != '\0'))
        return -1; /* its ranks are said here */
    if ((hw = env_int("WORLD_SIZE", 1, 256, &world)) == 0 || (hw > 0 && world == 1))
        return -1; /* no launcher's world */
    hr = env_int("RANK", 0, 255, &rank);
    hl = env_int("LOCAL_RANK", 0, 4095, &local);
    if (hw < 0 || hr <= 0 || rank >= world || hl < 0)
        return hn_cli_usage_error(&c, "started by a launcher (WORLD_SIZE=%s, RANK=%s, LOCAL_RANK=%s): expected a "
                                  "world of 2 to 256, a rank in it and a device ordinal (or give --gpus)",
                                  getenv("WORLD_SIZE"), getenv("RANK") != NULL ? getenv("RANK") : "(unset)",
                                  getenv("LOCAL_RANK") != NULL ? getenv("LOCAL_RANK") : "(unset)");
    cfg->world = world;
    cfg->rank = rank;
    cfg->ndev = 1;
    if (devices != NULL) {
        devices->ord[0] = local;
        devices->n = 1;
    }
    return -1;
}

static int set(const char *var)
{
    const char *v = getenv(var);
    return v != NULL && *v != '\0';
}

int hn_cli_env_store(void)
{
    return set("HIRNODE_STORE") || (set("MASTER_ADDR") && set("MASTER_PORT"));
}

/* A TCP port of 127.0.0.1 nobody listens on now; 0, else errno. */
static int free_port(int *port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    socklen_t len = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), e = 0;
    if (fd < 0)
        return errno;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 || getsockname(fd, (struct sockaddr *)&a, &len) != 0)
        e = errno;
    close(fd);
    *port = ntohs(a.sin_port);
    return e;
}

int hn_cli_world_store(const hn_cli_procs *p, char *buf, size_t cap, const char **store)
{
    int port = 0, e;
    *store = p->store;
    if (*store != NULL)
        return 0;
    if (set("HIRNODE_STORE")) {
        *store = getenv("HIRNODE_STORE");
        return 0;
    }
    if (p->node >= 0) /* MASTER_ADDR and MASTER_PORT (hn_cli_procs_setup saw them): the workers read them */
        return 0;
    if ((e = free_port(&port)) != 0)
        return e;
    snprintf(buf, cap, "127.0.0.1:%d", port);
    *store = buf;
    return 0;
}

char **hn_cli_worker_env(int world, int nodes, const char *dir, const char *store, char *rank_env)
{
    static const char *const ours[] = {"HIRNODE_WORLD=",  "HIRNODE_RANK=",  "HIRNODE_RENDEZVOUS=",
                                       "HIRNODE_WORKER=", "HIRNODE_NODES=", "HIRNODE_STORE="};
    size_t count = 0, k = 0, text, at;
    char **env, *s;
    while (environ[count] != NULL)
        count++;
    /* the pointers, then the text of the entries made here (names and numbers: under 128 bytes) */
    text = 128 + (dir != NULL ? strlen(dir) : 0) + (store != NULL ? strlen(store) : 0);
    if ((env = malloc((count + 7) * sizeof(char *) + text)) == NULL)
        return NULL;
    s = (char *)(env + count + 7);
    for (size_t i = 0; i < count; i++) {
        int skip = 0;
        for (int j = 0; j < HN_ARRAY_LEN(ours) && !skip; j++)
            /* HIRNODE_STORE is the launcher's only when it names one */
            skip = strncmp(environ[i], ours[j], strlen(ours[j])) == 0 && (j < HN_ARRAY_LEN(ours) - 1 || store != NULL);
        if (!skip)
            env[k++] = environ[i];
    }
    at = (size_t)sprintf(s, "HIRNODE_WORLD=%d", world) + 1;
    env[k++] = s;
    env[k++] = rank_env;
    if (dir != NULL) {
        env[k++] = s + at;
        at += (size_t)sprintf(s + at, "HIRNODE_RENDEZVOUS=%s", dir) + 1;
    }
    if (nodes > 1) {
        env[k++] = s + at;
        at += (size_t)sprintf(s + at, "HIRNODE_NODES=%d", nodes) + 1;
    }
    if (store != NULL) {
        env[k++] = s + at;
        sprintf(s + at, "HIRNODE_STORE=%s", store);
    }
    env[k++] = "HIRNODE_WORKER=1";
    env[k] = NULL;
    return env;
}
