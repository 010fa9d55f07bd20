/* Tests of src/world/rendezvous.c with real processes: this binary is
 * started again as workers (hn_tests --rdv-worker ...), this process is
 * rank 0. The world's memory and every rank's device memory are one
 * memory at one address in every process; a greeting that differs is
 * named; an absent rank is named at the deadline; a process that dies is
 * reported by the watch; bad directories are refused. */
#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "world/rendezvous.h"
#include "../test.h"

extern char **environ;

#define WORLD_BYTES ((size_t)1 << 20)
#define ARENA_BYTES ((size_t)4 << 20)
#define PATTERN_WORDS 4096

static uint64_t pattern(int rank, int i) { return 0x9e3779b97f4a7c15ull * (uint64_t)(rank + 1) ^ (uint64_t)i; }

static void config(hn_rdv_setup *c, const char *dir, int world, int rank, uint64_t check)
{
    memset(c, 0, sizeof(*c));
    c->dir = dir;
    c->world = world;
    c->rank = rank;
    c->timeout_s = 30;
    c->check = check;
    c->check_text = check == 1 ? "settings one" : "settings two";
    c->world_bytes = WORLD_BYTES;
    c->arena_bytes = ARENA_BYTES;
    c->share = hn_device_host.share;
    c->ord = 0;
}

/* Every rank writes its pattern into its device memory, says so in the
 * world's memory, waits for all and reads every other rank's: 0 when all
 * are right (checked in every process). */
static int share_and_check(hn_rdv *r, int world, int rank)
{
    uint32_t *said = hn_rdv_world_base(r);
    uint64_t *mine = hn_rdv_arena(r, rank);
    double end = hn_now() + 30;
    for (int i = 0; i < PATTERN_WORDS; i++)
        mine[i] = pattern(rank, i);
    __atomic_store_n(&said[rank * 16], 1, __ATOMIC_RELEASE);
    for (int q = 0; q < world; q++)
        while (!__atomic_load_n(&said[q * 16], __ATOMIC_ACQUIRE))
            if (hn_now() > end)
                return 1;
    for (int q = 0; q < world; q++) {
        const uint64_t *theirs = hn_rdv_arena(r, q);
        for (int i = 0; i < PATTERN_WORDS; i++)
            if (theirs[i] != pattern(q, i))
                return 1;
    }
    /* stay until everyone read: the second word */
    __atomic_store_n(&said[rank * 16 + 1], 1, __ATOMIC_RELEASE);
    for (int q = 0; q < world; q++)
        while (!__atomic_load_n(&said[q * 16 + 1], __ATOMIC_ACQUIRE))
            if (hn_now() > end)
                return 1;
    return 0;
}

/* hn_tests --rdv-worker SCENARIO DIR WORLD RANK: the worker's exit code
 * is its verdict. join: share_and_check; die: join and end without
 * leaving; other: greet with other settings. */
int hn_test_rdv_worker(int argc, char **argv);
int hn_test_rdv_worker(int argc, char **argv)
{
    hn_rdv_setup c;
    hn_rdv *r;
    hn_strbuf why;
    int world, rank, rc;
    if (argc != 6)
        return 2;
    world = atoi(argv[4]);
    rank = atoi(argv[5]);
    config(&c, argv[3], world, rank, strcmp(argv[2], "other") == 0 ? 2 : 1);
    hn_sb_init(&why);
    if (hn_rdv_join(&c, &r, &why) != HN_OK) {
        fprintf(stderr, "rdv worker %d: %s\n", rank, why.data != NULL ? why.data : "?");
        hn_sb_free(&why);
        return 3;
    }
    hn_sb_free(&why);
    if (strcmp(argv[2], "die") == 0)
        _exit(0); /* no goodbye */
    rc = share_and_check(r, world, rank);
    hn_rdv_leave(r);
    return rc;
}

static pid_t spawn_worker(const char *scenario, const char *dir, int world, int rank)
{
    char w[16], k[16];
    char *argv[] = {(char *)"hn_tests", (char *)"--rdv-worker", (char *)scenario, (char *)dir, w, k, NULL};
    pid_t pid;
    snprintf(w, sizeof(w), "%d", world);
    snprintf(k, sizeof(k), "%d", rank);
    if (posix_spawn(&pid, "/proc/self/exe", NULL, NULL, argv, environ) != 0)
        return -1;
    return pid;
}

static int reap(pid_t pid)
{
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static char *make_dir(void)
{
    char *d = hn_strdup("/tmp/hn-test-XXXXXX");
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(d));
    return d;
}

static void remove_dir(char *d)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/rank-0.sock", d);
    CU_ASSERT_NOT_EQUAL(access(path, F_OK), 0); /* nothing left on disk */
    unlink(path);
    CU_ASSERT_EQUAL(rmdir(d), 0);
    hn_free(d);
}

static void test_world_shares_memory(void)
{
    for (int world = 2; world <= 4; world += 2) {
        char *dir = make_dir();
        pid_t pid[4];
        hn_rdv_setup c;
        hn_rdv *r = NULL;
        hn_strbuf why;
        for (int q = 1; q < world; q++)
            CU_ASSERT_TRUE_FATAL((pid[q] = spawn_worker("join", dir, world, q)) > 0);
        config(&c, dir, world, 0, 1);
        hn_sb_init(&why);
        CU_ASSERT_EQUAL(hn_rdv_join(&c, &r, &why), HN_OK);
        if (r != NULL) {
            CU_ASSERT_EQUAL(share_and_check(r, world, 0), 0);
            CU_ASSERT_PTR_NOT_NULL(hn_rdv_arena(r, world - 1));
            CU_ASSERT_PTR_NULL(hn_rdv_arena(r, world));
            hn_rdv_leave(r);
        }
        for (int q = 1; q < world; q++)
            CU_ASSERT_EQUAL(reap(pid[q]), 0);
        hn_sb_free(&why);
        remove_dir(dir);
    }
}

static void test_other_settings_named(void)
{
    char *dir = make_dir();
    char *said;
    pid_t pid;
    hn_rdv_setup c;
    hn_rdv *r = NULL;
    hn_strbuf why;
    hn_test_capture_begin(); /* the worker says why it stopped: expected */
    pid = spawn_worker("other", dir, 2, 1);
    config(&c, dir, 2, 0, 1);
    hn_sb_init(&why);
    CU_ASSERT_EQUAL(hn_rdv_join(&c, &r, &why), HN_ERR_MISMATCH);
    CU_ASSERT_EQUAL(reap(pid), 3); /* the worker was told too */
    said = hn_test_capture_end();
    CU_ASSERT_PTR_NOT_NULL(strstr(said, "rdv worker 1: rendezvous: rank 1 differs from rank 0: settings two"));
    free(said);
    CU_ASSERT_PTR_NOT_NULL_FATAL(why.data);
    CU_ASSERT_PTR_NOT_NULL(strstr(why.data, "rank 1 differs from rank 0: settings two (rank 0: settings one)"));
    hn_sb_free(&why);
    remove_dir(dir);
}

static void test_absent_rank_named(void)
{
    char *dir = make_dir();
    hn_rdv_setup c;
    hn_rdv *r = NULL;
    hn_strbuf why;
    double t0 = hn_now();
    config(&c, dir, 3, 0, 1);
    c.timeout_s = 0.3;
    hn_sb_init(&why);
    CU_ASSERT_EQUAL(hn_rdv_join(&c, &r, &why), HN_ERR_TIMEOUT);
    CU_ASSERT_TRUE(hn_now() - t0 < 10);
    CU_ASSERT_PTR_NOT_NULL_FATAL(why.data);
    CU_ASSERT_PTR_NOT_NULL(strstr(why.data, "ranks 1 2 never connected"));
    hn_sb_free(&why);
    /* a rank whose rank 0 never listens */
    config(&c, dir, 2, 1, 1);
    c.timeout_s = 0.3;
    hn_sb_init(&why);
    CU_ASSERT_EQUAL(hn_rdv_join(&c, &r, &why), HN_ERR_TIMEOUT);
    CU_ASSERT_PTR_NOT_NULL(why.data != NULL ? strstr(why.data, "rank 0 never listened") : NULL);
    hn_sb_free(&why);
    remove_dir(dir);
}

typedef struct lost_note {
    int calls, rank;
    char text[256];
} lost_note;

static void on_lost(void *ctx, int rank, const char *text)
{
    lost_note *n = ctx;
    snprintf(n->text, sizeof(n->text), "%s", text);
    n->rank = rank;
    __atomic_add_fetch(&n->calls, 1, __ATOMIC_RELEASE);
}

static void test_death_reported(void)
{
    char *dir = make_dir();
    pid_t pid = spawn_worker("die", dir, 2, 1);
    hn_rdv_setup c;
    hn_rdv *r = NULL;
    hn_strbuf why;
    lost_note note;
    char want[64];
    double end;
    memset(&note, 0, sizeof(note));
    config(&c, dir, 2, 0, 1);
    hn_sb_init(&why);
    CU_ASSERT_EQUAL_FATAL(hn_rdv_join(&c, &r, &why), HN_OK);
    CU_ASSERT_EQUAL(hn_rdv_watch(r, on_lost, &note), HN_OK);
    CU_ASSERT_EQUAL(reap(pid), 0);
    end = hn_now() + 20;
    while (__atomic_load_n(&note.calls, __ATOMIC_ACQUIRE) == 0 && hn_now() < end)
        usleep(1000);
    hn_rdv_leave(r);
    CU_ASSERT_EQUAL(note.calls, 1);
    CU_ASSERT_EQUAL(note.rank, 1);
    snprintf(want, sizeof(want), "(pid %d) died", (int)pid);
    CU_ASSERT_PTR_NOT_NULL(strstr(note.text, want));
    hn_sb_free(&why);
    remove_dir(dir);
}

static void test_bad_directories(void)
{
    char *dir = make_dir(), longdir[200], sock[256];
    hn_rdv_setup c;
    hn_rdv *r = NULL;
    hn_strbuf why;
    hn_log_level_t level = hn_log_level();
    struct sockaddr_un sa;
    int fd;
    pid_t pid;
    /* writable by anyone, not sticky */
    CU_ASSERT_EQUAL(chmod(dir, 0777), 0);
    config(&c, dir, 2, 0, 1);
    hn_sb_init(&why);
    CU_ASSERT_EQUAL(hn_rdv_join(&c, &r, &why), HN_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(why.data != NULL ? strstr(why.data, "writable by anyone") : NULL);
    hn_sb_free(&why);
    CU_ASSERT_EQUAL(chmod(dir, 0700), 0);
    /* too long for a socket */
    memset(longdir, 'x', sizeof(longdir) - 1);
    longdir[sizeof(longdir) - 1] = '\0';
    config(&c, longdir, 2, 0, 1);
    hn_sb_init(&why);
    CU_ASSERT_EQUAL(hn_rdv_join(&c, &r, &why), HN_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(why.data != NULL ? strstr(why.data, "too long") : NULL);
    hn_sb_free(&why);
    /* not there */
    config(&c, "/nonexistent/hirnode", 2, 0, 1);
    hn_sb_init(&why);
    CU_ASSERT_EQUAL(hn_rdv_join(&c, &r, &why), HN_ERR_INVALID);
    hn_sb_free(&why);
    /* a socket file left by a world that ended is replaced */
    snprintf(sock, sizeof(sock), "%s/rank-0.sock", dir);
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/rank-0.sock", dir);
    fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
    CU_ASSERT_EQUAL(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    close(fd);
    CU_ASSERT_EQUAL(access(sock, F_OK), 0);
    pid = spawn_worker("join", dir, 2, 1);
    config(&c, dir, 2, 0, 1);
    hn_sb_init(&why);
    hn_log_set_level(HN_LOG_OFF);
    CU_ASSERT_EQUAL(hn_rdv_join(&c, &r, &why), HN_OK);
    hn_log_set_level(level);
    if (r != NULL) {
        CU_ASSERT_EQUAL(share_and_check(r, 2, 0), 0);
        hn_rdv_leave(r);
    }
    CU_ASSERT_EQUAL(reap(pid), 0);
    hn_sb_free(&why);
    remove_dir(dir);
}

void hn_suite_rendezvous(void)
{
    static CU_TestInfo tests[] = {
        {"2 and 4 processes map one memory at one address", test_world_shares_memory},
        {"a process with other settings is named", test_other_settings_named},
        {"an absent rank is named at the deadline", test_absent_rank_named},
        {"a process that dies is reported", test_death_reported},
        {"bad directories are refused, a stale socket replaced", test_bad_directories},
        CU_TEST_INFO_NULL,
    };
    hn_test_add_suite("world/rendezvous", tests);
}
