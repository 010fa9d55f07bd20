/* The rendezvous of a world's processes (rendezvous.h): rank 0 listens on
 * DIR/rank-0.sock (a sequenced-packet Unix socket: messages keep their
 * bounds, memfds travel with SCM_RIGHTS), the others connect and greet;
 * rank 0 makes the world's memory and offers an address range, which
 * every process reserves where rank 0 has it or refuses (then rank 0
 * offers another). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "rendezvous.h"
#include "world.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

#define RDV_MAGIC 0x686e7264u /* "hnrd" */
#define RDV_PROTO 1u
#define ALIGN_BYTES ((size_t)2 << 20) /* each part of the range: whole 2 MiB */
#define OFFERS 16                       /* ranges offered before giving up */
#define FDS_PER_MSG 200                 /* well under the kernel's 253 per message */

enum { M_HELLO = 1, M_NAK, M_OFFER, M_FDS, M_YES, M_NO, M_GO, M_AGAIN, M_BYE };

typedef struct hello {
    uint32_t magic, proto;
    int32_t world, rank, pid, has_arena;
    uint64_t check, world_bytes, arena_bytes;
    char text[1024];
} hello;

typedef struct offer {
    uint64_t addr, arena, world_bytes, arenas; /* where the world's and the devices' memory go */
    int32_t pid, count; /* rank 0's pid; the fds that come with M_FDS: world, then every rank's device memory */
    int32_t pids[HN_WORLD_MAX_RANKS]; /* every rank's (to name a stopped one) */
} offer;

typedef struct msg {
    uint32_t type, len;
    unsigned char data[sizeof(hello) > sizeof(offer) ? sizeof(hello) : sizeof(offer)];
} msg;

struct hn_rdv {
    int world, rank;
    int *fd;  /* rank 0: [q] the socket to q; others: [0] the socket to rank 0 */
    int *pid; /* [q] */
    int *bye; /* [q]: said goodbye */
    unsigned char *base;  /* the world's memory (host) */
    unsigned char *arena; /* every rank's device memory, one after another */
    size_t world_bytes, arena_bytes, arenas; /* rounded; arenas: world * arena_bytes */
    const hn_share_ops *share;
    int ord, mapped;     /* mapped: how many ranks' device memory is mapped */
    uint64_t own_handle; /* this rank's device memory, as its backend keeps it */
    int made;
    pthread_t watcher;
    int watching, quiet, wake[2];
    void (*lost)(void *, int, const char *);
    void *lost_ctx;
};

static size_t round_up(size_t x) { return (x + ALIGN_BYTES - 1) / ALIGN_BYTES * ALIGN_BYTES; }

/* ---- messages ---- */

static int send_msg(int fd, uint32_t type, const void *data, uint32_t len, const int *fds, int nfds)
{
    struct msghdr mh;
    struct iovec iov[2];
    uint32_t head[2] = {type, len};
    union {
        char buf[CMSG_SPACE(sizeof(int) * FDS_PER_MSG)];
        struct cmsghdr align;
    } u;
    memset(&mh, 0, sizeof(mh));
    iov[0].iov_base = head;
    iov[0].iov_len = sizeof(head);
    iov[1].iov_base = (void *)data;
    iov[1].iov_len = len;
    mh.msg_iov = iov;
    mh.msg_iovlen = len > 0 ? 2 : 1;
    if (nfds > 0) {
        struct cmsghdr *cm;
        memset(&u, 0, sizeof(u));
        mh.msg_control = u.buf;
        mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
        cm = CMSG_FIRSTHDR(&mh);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
        memcpy(CMSG_DATA(cm), fds, sizeof(int) * (size_t)nfds);
    }
    for (;;) {
        ssize_t n = sendmsg(fd, &mh, MSG_NOSIGNAL);
        if (n >= 0)
            return 0;
        if (errno != EINTR)
            return -1;
    }
}

/* One message within the deadline: 1, 0 at the peer's end of the
 * connection, -1 on an error or past the deadline (errno ETIMEDOUT).
 * Received fds go to fds (up to *nfds; *nfds becomes their count; any
 * beyond are closed). */
static int recv_msg(int fd, msg *m, int *fds, int *nfds, double end)
{
    struct msghdr mh;
    struct iovec iov;
    union {
        char buf[CMSG_SPACE(sizeof(int) * FDS_PER_MSG)];
        struct cmsghdr align;
    } u;
    int cap = nfds != NULL ? *nfds : 0;
    ssize_t n;
    if (nfds != NULL)
        *nfds = 0;
    for (;;) {
        struct pollfd p = {fd, POLLIN, 0};
        double left = end - hn_now();
        int k;
        if (left <= 0) {
            errno = ETIMEDOUT;
            return -1;
        }
        k = poll(&p, 1, (int)(HN_MIN(left, 0.1) * 1000) + 1);
        if (k < 0 && errno != EINTR)
            return -1;
        if (k > 0)
            break;
    }
    memset(&mh, 0, sizeof(mh));
    iov.iov_base = m;
    iov.iov_len = sizeof(*m);
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = u.buf;
    mh.msg_controllen = sizeof(u.buf);
    do
        n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return -1;
    if (n == 0)
        return 0;
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm != NULL; cm = CMSG_NXTHDR(&mh, cm))
        if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
            int k = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
            for (int i = 0; i < k; i++) {
                int f;
                memcpy(&f, CMSG_DATA(cm) + (size_t)i * sizeof(int), sizeof(int));
                if (nfds != NULL && *nfds < cap)
                    fds[(*nfds)++] = f;
                else
                    close(f);
            }
        }
    if ((size_t)n < 2 * sizeof(uint32_t) || m->len > sizeof(m->data) || (size_t)n != 2 * sizeof(uint32_t) + m->len) {
        errno = EPROTO;
        return -1;
    }
    return 1;
}

/* ---- the directory and the socket ---- */

static hn_status_t check_dir(const char *dir, struct sockaddr_un *sa, hn_strbuf *why)
{
    struct stat st;
    memset(sa, 0, sizeof(*sa));
    sa->sun_family = AF_UNIX;
    if (dir == NULL || dir[0] == '\0') {
        hn_sb_printf(why, "rendezvous: no directory given (HIRNODE_RENDEZVOUS)");
        return HN_ERR_INVALID;
    }
    if ((size_t)snprintf(sa->sun_path, sizeof(sa->sun_path), "%s/rank-0.sock", dir) >= sizeof(sa->sun_path)) {
        hn_sb_printf(why, "rendezvous %s: the path is too long for a socket (%zu bytes at most, with "
                     "/rank-0.sock)", dir, sizeof(sa->sun_path) - 1);
        return HN_ERR_INVALID;
    }
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        hn_sb_printf(why, "rendezvous %s: not a directory%s%s", dir, errno != 0 ? ": " : "",
                     errno != 0 ? strerror(errno) : "");
        return HN_ERR_INVALID;
    }
    if (st.st_uid != getuid()) {
        hn_sb_printf(why, "rendezvous %s: the directory belongs to another user (uid %u)", dir, (unsigned)st.st_uid);
        return HN_ERR_INVALID;
    }
    if ((st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX)) {
        hn_sb_printf(why, "rendezvous %s: the directory is writable by anyone (and not sticky)", dir);
        return HN_ERR_INVALID;
    }
    return HN_OK;
}

static int same_user(int fd)
{
    struct ucred cr;
    socklen_t len = sizeof(cr);
    return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) == 0 && cr.uid == getuid();
}

/* Whether a world listens on sa (a connection is taken). */
static int answers(const struct sockaddr_un *sa)
{
    int probe = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0), live;
    if (probe < 0)
        return 0;
    live = connect(probe, (const struct sockaddr *)sa, sizeof(*sa)) == 0;
    close(probe);
    return live;
}

/* Rank 0's listening socket; a socket file left by a world that ended is
 * replaced, a live one refused. */
static int listen_at(const struct sockaddr_un *sa, int world, hn_strbuf *why)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        if (fd < 0)
            break;
        if (bind(fd, (const struct sockaddr *)sa, sizeof(*sa)) == 0) {
            if (listen(fd, world) == 0)
                return fd;
            close(fd);
            break;
        }
        close(fd);
        if (errno != EADDRINUSE)
            break;
        if (answers(sa)) {
            hn_sb_printf(why, "rendezvous: %s is in use by another world", sa->sun_path);
            return -1;
        }
        {
            struct stat st;
            if (lstat(sa->sun_path, &st) != 0 || !S_ISSOCK(st.st_mode)) {
                hn_sb_printf(why, "rendezvous: %s is there and is no socket (not removed)", sa->sun_path);
                return -1;
            }
        }
        if (attempt == 0) { /* a world's rank 0 between bind and listen refuses too: look once more */
            struct timespec ts = {0, 50000000};
            nanosleep(&ts, NULL);
            if (answers(sa)) {
                hn_sb_printf(why, "rendezvous: %s is in use by another world", sa->sun_path);
                return -1;
            }
        }
        unlink(sa->sun_path); /* stale: its world is gone */
    }
    hn_sb_printf(why, "rendezvous: cannot listen on %s: %s", sa->sun_path, strerror(errno));
    return -1;
}

static int connect_to(const struct sockaddr_un *sa, double end)
{
    double pause = 0.002;
    while (hn_now() < end) {
        int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        if (fd < 0)
            return -1;
        if (connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) == 0)
            return fd;
        close(fd);
        if (errno != ENOENT && errno != ECONNREFUSED && errno != EAGAIN && errno != EINTR)
            return -1;
        { struct timespec ts = {0, (long)(pause * 1e9)}; nanosleep(&ts, NULL); }
        pause = HN_MIN(pause * 2, 0.05);
    }
    errno = ETIMEDOUT;
    return -1;
}

/* ---- memory ---- */

static int make_memfd(const char *name, size_t bytes)
{
    int fd = memfd_create(name, MFD_CLOEXEC);
    if (fd >= 0 && ftruncate(fd, (off_t)bytes) != 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* Both ranges reserved at world_at and arena_at (NULL: anywhere), and
 * every part mapped there (fds: the world, then each rank's device
 * memory): 0, or -1 with nothing left reserved. */
static int map_all(hn_rdv *r, void *world_at, void *arena_at, const int *fds, unsigned char **wout,
                   unsigned char **aout)
{
    int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | (world_at != NULL ? MAP_FIXED_NOREPLACE : 0);
    unsigned char *w = mmap(world_at, r->world_bytes, PROT_NONE, flags, -1, 0), *a = NULL;
    int q = 0;
    if (w == MAP_FAILED)
        return -1;
    if (world_at != NULL && w != world_at) /* a kernel that takes the flag as a hint */
        goto undo_world;
    if (mmap(w, r->world_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fds[0], 0) == MAP_FAILED)
        goto undo_world;
    if (r->arena_bytes > 0) {
        if ((a = r->share->reserve(r->ord, arena_at, r->arenas)) == NULL)
            goto undo_world;
        for (q = 0; q < r->world; q++)
            if (r->share->map(r->ord, fds[1 + q], a + (size_t)q * r->arena_bytes, r->arena_bytes) != HN_OK)
                goto undo_arena;
    }
    *wout = w;
    *aout = a;
    return 0;
undo_arena:
    while (q-- > 0)
        r->share->unmap(r->ord, a + (size_t)q * r->arena_bytes, r->arena_bytes);
    r->share->unreserve(r->ord, a, r->arenas);
undo_world:
    munmap(w, r->world_bytes);
    return -1;
}

static void unmap_all(hn_rdv *r, unsigned char *w, unsigned char *a)
{
    for (int q = 0; a != NULL && q < r->world; q++)
        r->share->unmap(r->ord, a + (size_t)q * r->arena_bytes, r->arena_bytes);
    if (a != NULL)
        r->share->unreserve(r->ord, a, r->arenas);
    munmap(w, r->world_bytes);
}

static void close_all(int *fds, int n)
{
    for (int i = 0; i < n; i++)
        if (fds[i] >= 0) {
            close(fds[i]);
            fds[i] = -1;
        }
}

/* ---- rank 0 ---- */

static void nak_all(hn_rdv *r, const char *text)
{
    for (int q = 1; q < r->world; q++)
        if (r->fd[q] >= 0)
            (void)send_msg(r->fd[q], M_NAK, text, (uint32_t)strlen(text) + 1, NULL, 0);
}

static hn_status_t greet_all(hn_rdv *r, const hn_rdv_setup *c, int lfd, int *arena_fd, double end,
                             hn_strbuf *why)
{
    int got = 1;
    while (got < r->world) {
        struct pollfd p = {lfd, POLLIN, 0};
        msg m;
        hello h;
        int fd, nf = 1, af = -1, k;
        double left = end - hn_now();
        if (left <= 0) {
            hn_sb_printf(why, "rendezvous %s: rank%s", c->dir, r->world - got > 1 ? "s" : "");
            for (int q = 1; q < r->world; q++)
                if (r->fd[q] < 0)
                    hn_sb_printf(why, " %d", q);
            hn_sb_printf(why, " never connected (waited %.3g s)", c->timeout_s);
            return HN_ERR_TIMEOUT;
        }
        if ((k = poll(&p, 1, (int)(HN_MIN(left, 0.1) * 1000) + 1)) <= 0)
            continue;
        if ((fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC)) < 0)
            continue;
        if (!same_user(fd) || recv_msg(fd, &m, &af, &nf, HN_MIN(end, hn_now() + 5.0)) != 1 || m.type != M_HELLO ||
            m.len != sizeof(hello)) {
            if (nf > 0)
                close(af);
            close(fd); /* not one of ours */
            continue;
        }
        memcpy(&h, m.data, sizeof(h));
        h.text[sizeof(h.text) - 1] = '\0';
        if (h.magic != RDV_MAGIC || h.proto != RDV_PROTO || h.world != r->world || h.rank < 1 ||
            h.rank >= r->world || r->fd[h.rank] >= 0 || h.check != c->check ||
            h.world_bytes != (uint64_t)c->world_bytes || h.arena_bytes != (uint64_t)c->arena_bytes ||
            (c->arena_bytes > 0) != (nf == 1)) {
            char text[2400];
            if (h.magic != RDV_MAGIC || h.proto != RDV_PROTO)
                snprintf(text, sizeof(text), "a process of another hirnode build connected");
            else if (h.world != r->world)
                snprintf(text, sizeof(text), "rank %d is in a world of %d ranks, rank 0 in one of %d", h.rank,
                         h.world, r->world);
            else if (h.rank < 1 || h.rank >= r->world || r->fd[h.rank] >= 0)
                snprintf(text, sizeof(text), "two processes say they are rank %d (pid %d)", h.rank, h.pid);
            else
                snprintf(text, sizeof(text), "rank %d differs from rank 0: %s (rank 0: %s)", h.rank, h.text,
                         c->check_text != NULL ? c->check_text : "?");
            (void)send_msg(fd, M_NAK, text, (uint32_t)strlen(text) + 1, NULL, 0);
            if (nf > 0)
                close(af);
            close(fd);
            nak_all(r, text);
            hn_sb_printf(why, "rendezvous %s: %s", c->dir, text);
            return HN_ERR_MISMATCH;
        }
        r->fd[h.rank] = fd;
        r->pid[h.rank] = h.pid;
        arena_fd[h.rank] = nf > 0 ? af : -1;
        got++;
    }
    return HN_OK;
}

/* Offers ranges until every process could map at them. Rank 0 maps
 * anywhere first; a range a peer cannot take stays reserved here while the
 * next is tried, so that it lies elsewhere. */
static hn_status_t agree_as_first(hn_rdv *r, int *fds, double end, hn_strbuf *why)
{
    unsigned char *tried_w[OFFERS], *tried_a[OFFERS];
    int ntried = 0, sent = 0;
    hn_status_t st = HN_ERR_NOMEM;
    for (int attempt = 0; attempt < OFFERS; attempt++) {
        unsigned char *w, *a;
        offer o;
        int yes = 1;
        if (map_all(r, NULL, NULL, fds, &w, &a) != 0) {
            hn_sb_printf(why, "rendezvous: cannot map %zu bytes of the world's memory and %zu of the devices' "
                         "(HIRNODE_SHARED_MEM_MIB): %s", r->world_bytes, r->arenas, strerror(errno));
            goto out;
        }
        memset(&o, 0, sizeof(o));
        o.addr = (uint64_t)(uintptr_t)w;
        o.arena = (uint64_t)(uintptr_t)a;
        o.world_bytes = r->world_bytes;
        o.arenas = r->arenas;
        o.pid = (int32_t)getpid();
        for (int q = 0; q < r->world; q++)
            o.pids[q] = r->pid[q];
        o.count = 1 + (r->arena_bytes > 0 ? r->world : 0);
        for (int q = 1; q < r->world; q++) {
            if (send_msg(r->fd[q], M_OFFER, &o, sizeof(o), NULL, 0) != 0)
                goto io;
            for (int i = 0; !sent && i < o.count; i += FDS_PER_MSG)
                if (send_msg(r->fd[q], M_FDS, NULL, 0, fds + i, HN_MIN(FDS_PER_MSG, o.count - i)) != 0)
                    goto io;
        }
        sent = 1;
        for (int q = 1; q < r->world; q++) {
            msg m;
            int k = recv_msg(r->fd[q], &m, NULL, NULL, end);
            if (k != 1) {
                hn_sb_printf(why, "rendezvous: rank %d (pid %d) %s while the address range was agreed", q,
                             r->pid[q], k == 0 ? "left" : errno == ETIMEDOUT ? "did not answer" : strerror(errno));
                unmap_all(r, w, a);
                st = k == 0 ? HN_ERR_PEER_LOST : k < 0 && errno == ETIMEDOUT ? HN_ERR_TIMEOUT : HN_ERR_IO;
                goto out;
            }
            yes &= m.type == M_YES;
        }
        if (yes) {
            for (int q = 1; q < r->world; q++)
                if (send_msg(r->fd[q], M_GO, NULL, 0, NULL, 0) != 0) {
                    unmap_all(r, w, a);
                    goto io;
                }
            r->base = w;
            r->arena = a;
            st = HN_OK;
            goto out;
        }
        for (int q = 1; q < r->world; q++)
            if (send_msg(r->fd[q], M_AGAIN, NULL, 0, NULL, 0) != 0) {
                unmap_all(r, w, a);
                goto io;
            }
        tried_w[ntried] = w;
        tried_a[ntried++] = a;
    }
    hn_sb_printf(why, "rendezvous: no address range was free in every process (%d tried)", OFFERS);
    goto out;
io:
    hn_sb_printf(why, "rendezvous: a rank left while the address range was agreed: %s", strerror(errno));
    st = HN_ERR_IO;
out:
    for (int i = 0; i < ntried; i++)
        unmap_all(r, tried_w[i], tried_a[i]);
    return st;
}

/* ---- the others ---- */

/* What rank 0 said instead of the next step (k: recv_msg's result):
 * its refusal's text, or why it cannot be heard. */
static hn_status_t peer_failed(hn_rdv *r, int k, msg *m, hn_strbuf *why)
{
    if (k == 1 && m->type == M_NAK) {
        m->data[sizeof(m->data) - 1] = '\0';
        hn_sb_printf(why, "rendezvous: %s", (const char *)m->data);
        return HN_ERR_MISMATCH;
    }
    if (k < 0 && errno == ETIMEDOUT) {
        hn_sb_printf(why, "rendezvous: rank 0 (pid %d) did not answer in time", r->pid[0]);
        return HN_ERR_TIMEOUT;
    }
    if (k == 1) {
        hn_sb_printf(why, "rendezvous: rank 0 (pid %d) sent what this rank did not expect (message %u)", r->pid[0],
                     m->type);
        return HN_ERR_IO;
    }
    hn_sb_printf(why, "rendezvous: rank 0 (pid %d) left before the world was made", r->pid[0]);
    return HN_ERR_PEER_LOST;
}

static hn_status_t agree_as_peer(hn_rdv *r, int *fds, double end, hn_strbuf *why)
{
    int nfds = 0, want = 1 + (r->arena_bytes > 0 ? r->world : 0);
    for (;;) {
        msg m;
        offer o;
        unsigned char *w = NULL, *a = NULL;
        int ok, k = recv_msg(r->fd[0], &m, NULL, NULL, end);
        if (k != 1 || m.type != M_OFFER || m.len != sizeof(o))
            return peer_failed(r, k, &m, why);
        memcpy(&o, m.data, sizeof(o));
        for (int q = 0; q < r->world; q++)
            if (q != r->rank)
                r->pid[q] = o.pids[q];
        while (nfds < want) {
            int got = FDS_PER_MSG;
            if ((k = recv_msg(r->fd[0], &m, fds + nfds, &got, end)) != 1 || m.type != M_FDS || got == 0)
                return peer_failed(r, k == 1 && m.type == M_FDS ? 0 : k, &m, why);
            nfds += got;
        }
        ok = o.world_bytes == r->world_bytes && o.arenas == r->arenas &&
             map_all(r, (void *)(uintptr_t)o.addr, o.arena != 0 ? (void *)(uintptr_t)o.arena : NULL, fds, &w,
                     &a) == 0;
        if (send_msg(r->fd[0], ok ? M_YES : M_NO, NULL, 0, NULL, 0) != 0)
            k = 0;
        else
            k = recv_msg(r->fd[0], &m, NULL, NULL, end);
        if (k != 1 || (m.type != M_GO && m.type != M_AGAIN)) {
            if (ok)
                unmap_all(r, w, a);
            return peer_failed(r, k, &m, why);
        }
        if (m.type == M_GO && ok) {
            r->base = w;
            r->arena = a;
            return HN_OK;
        }
        if (ok)
            unmap_all(r, w, a);
    }
}

/* The sockets closed, this rank's device memory released (mappings
 * elsewhere keep it), r freed. */
static void rdv_free(hn_rdv *r)
{
    if (r->fd != NULL)
        close_all(r->fd, r->world);
    if (r->made)
        r->share->unmake(r->ord, r->own_handle);
    hn_free(r->fd);
    hn_free(r->pid);
    hn_free(r->bye);
    hn_free(r);
}

/* ---- join ---- */

hn_status_t hn_rdv_join(const hn_rdv_setup *c, hn_rdv **out, hn_strbuf *why)
{
    struct sockaddr_un sa;
    hn_rdv *r;
    hn_status_t st;
    double end;
    int lfd = -1, *fds = NULL, nparts;
    if (c == NULL || out == NULL || c->world < 1 || c->world > HN_WORLD_MAX_RANKS || c->rank < 0 ||
        c->rank >= c->world || !(c->timeout_s > 0) || c->world_bytes == 0 || (c->arena_bytes > 0 && c->share == NULL)) {
        hn_sb_printf(why, "rendezvous: bad arguments");
        return HN_ERR_INVALID;
    }
    if ((st = check_dir(c->dir, &sa, why)) != HN_OK)
        return st;
    end = hn_now() + c->timeout_s;
    if ((r = hn_calloc(1, sizeof(*r))) == NULL)
        return HN_ERR_NOMEM;
    r->world = c->world;
    r->rank = c->rank;
    r->world_bytes = round_up(c->world_bytes);
    r->arena_bytes = c->arena_bytes > 0 ? round_up(c->arena_bytes) : 0;
    r->arenas = (size_t)c->world * r->arena_bytes;
    r->share = c->share;
    r->ord = c->ord;
    r->wake[0] = r->wake[1] = -1;
    nparts = 1 + c->world;
    r->fd = hn_calloc((size_t)c->world, sizeof(int));
    r->pid = hn_calloc((size_t)c->world, sizeof(int));
    r->bye = hn_calloc((size_t)c->world, sizeof(int));
    fds = hn_calloc((size_t)nparts, sizeof(int));
    for (int q = 0; r->fd != NULL && q < c->world; q++)
        r->fd[q] = -1; /* none open yet: nothing for a failure below to close */
    for (int i = 0; fds != NULL && i < nparts; i++)
        fds[i] = -1;
    if (r->fd == NULL || r->pid == NULL || r->bye == NULL || fds == NULL) {
        st = HN_ERR_NOMEM;
        goto fail;
    }
    r->pid[c->rank] = (int)getpid();
    if (c->rank == 0) {
        if ((lfd = listen_at(&sa, c->world, why)) < 0) {
            st = HN_ERR_IO;
            goto fail;
        }
        if (c->arena_bytes > 0 && (fds[1] = c->share->make(c->ord, r->arena_bytes, &r->own_handle)) < 0) {
            hn_sb_printf(why, "rendezvous: cannot make rank 0's device memory (%zu bytes, HIRNODE_SHARED_MEM_MIB)",
                         r->arena_bytes);
            st = HN_ERR_NOMEM;
            goto fail;
        }
        r->made = c->arena_bytes > 0;
        st = greet_all(r, c, lfd, fds + 1, end, why);
        close(lfd);
        lfd = -1;
        unlink(sa.sun_path); /* everyone came (or nobody will): nothing stays on disk */
        if (st != HN_OK)
            goto fail;
        if ((fds[0] = make_memfd("hirnode-world", r->world_bytes)) < 0) {
            hn_sb_printf(why, "rendezvous: cannot make the world's memory: %s", strerror(errno));
            nak_all(r, "rank 0 could not make the world's memory");
            st = HN_ERR_NOMEM;
            goto fail;
        }
        if ((st = agree_as_first(r, fds, end, why)) != HN_OK) {
            nak_all(r, "rank 0 could not agree on an address range");
            goto fail;
        }
    } else {
        hello h;
        int own = -1;
        if ((r->fd[0] = connect_to(&sa, end)) < 0) {
            hn_sb_printf(why, "rendezvous %s: rank 0 never listened (waited %.3g s)", c->dir, c->timeout_s);
            st = HN_ERR_TIMEOUT;
            goto fail;
        }
        if (c->arena_bytes > 0 && (own = c->share->make(c->ord, r->arena_bytes, &r->own_handle)) < 0) {
            hn_sb_printf(why, "rendezvous: cannot make rank %d's device memory (%zu bytes, HIRNODE_SHARED_MEM_MIB)",
                         c->rank, r->arena_bytes);
            st = HN_ERR_NOMEM;
            goto fail;
        }
        r->made = own >= 0;
        memset(&h, 0, sizeof(h));
        h.magic = RDV_MAGIC;
        h.proto = RDV_PROTO;
        h.world = c->world;
        h.rank = c->rank;
        h.pid = (int)getpid();
        h.has_arena = own >= 0;
        h.check = c->check;
        h.world_bytes = c->world_bytes;
        h.arena_bytes = c->arena_bytes;
        snprintf(h.text, sizeof(h.text), "%s", c->check_text != NULL ? c->check_text : "");
        if (send_msg(r->fd[0], M_HELLO, &h, sizeof(h), own >= 0 ? &own : NULL, own >= 0) != 0) {
            if (own >= 0)
                close(own);
            hn_sb_printf(why, "rendezvous: cannot greet rank 0: %s", strerror(errno));
            st = HN_ERR_IO;
            goto fail;
        }
        if (own >= 0)
            close(own); /* rank 0 passes it back with the others */
        if ((st = agree_as_peer(r, fds, end, why)) != HN_OK)
            goto fail;
    }
    close_all(fds, nparts); /* the mappings keep the memory */
    hn_free(fds);
    *out = r;
    return HN_OK;
fail:
    if (lfd >= 0) {
        close(lfd);
        unlink(sa.sun_path);
    }
    if (fds != NULL)
        close_all(fds, nparts);
    hn_free(fds);
    rdv_free(r);
    return st;
}

void *hn_rdv_world_base(const hn_rdv *r) { return r->base; }

void *hn_rdv_arena(const hn_rdv *r, int rank)
{
    return r->arena != NULL && rank >= 0 && rank < r->world ? r->arena + (size_t)rank * r->arena_bytes : NULL;
}

int hn_rdv_pid(const hn_rdv *r, int rank) { return rank >= 0 && rank < r->world ? r->pid[rank] : 0; }

int hn_rdv_stopped(const hn_rdv *r, int rank)
{
    char path[64], buf[256], *p;
    FILE *f;
    size_t n;
    int pid = hn_rdv_pid(r, rank);
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    if (pid <= 0 || (f = fopen(path, "r")) == NULL)
        return 0;
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    p = strrchr(buf, ')'); /* "pid (comm) S ..." */
    return p != NULL && p[1] == ' ' && (p[2] == 'T' || p[2] == 't');
}

void hn_rdv_say_stopped(const hn_rdv *r, char *text, size_t cap)
{
    size_t n = strlen(text);
    for (int q = 0; q < r->world && n < cap; q++)
        if (q != r->rank && hn_rdv_stopped(r, q)) {
            int k = snprintf(text + n, cap - n, "; rank %d (pid %d) is stopped", q, r->pid[q]);
            n = k > 0 ? n + (size_t)k : n;
        }
}

/* ---- the watch ---- */

static void *watch(void *arg)
{
    hn_rdv *r = arg;
    int n = r->world + 1;
    struct pollfd *p = hn_calloc((size_t)n, sizeof(*p));
    int *who = hn_calloc((size_t)n, sizeof(int));
    if (p == NULL || who == NULL)
        goto out;
    for (;;) {
        int k = 0;
        p[k].fd = r->wake[0];
        p[k].events = POLLIN;
        who[k++] = -1;
        for (int q = 0; q < r->world; q++)
            if (r->fd[q] >= 0) {
                p[k].fd = r->fd[q];
                p[k].events = POLLIN;
                who[k++] = q;
            }
        if (poll(p, (nfds_t)k, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (p[0].revents != 0)
            break; /* leaving */
        for (int i = 1; i < k; i++) {
            int q = who[i], peer = r->rank == 0 ? q : 0;
            msg m;
            int got;
            if (p[i].revents == 0)
                continue;
            got = recv_msg(r->fd[q], &m, NULL, NULL, hn_now() + 1.0);
            if (got == 1) {
                if (m.type == M_BYE)
                    r->bye[q] = 1;
                continue;
            }
            close(r->fd[q]);
            r->fd[q] = -1;
            if (!r->bye[q] && r->lost != NULL) {
                char text[256];
                snprintf(text, sizeof(text), "its process (pid %d) died without leaving the world", r->pid[peer]);
                r->lost(r->lost_ctx, peer, text);
            }
        }
    }
out:
    hn_free(p);
    hn_free(who);
    return NULL;
}

hn_status_t hn_rdv_watch(hn_rdv *r, void (*lost)(void *ctx, int rank, const char *text), void *ctx)
{
    if (r->watching)
        return HN_ERR_INVALID;
    if (pipe2(r->wake, O_CLOEXEC) != 0)
        return HN_ERR_IO;
    r->lost = lost;
    r->lost_ctx = ctx;
    if (pthread_create(&r->watcher, NULL, watch, r) != 0) {
        close(r->wake[0]);
        close(r->wake[1]);
        r->wake[0] = r->wake[1] = -1;
        return HN_ERR_NOMEM;
    }
    r->watching = 1;
    return HN_OK;
}

void hn_rdv_quiet(hn_rdv *r)
{
    if (r == NULL || r->quiet)
        return;
    r->quiet = 1;
    /* the watch first: it closes the sockets of peers that went, so the
     * goodbyes below go only to sockets it left open */
    if (r->watching) {
        char one = 1;
        ssize_t ignored = write(r->wake[1], &one, 1);
        (void)ignored;
        pthread_join(r->watcher, NULL);
        close(r->wake[0]);
        close(r->wake[1]);
        r->watching = 0;
    }
    for (int q = 0; q < r->world; q++)
        if (r->fd[q] >= 0)
            (void)send_msg(r->fd[q], M_BYE, NULL, 0, NULL, 0);
}

void hn_rdv_leave(hn_rdv *r)
{
    if (r == NULL)
        return;
    hn_rdv_quiet(r);
    if (r->base != NULL)
        unmap_all(r, r->base, r->arena);
    rdv_free(r);
}
