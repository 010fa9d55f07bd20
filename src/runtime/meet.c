/* Meeting through a caller's store (meet.h): torch.distributed's, Ray's or
 * a TCP store holds one key, the path of the directory where the world's
 * processes then rendezvous as with hn_runtime_config.rendezvous. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "meet.h"

hn_status_t hn_meet_store(const hn_world_store *store, int world, int node, int rank, double timeout_s, char *dir,
                          size_t cap, int *made, hn_strbuf *why)
{
    static int meetings; /* of this process: the same count in every process of the world */
    const int k = __atomic_add_fetch(&meetings, 1, __ATOMIC_RELAXED);
    const char *tmp = getenv("TMPDIR");
    char key[96];
    *made = 0;
    if (node < 0)
        snprintf(key, sizeof(key), "hirnode/rendezvous/%d/%d", world, k);
    else
        snprintf(key, sizeof(key), "hirnode/rendezvous/%d/node%d/%d", world, node, k);
    if (rank != 0) {
        memset(dir, 0, cap);
        if (store->get(store->ctx, key, dir, cap, timeout_s) != 0 || dir[0] == '\0' || dir[cap - 1] != '\0') {
            hn_sb_printf(why, "rank %d of a world of %d: the store gave no rendezvous directory under %s within "
                         "%.0f s (rank 0 makes it)", rank, world, key, timeout_s);
            return HN_ERR_TIMEOUT;
        }
        return HN_OK;
    }
    if (snprintf(dir, cap, "%s/hirnode-rdv-XXXXXX", tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp") >= (int)cap ||
        mkdtemp(dir) == NULL) {
        hn_sb_printf(why, "rank 0 of a world of %d: cannot make a rendezvous directory under %s", world,
                     tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp");
        return HN_ERR_IO;
    }
    if (store->set(store->ctx, key, dir) != 0) {
        hn_meet_remove(dir);
        hn_sb_printf(why, "rank 0 of a world of %d: the store refused %s", world, key);
        return HN_ERR_IO;
    }
    *made = 1;
    return HN_OK;
}

void hn_meet_remove(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[4096];
    while (d != NULL && (e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0 &&
            snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) < (int)sizeof(path))
            (void)unlink(path);
    if (d != NULL)
        closedir(d);
    (void)rmdir(dir);
}
