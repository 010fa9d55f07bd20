/* The launcher of process mode (`hirnode run --procs N`): starts N workers
 * of the same command line (with --nodes, every node's or one node's), one
 * rank of the world each, gathers them, names a worker that died, stopped
 * or hung, and leaves nothing running. It never makes a runtime: the
 * workers do. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hirnode/runtime.h"

#include "../src/runtime/tools.h"
#include "launch_env.h"

#define GRACE_EXTRA_S 5.0  /* past twice the run's timeout: the others' time after the first end */
#define KILL_AFTER_S 2.0   /* from SIGTERM to SIGKILL */
#define DRAIN_S 1.0        /* output still in the pipes after the last worker ended */
#define NOTE_AFTER_S 1.0   /* a first failure is said when others still run this long after it */
#define OUT_KEEP (256 << 10) /* bytes of a rank's output kept, at most ... */
#define OUT_HEAD (32 << 10)  /* ... of which the first ones always (a failure to start says why there) */
#define SOCK_NAME "/rank-255.sock" /* the longest name a rank's socket takes in the rendezvous */

/* the signals the launcher catches: the workers' ends, and what it passes on */
static const int caught[] = {SIGCHLD, SIGINT, SIGTERM, SIGHUP};

typedef enum { W_RUNNING, W_STOPPED, W_EXITED, W_SIGNALED } worker_state;

typedef struct worker {
    pid_t pid;
    int fd; /* the read end of its stdout and stderr (ranks > 0); -1: none or read to the end */
    worker_state state;
    int code;    /* exit code, or the signal that killed it */
    int overdue; /* still there past the grace: the launcher ended it */
    /* its output: the first OUT_HEAD bytes (to head_end), then the last ones */
    char *out;
    size_t len, cap, head_end, dropped;
} worker;

typedef struct launch {
    int n;
    int first;      /* the rank in the world of w[0]; w[r] is rank first + r */
    worker *w;
    pid_t pgid;     /* the workers' process group: the first one's pid */
    double grace_s; /* 2 * timeout + GRACE_EXTRA_S */
    double deadline; /* the others must have ended by then; 0: nothing ended yet */
    double kill_at;  /* SIGKILL then; 0: not terminated; -1: sent */
    char after[64];  /* what started the clock, for messages ("rank 0 ended") */
    double note_at;  /* the first failed exit is said then if others still run; 0: none pending */
    int note_rank;   /* ... that rank's */
    int user_sig;    /* a SIGINT, SIGTERM or SIGHUP passed on; 0: none */
    struct sigaction before[HN_ARRAY_LEN(caught)]; /* each of `caught` as the launcher began */
} launch;

/* the write end is the signal handler's; the read end the poll loop's */
static int sig_pipe[2] = {-1, -1};

static void on_signal(int sig)
{
    int saved = errno;
    unsigned char b = (unsigned char)sig;
    /* the pipe does not block: a byte lost to a full pipe is a SIGCHLD
     * the loop's reap finds anyway */
    if (write(sig_pipe[1], &b, 1) < 0)
        errno = saved;
    errno = saved;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* --rendezvous DIR: a directory of this user that nobody else may fill
 * with sockets, short enough for a socket's path; -1 when it is one. */
static int check_rendezvous(const char *name, const char *dir)
{
    hn_command c = {name, "", NULL, 0, NULL, 0, NULL, NULL};
    size_t max = sizeof(((struct sockaddr_un *)NULL)->sun_path) - strlen(SOCK_NAME) - 1;
    struct stat st;
    if (stat(dir, &st) != 0)
        return hn_cli_usage_error(&c, "--rendezvous %s: %s", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return hn_cli_usage_error(&c, "--rendezvous %s: not a directory", dir);
    if (st.st_uid != geteuid())
        return hn_cli_usage_error(&c, "--rendezvous %s: owned by uid %u, not by this user (uid %u)", dir,
                                  (unsigned)st.st_uid, (unsigned)geteuid());
    if ((st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX))
        return hn_cli_usage_error(&c, "--rendezvous %s: anyone may write to it (mode %03o without the sticky bit)",
                                  dir, (unsigned)(st.st_mode & 07777));
    if (strlen(dir) > max)
        return hn_cli_usage_error(&c, "--rendezvous %s: too long for the path of a Unix socket in it (%zu bytes at "
                                  "most)", dir, max);
    return -1;
}

/* TEST ONLY: tests/procs.sh checks the launcher with workers that die,
 * stop or hang on purpose, which the runtime's workers cannot be told to
 * do before their world exists. HIRNODE_LAUNCH_TEST="[RANK:]ACTION,..."
 * makes a worker (HIRNODE_WORKER=1: the launcher's children only) do
 * ACTION instead of its command: the action of an item naming its rank,
 * else of an item without a rank, else none. ACTION: exitK (exit with K),
 * kill9 (SIGKILL itself), stop (SIGSTOP itself), sleep (until a signal
 * ends it), hang (as sleep, but deaf to SIGTERM and SIGINT), sock (bind
 * the socket rank-R.sock in the rendezvous and exit), spew (20000 long lines
 * "spew N" to stderr, more than the launcher keeps, and exit 1). Each
 * first writes a line to stdout (naming the rendezvous) and one to stderr. Returns -1 when this rank has
 * no action, else the exit code. */
static int launch_test_hook(const char *name, int rank)
{
    static const char *const actions[] = {"kill9", "stop", "sleep", "hang", "sock", "spew"};
    const char *spec = getenv("HIRNODE_LAUNCH_TEST"), *mine = NULL, *any = NULL, *at;
    size_t mine_len = 0, any_len = 0;
    if (spec == NULL || *spec == '\0')
        return -1;
    for (at = spec;;) {
        size_t len = strcspn(at, ","), alen;
        const char *colon = memchr(at, ':', len), *act = colon != NULL ? colon + 1 : at;
        char *end;
        long r = -1;
        int good = 0;
        alen = len - (size_t)(act - at);
        if (colon != NULL) {
            r = strtol(at, &end, 10);
            if (end != colon || colon == at || r < 0 || r > 255)
                alen = 0; /* refused below */
        }
        for (int k = 0; k < HN_ARRAY_LEN(actions) && !good; k++)
            good = alen == strlen(actions[k]) && memcmp(act, actions[k], alen) == 0;
        if (!good && alen > 4 && alen < 9 && memcmp(act, "exit", 4) == 0) {
            long code = strtol(act + 4, &end, 10);
            good = end == act + alen && act[4] >= '0' && act[4] <= '9' && code <= 255;
        }
        if (!good) {
            hn_command c = {name, "", NULL, 0, NULL, 0, NULL, NULL};
            return hn_cli_usage_error(&c, "HIRNODE_LAUNCH_TEST: '%.*s' is not [RANK:]exitK|kill9|stop|sleep|hang|sock|spew",
                                      (int)len, at);
        }
        if (colon == NULL) {
            any = act;
            any_len = alen;
        } else if (r == rank) {
            mine = act;
            mine_len = alen;
        }
        if (at[len] == '\0')
            break;
        at += len + 1;
    }
    if (mine == NULL) {
        mine = any;
        mine_len = any_len;
    }
    if (mine == NULL)
        return -1;
    printf("launch test: rank %d (pid %d) in %s: %.*s\n", rank, (int)getpid(),
           getenv("HIRNODE_RENDEZVOUS") != NULL ? getenv("HIRNODE_RENDEZVOUS") : "(no rendezvous)",
           (int)mine_len, mine);
    fprintf(stderr, "launch test: rank %d on stderr\n", rank);
    fflush(stdout);
    fflush(stderr);
    if (memcmp(mine, "exit", 4) == 0)
        return (int)strtol(mine + 4, NULL, 10);
    if (memcmp(mine, "kill9", 5) == 0)
        raise(SIGKILL);
    if (memcmp(mine, "spew", 4) == 0) {
        for (int i = 1; i <= 20000; i++)
            fprintf(stderr, "spew %d %s\n", i, "-------------------------------------------------");
        return HN_EXIT_FAIL;
    }
    if (memcmp(mine, "sock", 4) == 0) { /* what a rank leaves in the rendezvous */
        struct sockaddr_un a = {.sun_family = AF_UNIX};
        int fd = socket(AF_UNIX, SOCK_STREAM, 0);
        snprintf(a.sun_path, sizeof(a.sun_path), "%s/rank-%d.sock", getenv("HIRNODE_RENDEZVOUS"), rank);
        return fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 ? HN_EXIT_OK : HN_EXIT_FAIL;
    }
    if (memcmp(mine, "stop", 4) == 0)
        raise(SIGSTOP);
    if (memcmp(mine, "hang", 4) == 0) {
        signal(SIGTERM, SIG_IGN);
        signal(SIGINT, SIG_IGN);
    }
    for (;;)
        pause();
}

int hn_cli_take_node(const char *value, void *dest, hn_strbuf *err)
{
    hn_cli_procs *p = dest;
    int64_t k;
    if (hn_parse_int64("--node", value, 0, 63, &k, err) != HN_OK)
        return 0;
    p->node = (int)k;
    p->node_given = 1;
    return 1;
}

/* --store's HOST:PORT as HIRNODE_STORE takes it: a host, a port from 1 to 65535 */
static int good_address(const char *s)
{
    const char *colon = strrchr(s, ':');
    char *end;
    long port = colon != NULL && colon[1] >= '0' && colon[1] <= '9' ? strtol(colon + 1, &end, 10) : 0;
    int ok = colon != NULL && colon > s && colon - s < 256 && port >= 1 && port <= 65535 && *end == '\0';
    for (const char *c = s; ok && c < colon; c++)
        ok = (unsigned char)*c > 0x20 && *c != 0x7f;
    return ok;
}

int hn_cli_procs_setup(const char *name, hn_cli_procs *p, hn_runtime_config *cfg, hn_cli_devices *devices,
                       int ndev_default)
{
    hn_command c = {name, "", NULL, 0, NULL, 0, NULL, NULL};
    const char *role = getenv("HIRNODE_WORKER"), *alone;
    char what[64]; /* the options that say which ranks start here */
    int rc, world, first, here, local;
    p->launcher = 0;
    if (!p->node_given)
        p->node = -1;
    if (role != NULL && *role != '\0' && strcmp(role, "0") != 0 && strcmp(role, "1") != 0)
        return hn_cli_usage_error(&c, "HIRNODE_WORKER: expected 0 or 1, not '%s' (the launcher of --procs sets it)",
                                  role);
    if (p->n == 0) {
        alone = p->rendezvous != NULL ? "--rendezvous"
                : p->nodes != 0       ? "--nodes"
                : p->node >= 0        ? "--node"
                : p->store != NULL    ? "--store"
                                      : NULL;
        if (alone != NULL)
            return hn_cli_usage_error(&c, "%s goes with --procs N", alone);
        if (cfg->ndev == 0)
            cfg->ndev = ndev_default;
        return -1;
    }
    if (p->nodes == 0 && (p->node >= 0 || p->store != NULL))
        return hn_cli_usage_error(&c, "%s goes with --nodes N", p->node >= 0 ? "--node" : "--store");
    p->nodes = HN_MAX(p->nodes, 1);
    if (p->node >= p->nodes)
        return hn_cli_usage_error(&c, "--node %d: the nodes of --nodes %d are 0 to %d", p->node, p->nodes,
                                  p->nodes - 1);
    if (p->nodes * p->n > 256)
        return hn_cli_usage_error(&c, "--nodes %d --procs %d: a world of %d ranks (256 at most)", p->nodes, p->n,
                                  p->nodes * p->n);
    if (p->nodes > 1 && p->rendezvous != NULL)
        return hn_cli_usage_error(&c, "--rendezvous goes with one node: the workers of --nodes %d meet through the "
                                  "store", p->nodes);
    if (p->nodes == 1 && p->store != NULL)
        return hn_cli_usage_error(&c, "--store goes with --nodes N of 2 or more: one node's workers meet in a "
                                  "rendezvous directory");
    if (p->store != NULL && !good_address(p->store))
        return hn_cli_usage_error(&c, "--store: expected HOST:PORT (a port from 1 to 65535), not '%s'", p->store);
    world = p->nodes * p->n;
    first = p->node >= 0 ? p->node * p->n : 0;
    here = p->node >= 0 ? p->n : world;
    if (p->nodes == 1)
        snprintf(what, sizeof(what), "--procs %d", p->n);
    else if (p->node < 0)
        snprintf(what, sizeof(what), "--nodes %d --procs %d", p->nodes, p->n);
    else
        snprintf(what, sizeof(what), "--nodes %d --node %d --procs %d", p->nodes, p->node, p->n);
    if (cfg->ndev != 0 && cfg->ndev != here && p->nodes == 1)
        return hn_cli_usage_error(&c, "--gpus %d with --procs %d: the world of --procs has one rank a process "
                                  "(give --procs alone, or the same N)", cfg->ndev, p->n);
    if (cfg->ndev != 0 && cfg->ndev != here)
        return hn_cli_usage_error(&c, "--gpus %d with %s: %d ranks start here, one a process (give no --gpus, or "
                                  "%d)", cfg->ndev, what, here, here);
    if (devices != NULL && devices->n > 0 && devices->n != here)
        return hn_cli_usage_error(&c, "--devices: %d ordinal%s for %d ranks (%s): give one per rank", devices->n,
                                  devices->n == 1 ? "" : "s", here, p->nodes == 1 ? "--procs" : what);
    if (role == NULL || strcmp(role, "1") != 0) {
        if (p->rendezvous != NULL && (rc = check_rendezvous(name, p->rendezvous)) >= 0)
            return rc;
        if (p->nodes > 1 && p->node >= 0 && p->store == NULL && !hn_cli_env_store())
            return hn_cli_usage_error(&c, "--node needs --store HOST:PORT (or HIRNODE_STORE / MASTER_ADDR and "
                                      "MASTER_PORT): the address where rank 0 serves the world's store");
        cfg->ndev = here;
        p->launcher = 1;
        return -1;
    }
    /* a worker: one rank of the launcher's world, the rank it was given */
    if (cfg->world != world || cfg->rank < first || cfg->rank >= first + here)
        return hn_cli_usage_error(&c, "a worker of %s needs HIRNODE_WORLD=%d and HIRNODE_RANK from %d to %d, "
                                  "not %d and %d (the launcher sets them)", what, world, first, first + here - 1,
                                  cfg->world, cfg->rank);
    local = cfg->rank - first; /* its place among the ranks started here: its device's */
    if (devices != NULL && devices->n > 0) {
        devices->ord[0] = devices->ord[local];
        devices->n = 1;
    } else if (local != cfg->rank) { /* the runtime's default is the rank in the world */
        static int ordinal;
        ordinal = local;
        cfg->devices = &ordinal;
    }
    cfg->ndev = 1;
    return launch_test_hook(name, cfg->rank);
}

/* In the child, between fork and exec: the signals as the launcher got
 * them (one ignored under nohup stays ignored), the workers' group, death
 * with the launcher, stdin from /dev/null (a worker in a background group
 * reading the terminal would stop), ranks > 0 writing into their pipe. */
static void __attribute__((noreturn))
become_worker(const launch *l, int rank, pid_t launcher, int devnull, int out, char **argv, char **env,
              const sigset_t *mask)
{
    char msg[160];
    const char *what = "exec /proc/self/exe";
    pid_t pgid = l->pgid;
    ssize_t said;
    for (int i = 0; i < HN_ARRAY_LEN(caught); i++)
        sigaction(caught[i], &l->before[i], NULL);
    sigprocmask(SIG_SETMASK, mask, NULL);
    if (setpgid(0, rank == 0 ? 0 : pgid) != 0)
        what = "join the workers' process group";
    else if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0)
        what = "ask to die with the launcher";
    else if (getppid() != launcher)
        _exit(HN_EXIT_FAIL); /* the launcher is gone already */
    else if (dup2(devnull, 0) < 0 || (out >= 0 && (dup2(out, 1) < 0 || dup2(out, 2) < 0)))
        what = "set up stdin, stdout and stderr";
    else
        execve("/proc/self/exe", argv, env);
    snprintf(msg, sizeof(msg), "hirnode: rank %d: cannot %s: %s\n", l->first + rank, what, strerror(errno));
    said = write(2, msg, strlen(msg)); /* if not, there is nowhere else to say it */
    (void)said;
    _exit(127);
}

/* Forks rank r's worker; 0, else errno. */
static int start_worker(launch *l, int r, int devnull, char **argv, char **env, const sigset_t *mask)
{
    worker *w = &l->w[r];
    int fds[2] = {-1, -1}, e;
    pid_t pid, self = getpid();
    if (r > 0 && pipe2(fds, O_CLOEXEC) != 0)
        return errno;
    if ((pid = fork()) < 0) {
        e = errno;
        if (r > 0) {
            close(fds[0]);
            close(fds[1]);
        }
        return e;
    }
    if (pid == 0)
        become_worker(l, r, self, devnull, fds[1], argv, env, mask);
    /* the child does the same: whichever comes first, the group is set
     * before the next fork (and the first, unreaped until the end, holds its id) */
    if (r == 0)
        l->pgid = pid;
    (void)setpgid(pid, l->pgid);
    if (r > 0)
        close(fds[1]);
    w->pid = pid;
    w->fd = fds[0];
    w->state = W_RUNNING;
    return 0;
}

/* Keeps a piece of a rank's output: everything up to OUT_KEEP bytes;
 * past it the first OUT_HEAD bytes (to a line's end) and the last ones. */
static void keep_output(worker *w, const char *buf, size_t n)
{
    size_t from, to;
    const char *nl;
    if (w->len + n > w->cap) {
        size_t cap = HN_MAX(HN_MAX(w->cap * 2, w->len + n), (size_t)4096);
        char *grown = realloc(w->out, cap);
        if (grown == NULL) {
            w->dropped += n;
            return;
        }
        w->out = grown;
        w->cap = cap;
    }
    memcpy(w->out + w->len, buf, n);
    w->len += n;
    if (w->len <= OUT_KEEP)
        return;
    if (w->head_end == 0) {
        nl = memchr(w->out + OUT_HEAD, '\n', OUT_HEAD);
        w->head_end = nl != NULL ? (size_t)(nl - w->out) + 1 : OUT_HEAD;
    }
    /* down to half: the head, then the tail from a line's start */
    from = w->head_end;
    to = HN_MIN(from + (w->len - OUT_KEEP / 2), w->len);
    nl = to < w->len ? memchr(w->out + to, '\n', w->len - to) : NULL;
    to = nl != NULL ? (size_t)(nl - w->out) + 1 : w->len;
    memmove(w->out + from, w->out + to, w->len - to);
    w->dropped += to - from;
    w->len -= to - from;
}

/* Reads what rank r wrote; closes its pipe at the end. */
static void read_output(worker *w)
{
    char buf[16384];
    ssize_t got = read(w->fd, buf, sizeof(buf));
    if (got > 0) {
        keep_output(w, buf, (size_t)got);
    } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
        close(w->fd);
        w->fd = -1;
    }
}

static void start_clock(launch *l, int r, const char *what)
{
    if (l->deadline != 0)
        return;
    l->deadline = now_s() + l->grace_s;
    snprintf(l->after, sizeof(l->after), "rank %d %s", l->first + r, what);
}

static int live(const launch *l)
{
    int n = 0;
    for (int r = 0; r < l->n; r++)
        n += l->w[r].pid > 0 && (l->w[r].state == W_RUNNING || l->w[r].state == W_STOPPED);
    return n;
}

/* After the first failure, while others run: how long they have. */
static void grace_note(const launch *l)
{
    fprintf(stderr, "hirnode: the other ranks have %g s to end (twice the timeout and %g s)\n", l->grace_s,
            GRACE_EXTRA_S);
}

/* Every change of a worker's state since the last call; the first is left a
 * zombie (WNOWAIT) so that the group's id stays the workers' until the
 * launcher's last kill. */
static void reap(launch *l)
{
    for (int r = 0; r < l->n; r++) {
        worker *w = &l->w[r];
        siginfo_t si;
        int first;
        if (w->state == W_EXITED || w->state == W_SIGNALED)
            continue;
        memset(&si, 0, sizeof(si));
        if (waitid(P_PID, (id_t)w->pid, &si, WEXITED | WSTOPPED | WCONTINUED | WNOHANG | (r == 0 ? WNOWAIT : 0)) != 0) {
            fprintf(stderr, "hirnode: cannot wait for rank %d (pid %d): %s\n", l->first + r, (int)w->pid,
                    strerror(errno));
            w->state = W_SIGNALED; /* lost: counted as a failure */
            w->code = 0;
            continue;
        }
        if (si.si_pid == 0)
            continue;
        first = l->deadline == 0;
        switch (si.si_code) {
        case CLD_EXITED:
            w->state = W_EXITED;
            w->code = si.si_status;
            start_clock(l, r, "ended");
            /* the first failure is said soon (the others may take their
             * whole grace before the end says more), but not when they
             * end at once too: then the summary says it, once */
            if (first && w->code != 0 && live(l) > 0) {
                l->note_at = now_s() + NOTE_AFTER_S;
                l->note_rank = r;
            }
            break;
        case CLD_KILLED:
        case CLD_DUMPED:
            w->state = W_SIGNALED;
            w->code = si.si_status;
            start_clock(l, r, "ended");
            if (!w->overdue && si.si_status != l->user_sig)
                fprintf(stderr, "hirnode: rank %d (pid %d) was killed by signal %d (%s)%s\n", l->first + r,
                        (int)w->pid, si.si_status, strsignal(si.si_status),
                        si.si_code == CLD_DUMPED ? ", core dumped" : "");
            if (first && live(l) > 0)
                grace_note(l);
            break;
        case CLD_STOPPED:
            if (w->state != W_STOPPED) {
                w->state = W_STOPPED;
                start_clock(l, r, "stopped");
                fprintf(stderr, "hirnode: rank %d (pid %d) was stopped by signal %d (%s)\n", l->first + r, (int)w->pid,
                        si.si_status, strsignal(si.si_status));
                if (first)
                    grace_note(l);
            }
            break;
        case CLD_CONTINUED:
            w->state = w->state == W_STOPPED ? W_RUNNING : w->state;
            break;
        default:
            break;
        }
    }
}

/* The whole group: sig, and SIGCONT so that a stopped worker takes it. */
static void signal_group(const launch *l, int sig)
{
    if (l->pgid <= 0)
        return;
    (void)kill(-l->pgid, sig);
    if (sig != SIGKILL && sig != SIGCONT)
        (void)kill(-l->pgid, SIGCONT);
}

/* A SIGINT, SIGTERM or SIGHUP to the launcher: to the workers; the second
 * one kills them. */
static void pass_on(launch *l, int sig)
{
    if (l->user_sig != 0) {
        fprintf(stderr, "hirnode: SIG%s again: killing the workers\n", sigabbrev_np(sig));
        signal_group(l, SIGKILL);
        l->kill_at = -1;
        return;
    }
    l->user_sig = sig;
    fprintf(stderr, "hirnode: SIG%s: passed on to the workers\n", sigabbrev_np(sig));
    signal_group(l, sig);
    if (l->deadline == 0) {
        l->deadline = now_s() + l->grace_s;
        snprintf(l->after, sizeof(l->after), "SIG%s", sigabbrev_np(sig));
    }
}

/* The grace is over: the workers still there are named, then ended. */
static void end_overdue(launch *l)
{
    for (int r = 0; r < l->n; r++) {
        worker *w = &l->w[r];
        if (w->pid <= 0 || (w->state != W_RUNNING && w->state != W_STOPPED))
            continue;
        w->overdue = 1;
        if (w->state == W_STOPPED)
            fprintf(stderr, "hirnode: rank %d (pid %d) was still stopped %g s after %s; killed\n", l->first + r,
                    (int)w->pid, l->grace_s, l->after);
        else
            fprintf(stderr, "hirnode: rank %d (pid %d) did not exit within %g s after %s; killed\n", l->first + r,
                    (int)w->pid, l->grace_s, l->after);
    }
    signal_group(l, SIGTERM);
    l->kill_at = now_s() + KILL_AFTER_S;
}

/* Milliseconds poll may wait: until the next deadline, else forever. */
static int wait_ms(const launch *l, double drain_until)
{
    double next = 0, t = now_s();
    if (l->deadline > 0 && l->kill_at == 0)
        next = l->deadline;
    if (l->kill_at > 0)
        next = l->kill_at;
    if (drain_until > 0 && (next == 0 || drain_until < next))
        next = drain_until;
    if (l->note_at > 0 && (next == 0 || l->note_at < next))
        next = l->note_at;
    if (next == 0)
        return -1;
    return next <= t ? 0 : (int)HN_MIN((next - t) * 1e3 + 1, 1e9);
}

/* Until every worker ended and its output was read (or DRAIN_S passed). */
static void gather(launch *l)
{
    struct pollfd *fds = calloc((size_t)l->n + 1, sizeof(*fds));
    int *who = calloc((size_t)l->n + 1, sizeof(int));
    double drain_until = 0;
    for (;;) {
        int nfds = 1, open = 0, alive, got;
        reap(l);
        alive = live(l);
        for (int r = 0; r < l->n; r++)
            open += l->w[r].fd >= 0;
        if (alive == 0 && (open == 0 || (drain_until > 0 && now_s() >= drain_until)))
            break;
        if (alive == 0 && drain_until == 0)
            drain_until = now_s() + DRAIN_S;
        if (l->note_at > 0 && now_s() >= l->note_at) {
            const worker *w = &l->w[l->note_rank];
            l->note_at = 0;
            if (alive > 0) {
                fprintf(stderr, "hirnode: rank %d (pid %d) exited with %d\n", l->first + l->note_rank, (int)w->pid,
                        w->code);
                grace_note(l);
            }
        }
        if (l->deadline > 0 && l->kill_at == 0 && now_s() >= l->deadline)
            end_overdue(l);
        if (l->kill_at > 0 && now_s() >= l->kill_at) {
            signal_group(l, SIGKILL);
            l->kill_at = -1;
        }
        if (fds == NULL || who == NULL) { /* no memory to watch the pipes: they are not read */
            struct timespec ts = {0, 10 * 1000 * 1000};
            nanosleep(&ts, NULL);
            continue;
        }
        fds[0] = (struct pollfd){sig_pipe[0], POLLIN, 0};
        for (int r = 0; r < l->n; r++)
            if (l->w[r].fd >= 0) {
                fds[nfds] = (struct pollfd){l->w[r].fd, POLLIN, 0};
                who[nfds++] = r;
            }
        got = poll(fds, (nfds_t)nfds, wait_ms(l, drain_until));
        if (got < 0 && errno != EINTR) {
            fprintf(stderr, "hirnode: cannot wait for the workers: %s; killing them\n", strerror(errno));
            signal_group(l, SIGKILL);
            l->kill_at = -1;
            nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
            continue;
        }
        if (got > 0 && (fds[0].revents & POLLIN)) {
            unsigned char sigs[64];
            ssize_t k = read(sig_pipe[0], sigs, sizeof(sigs));
            for (ssize_t i = 0; i < k; i++)
                if (sigs[i] != SIGCHLD)
                    pass_on(l, sigs[i]);
        }
        for (int i = 1; got > 0 && i < nfds; i++)
            if (fds[i].revents & (POLLIN | POLLHUP | POLLERR))
                read_output(&l->w[who[i]]);
    }
    for (int r = 0; r < l->n; r++)
        if (l->w[r].fd >= 0) {
            close(l->w[r].fd);
            l->w[r].fd = -1;
        }
    free(fds);
    free(who);
}

/* Rank r's kept output, line by line, "rank R: ..." on stderr. */
static void print_output(int r, const worker *w)
{
    size_t at = 0;
    int marked = w->dropped == 0;
    while (at < w->len || !marked) {
        size_t end;
        const char *nl;
        if (!marked && at >= w->head_end) {
            fprintf(stderr, "rank %d: ... (%zu bytes left out)\n", r, w->dropped);
            marked = 1;
            continue;
        }
        nl = memchr(w->out + at, '\n', w->len - at);
        end = nl != NULL ? (size_t)(nl - w->out) : w->len;
        if (!marked && end > w->head_end)
            end = w->head_end;
        fprintf(stderr, "rank %d: ", r);
        fwrite(w->out + at, 1, end - at, stderr);
        fputc('\n', stderr);
        at = end < w->len && w->out[end] == '\n' ? end + 1 : end;
    }
}

static int failed(const worker *w)
{
    return w->state != W_EXITED || w->code != 0;
}

/* The output of the ranks after the first (rank 0, or with --node the
 * node's first) where the first or they failed; a rank whose output is
 * another's (every rank refusing the same way) refers to it. */
static void print_outputs(const launch *l)
{
    for (int r = 1; r < l->n; r++) {
        const worker *w = &l->w[r];
        int same = -1;
        if (w->len == 0 || (!failed(&l->w[0]) && !failed(w)))
            continue;
        for (int q = 1; q < r && same < 0; q++) {
            const worker *v = &l->w[q];
            if ((failed(&l->w[0]) || failed(v)) && v->len == w->len && v->dropped == w->dropped &&
                v->head_end == w->head_end && memcmp(v->out, w->out, w->len) == 0)
                same = q;
        }
        if (same >= 0)
            fprintf(stderr, "rank %d: (the same output as rank %d)\n", l->first + r, l->first + same);
        else
            print_output(l->first + r, w);
    }
}

/* How a worker ended, in words; ranks that ended alike are told together. */
static void outcome(const worker *w, char *buf, size_t n)
{
    if (w->pid <= 0)
        snprintf(buf, n, "not started");
    else if (w->overdue)
        snprintf(buf, n, "overdue, killed");
    else if (w->state == W_EXITED)
        snprintf(buf, n, "exited with %d", w->code);
    else if (w->code == 0)
        snprintf(buf, n, "lost (cannot be waited for)");
    else
        snprintf(buf, n, "killed by signal %d (%s)", w->code, strsignal(w->code));
}

/* One line saying how every rank ended, when not every one exited with 0:
 * "hirnode: ranks 0, 2-3 exited with 1; rank 1 killed by signal 9 (Killed)". */
static void print_summary(const launch *l)
{
    char *done = calloc((size_t)l->n, 1);
    int all_ok = 1;
    for (int r = 0; r < l->n; r++)
        all_ok &= !failed(&l->w[r]);
    if (all_ok || done == NULL) {
        free(done);
        return;
    }
    fprintf(stderr, "hirnode:");
    for (int r = 0; r < l->n; r++) {
        char what[96], other[96];
        int count = 0, prev = -2, run = 0;
        if (done[r])
            continue;
        outcome(&l->w[r], what, sizeof(what));
        for (int q = r; q < l->n; q++) {
            outcome(&l->w[q], other, sizeof(other));
            count += !done[q] && strcmp(what, other) == 0;
        }
        fprintf(stderr, "%s rank%s", r > 0 ? ";" : "", count > 1 ? "s" : "");
        /* the ranks as runs: "0, 2-5, 7" */
        for (int q = r, listed = 0; q < l->n; q++) {
            outcome(&l->w[q], other, sizeof(other));
            if (done[q] || strcmp(what, other) != 0)
                continue;
            done[q] = 1;
            if (q == prev + 1) {
                run++;
            } else {
                if (run > 0)
                    fprintf(stderr, "%s%d", run > 1 ? "-" : ", ", l->first + prev);
                fprintf(stderr, "%s %d", listed++ ? "," : "", l->first + q);
                run = 0;
            }
            prev = q;
        }
        if (run > 0)
            fprintf(stderr, "%s%d", run > 1 ? "-" : ", ", l->first + prev);
        fprintf(stderr, " %s", what);
    }
    fprintf(stderr, "\n");
    free(done);
}

/* 0 every worker exited with 0; 2 every one with 2 (a usage error or a bad
 * program); other codes: a failure */
static int code_kind(int code)
{
    return code == 0 || code == HN_EXIT_USAGE ? code : HN_EXIT_FAIL;
}

static int exit_code(const launch *l)
{
    for (int r = 0; r < l->n; r++) {
        const worker *w = &l->w[r];
        if (w->state != W_EXITED || w->overdue || code_kind(w->code) != code_kind(l->w[0].code))
            return HN_EXIT_FAIL;
    }
    return l->w[0].code;
}

/* The rendezvous directory the launcher made: empty, or holding the
 * ranks' sockets and nothing else it would remove. */
static void remove_rendezvous(const char *dir, int n)
{
    char path[128];
    if (rmdir(dir) == 0 || errno == ENOENT)
        return;
    for (int r = 0; r < n && (errno == ENOTEMPTY || errno == EEXIST); r++) {
        snprintf(path, sizeof(path), "%s/rank-%d.sock", dir, r);
        (void)unlink(path);
    }
    if (rmdir(dir) != 0 && errno != ENOENT)
        fprintf(stderr, "hirnode: left the rendezvous directory %s: %s\n", dir, strerror(errno));
}

int hn_cli_launch(const char *name, const hn_cli_procs *p, double timeout_s, char **argv)
{
    char made[] = "/tmp/hn-XXXXXX", rank_env[32], port[32];
    const char *dir = p->rendezvous, *store = NULL;
    struct sigaction act;
    sigset_t block, mask;
    char **env = NULL;
    int devnull = -1, rc = HN_EXIT_FAIL, started = 0, made_here, e, world = HN_MAX(p->nodes, 1) * p->n;
    launch l;
    memset(&l, 0, sizeof(l));
    l.n = p->node >= 0 ? p->n : world; /* all nodes here, or node K's ranks */
    l.first = p->node >= 0 ? p->node * p->n : 0;
    /* a rank waiting for a stopped one fails at its deadline, then waits
     * as long again for it at the end of the run (where all agree on the
     * outcome) before it names it: twice the timeout */
    l.grace_s = 2 * timeout_s + GRACE_EXTRA_S;
    if (p->nodes > 1) { /* no rendezvous: the workers meet through the store */
        if ((e = hn_cli_world_store(p, port, sizeof(port), &store)) != 0) {
            fprintf(stderr, "%s: cannot find a free port of 127.0.0.1 for the store: %s\n", name, strerror(e));
            return HN_EXIT_FAIL;
        }
    } else if (dir == NULL && (dir = mkdtemp(made)) == NULL) {
        fprintf(stderr, "%s: cannot make a rendezvous directory under /tmp: %s\n", name, strerror(errno));
        return HN_EXIT_FAIL;
    }
    made_here = dir == made;
    if ((l.w = calloc((size_t)l.n, sizeof(worker))) == NULL ||
        (env = hn_cli_worker_env(world, p->nodes, dir, store, rank_env)) == NULL) {
        fprintf(stderr, "%s: out of memory\n", name);
        goto remove_dir;
    }
    if ((devnull = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0 || pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
        fprintf(stderr, "%s: cannot start the workers: %s\n", name, strerror(errno));
        goto close_fds;
    }
    for (int r = 0; r < l.n; r++)
        l.w[r].fd = -1;
    /* the handlers write to the pipe the loop polls; the signals wait
     * while the workers are forked (each child restores both) */
    memset(&act, 0, sizeof(act));
    act.sa_handler = on_signal;
    act.sa_flags = SA_RESTART; /* SIGCHLD for stops too: no SA_NOCLDSTOP */
    sigemptyset(&act.sa_mask);
    sigemptyset(&block);
    for (int i = 0; i < HN_ARRAY_LEN(caught); i++) {
        sigaction(caught[i], NULL, &l.before[i]);
        /* what the launcher was started ignoring (nohup: SIGHUP) it does
         * not pass on; SIGCHLD it needs */
        if (caught[i] == SIGCHLD || l.before[i].sa_handler != SIG_IGN)
            sigaction(caught[i], &act, NULL);
        sigaddset(&block, caught[i]);
    }
    sigprocmask(SIG_BLOCK, &block, &mask);
    fflush(stdout);
    fflush(stderr);
    for (int r = 0; r < l.n; r++) {
        snprintf(rank_env, sizeof(rank_env), "HIRNODE_RANK=%d", l.first + r);
        if ((e = start_worker(&l, r, devnull, argv, env, &mask)) != 0) {
            fprintf(stderr, "%s: cannot start the worker of rank %d: %s; ending the others\n", name, l.first + r,
                    strerror(e));
            signal_group(&l, SIGKILL);
            break;
        }
        started++;
    }
    sigprocmask(SIG_SETMASK, &mask, NULL);
    if (started > 0)
        gather(&l);
    /* anything of the group still there (a worker's own children) */
    signal_group(&l, SIGKILL);
    if (started > 0)
        (void)waitpid(l.w[0].pid, NULL, 0);
    /* nothing left to undo before the signals are given back */
    if (made_here)
        remove_rendezvous(dir, l.n);
    made_here = 0;
    for (int i = 0; i < HN_ARRAY_LEN(caught); i++)
        sigaction(caught[i], &l.before[i], NULL);
    print_outputs(&l);
    print_summary(&l);
    rc = started == l.n ? exit_code(&l) : HN_EXIT_FAIL;
close_fds:
    if (sig_pipe[0] >= 0) {
        close(sig_pipe[0]);
        close(sig_pipe[1]);
        sig_pipe[0] = sig_pipe[1] = -1;
    }
    if (devnull >= 0)
        close(devnull);
remove_dir:
    if (made_here)
        remove_rendezvous(dir, l.n);
    for (int r = 0; l.w != NULL && r < l.n; r++)
        free(l.w[r].out);
    free(l.w);
    free(env);
    if (l.user_sig != 0) { /* ended as the signal would have ended it */
        signal(l.user_sig, SIG_DFL);
        sigemptyset(&block);
        sigaddset(&block, l.user_sig);
        sigprocmask(SIG_UNBLOCK, &block, NULL);
        raise(l.user_sig);
        rc = 128 + l.user_sig;
    }
    return rc;
}
