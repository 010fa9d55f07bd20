/* The link between the nodes of a world (net.h). A frame is a header of
 * 24 bytes (an operation byte, three spare, three 32-bit words a, b, c,
 * the payload's length, a 64-bit tag; little-endian) and the payload.
 *
 * To the server: 'H' hello (a rank, b node; "pid host"), 'P' put (tag, a
 * from, b readers; the blob), 'T' take (tag, a from), 'W' withdraw a take,
 * 'A' a failure (a status, b rank, c instruction; the text), 'K' heartbeat,
 * 'B' goodbye. From the server: 'D' a blob taken (tag, a from), 'A' a
 * failure passed on, 'L' a death (a rank; the text), 'K', 'B'.
 *
 * The server is one thread polling the listening socket, a wake-up pipe
 * and every connection; it answers takes in the order they come and
 * drops a blob once its readers took it. A client has one thread that
 * reads the server's frames, hands blobs to the takes that wait for
 * them and sends the heartbeat; the callers' threads send. */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "net.h"
#include "sock.h"

#define HEAD 32
#define CONNS_MAX 1024
#define TEXT_MAX 2048 /* a failure's or a death's text, at most */
#define SLICE_S 0.05

/* ---- frames ---- */

typedef struct frame {
    int op;
    int32_t a, b, c;
    uint32_t len;
    uint64_t tag;
} frame;

static void put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void encode(unsigned char *h, const frame *f)
{
    memset(h, 0, HEAD);
    h[0] = (unsigned char)f->op;
    put32(h + 4, (uint32_t)f->a);
    put32(h + 8, (uint32_t)f->b);
    put32(h + 12, (uint32_t)f->c);
    put32(h + 16, f->len);
    put32(h + 24, (uint32_t)f->tag);
    put32(h + 28, (uint32_t)(f->tag >> 32));
}

/* One frame: the header and the payload. */
static int send_frame(int fd, const frame *f, const void *payload)
{
    unsigned char h[HEAD];
    encode(h, f);
    if (hn_sock_send_all(fd, h, sizeof(h)) != 0)
        return -1;
    return f->len > 0 ? hn_sock_send_all(fd, payload, f->len) : 0;
}

static void decode(const unsigned char *h, frame *f)
{
    f->op = h[0];
    f->a = (int32_t)get32(h + 4);
    f->b = (int32_t)get32(h + 8);
    f->c = (int32_t)get32(h + 12);
    f->len = get32(h + 16);
    f->tag = (uint64_t)get32(h + 24) | (uint64_t)get32(h + 28) << 32;
}

/* A connection's input: frames gathered as they come. */
typedef struct inbox {
    unsigned char *buf;
    size_t have, cap;
} inbox;

/* Reads what is there (non-blocking); -1 closed or failed. */
static int inbox_fill(inbox *in, int fd)
{
    for (;;) {
        ssize_t got;
        if (in->cap - in->have < 65536) {
            size_t cap = in->cap < 131072 ? 131072 : in->cap * 2;
            unsigned char *b = hn_realloc(in->buf, cap);
            if (b == NULL)
                return -1;
            in->buf = b;
            in->cap = cap;
        }
        got = recv(fd, in->buf + in->have, in->cap - in->have, MSG_DONTWAIT);
        if (got > 0) {
            in->have += (size_t)got;
            continue;
        }
        if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            return 0;
        return -1;
    }
}

/* The first complete frame: 1 (f, payload pointing into the inbox, valid
 * until inbox_pop), 0 none yet, -1 malformed. */
static int inbox_peek(const inbox *in, frame *f, const unsigned char **payload)
{
    if (in->have < HEAD)
        return 0;
    decode(in->buf, f);
    if (f->len > HN_NET_BLOB_MAX)
        return -1;
    if (in->have < HEAD + (size_t)f->len)
        return 0;
    *payload = in->buf + HEAD;
    return 1;
}

static void inbox_pop(inbox *in, const frame *f)
{
    size_t n = HEAD + (size_t)f->len;
    memmove(in->buf, in->buf + n, in->have - n);
    in->have -= n;
    if (in->cap > (1u << 20) && in->have < (1u << 16)) { /* a big blob went through: give its room back */
        unsigned char *b = hn_realloc(in->buf, 131072);
        if (b != NULL) {
            in->buf = b;
            in->cap = 131072;
        }
    }
}

static void set_fast(int fd)
{
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* ---- the server ---- */

typedef struct sconn {
    int fd;
    int rank, node; /* -1 until the hello */
    char who[160];  /* "pid P on host H" */
    int bye;
    double heard;
    inbox in;
} sconn;

typedef struct blob {
    uint64_t tag;
    int from, readers;
    void *data;
    size_t bytes;
    struct blob *next;
} blob;

typedef struct take {
    sconn *c;
    uint64_t tag;
    int from;
    struct take *next;
} take;

struct hn_net_server {
    int fd, wake[2], stop, world;
    int staying; /* atomic: connections that said hello and no goodbye */
    double silence_s;
    pthread_t thread;
    int thread_up;
    sconn *conns[CONNS_MAX];
    int nconns;
    blob *blobs;
    take *takes;
};

static blob **blob_find(hn_net_server *s, uint64_t tag, int from)
{
    blob **b = &s->blobs;
    while (*b != NULL && ((*b)->tag != tag || (*b)->from != from))
        b = &(*b)->next;
    return b;
}

/* Hands c the blob at *b (one reader fewer; dropped at none). */
static int hand_over(sconn *c, blob **b)
{
    blob *x = *b;
    frame f = {'D', x->from, 0, 0, (uint32_t)x->bytes, x->tag};
    int r = send_frame(c->fd, &f, x->data);
    if (--x->readers <= 0) {
        *b = x->next;
        hn_free(x->data);
        hn_free(x);
    }
    return r;
}

static void say_all(hn_net_server *s, const sconn *except, const frame *f, const void *payload)
{
    for (int i = 0; i < s->nconns; i++)
        if (s->conns[i] != except && s->conns[i]->rank >= 0 && !s->conns[i]->bye)
            (void)send_frame(s->conns[i]->fd, f, payload); /* a peer gone here is found by its own poll */
}

static void conn_drop(hn_net_server *s, int i, const char *how)
{
    sconn *c = s->conns[i];
    for (take **t = &s->takes; *t != NULL;) {
        if ((*t)->c == c) {
            take *x = *t;
            *t = x->next;
            hn_free(x);
        } else {
            t = &(*t)->next;
        }
    }
    s->conns[i] = s->conns[--s->nconns];
    if (c->rank >= 0 && !c->bye)
        __atomic_sub_fetch(&s->staying, 1, __ATOMIC_ACQ_REL);
    if (how != NULL && c->rank >= 0 && !c->bye && !__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE)) {
        char text[TEXT_MAX];
        int n = snprintf(text, sizeof(text), "its process (%s, node %d) %s", c->who, c->node, how);
        frame f = {'L', c->rank, c->node, 0, (uint32_t)(n < (int)sizeof(text) ? n : (int)sizeof(text) - 1), 0};
        say_all(s, c, &f, text);
    }
    close(c->fd);
    hn_free(c->in.buf);
    hn_free(c);
}

/* One frame from c; -1: drop c. */
static int serve_frame(hn_net_server *s, sconn *c, const frame *f, const unsigned char *p)
{
    switch (f->op) {
    case 'H':
        if (c->rank >= 0 || f->a < 0 || f->a >= s->world || f->len >= sizeof(c->who))
            return -1;
        c->rank = f->a;
        c->node = f->b;
        __atomic_add_fetch(&s->staying, 1, __ATOMIC_ACQ_REL);
        memcpy(c->who, p, f->len);
        c->who[f->len] = '\0';
        return 0;
    case 'P': {
        blob *x;
        if (c->rank < 0 || f->b < 1 || (x = hn_calloc(1, sizeof(*x))) == NULL)
            return -1;
        if ((x->data = hn_malloc(f->len + 1)) == NULL) {
            hn_free(x);
            return -1;
        }
        memcpy(x->data, p, f->len);
        x->bytes = f->len;
        x->tag = f->tag;
        x->from = f->a;
        x->readers = f->b;
        x->next = s->blobs;
        s->blobs = x;
        /* the takes already waiting for it, in the order they came */
        for (take **t = &s->takes; *t != NULL && x != NULL;) {
            if ((*t)->tag == f->tag && (*t)->from == f->a) {
                take *y = *t;
                blob **b = blob_find(s, f->tag, f->a);
                int last = (*b)->readers == 1;
                *t = y->next;
                (void)hand_over(y->c, b); /* a taker gone here is dropped by its own poll */
                hn_free(y);
                if (last)
                    x = NULL;
            } else {
                t = &(*t)->next;
            }
        }
        return 0;
    }
    case 'T': {
        blob **b = blob_find(s, f->tag, f->a);
        take *y;
        if (c->rank < 0)
            return -1;
        if (*b != NULL)
            return hand_over(c, b);
        if ((y = hn_calloc(1, sizeof(*y))) == NULL)
            return -1;
        *y = (take){c, f->tag, f->a, NULL};
        {
            take **t = &s->takes; /* at the end: takes are answered in the order they came */
            while (*t != NULL)
                t = &(*t)->next;
            *t = y;
        }
        return 0;
    }
    case 'W':
        for (take **t = &s->takes; *t != NULL; t = &(*t)->next)
            if ((*t)->c == c && (*t)->tag == f->tag && (*t)->from == f->a) {
                take *y = *t;
                *t = y->next;
                hn_free(y);
                break;
            }
        return 0;
    case 'A':
        if (c->rank < 0 || f->len >= TEXT_MAX)
            return -1;
        say_all(s, c, f, p);
        return 0;
    case 'K': return 0;
    case 'B':
        if (c->rank >= 0 && !c->bye)
            __atomic_sub_fetch(&s->staying, 1, __ATOMIC_ACQ_REL);
        c->bye = 1;
        return 0;
    default: return -1;
    }
}

static void *server_main(void *arg)
{
    hn_net_server *s = arg;
    struct pollfd *p = hn_calloc(CONNS_MAX + 2, sizeof(*p));
    double beat = 0;
    while (p != NULL && !__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE)) {
        int n = 0;
        double now = hn_now();
        p[n++] = (struct pollfd){s->wake[0], POLLIN, 0};
        p[n++] = (struct pollfd){s->fd, s->nconns < CONNS_MAX ? POLLIN : 0, 0};
        for (int i = 0; i < s->nconns; i++)
            p[n++] = (struct pollfd){s->conns[i]->fd, POLLIN, 0};
        if (poll(p, (nfds_t)n, 100) < 0 && errno != EINTR)
            break;
        now = hn_now();
        if (p[0].revents & POLLIN) {
            char drain[16];
            while (read(s->wake[0], drain, sizeof(drain)) > 0) {
            }
        }
        for (int k = n - 1; k >= 2; k--) { /* from the last: a drop moves the last one into its place */
            sconn *c = s->conns[k - 2];
            frame f;
            const unsigned char *pl;
            int r = 0, closed = 0;
            if (p[k].revents == 0) {
                if (!c->bye && now - c->heard > s->silence_s) {
                    char how[96];
                    snprintf(how, sizeof(how), "fell silent on the world's link for %.0f s: its node or the "
                             "network is down, or the process hangs", s->silence_s);
                    conn_drop(s, k - 2, how);
                }
                continue;
            }
            closed = inbox_fill(&c->in, c->fd) != 0;
            c->heard = now;
            while ((r = inbox_peek(&c->in, &f, &pl)) == 1) {
                if (serve_frame(s, c, &f, pl) != 0) {
                    r = -1;
                    break;
                }
                inbox_pop(&c->in, &f);
            }
            if (r < 0)
                conn_drop(s, k - 2, "sent what the world's link does not understand (another build?)");
            else if (closed)
                conn_drop(s, k - 2, c->bye ? NULL
                                           : "is gone: its connection to the world's link ended without goodbye "
                                             "(the process died, or its node or the network went down)");
        }
        if (now - beat >= HN_NET_BEAT_S) {
            frame f = {'K', 0, 0, 0, 0, 0};
            beat = now;
            for (int i = 0; i < s->nconns; i++)
                (void)send_frame(s->conns[i]->fd, &f, NULL);
        }
        if (p[1].revents & POLLIN) {
            int fd = accept4(s->fd, NULL, NULL, SOCK_CLOEXEC);
            sconn *c = fd >= 0 ? hn_calloc(1, sizeof(*c)) : NULL;
            if (c == NULL) {
                if (fd >= 0)
                    close(fd);
                continue;
            }
            set_fast(fd);
            c->fd = fd;
            c->rank = c->node = -1;
            c->heard = hn_now();
            s->conns[s->nconns++] = c;
        }
    }
    hn_free(p);
    return NULL;
}

hn_net_server *hn_net_serve(const char *host, int port, int world, double silence_s, int *port_out, hn_strbuf *why)
{
    hn_net_server *s;
    struct addrinfo *ai, *a;
    int err = 0, one = 1;
    if (world < 1 || (s = hn_calloc(1, sizeof(*s))) == NULL)
        return NULL;
    s->fd = s->wake[0] = s->wake[1] = -1;
    s->world = world;
    s->silence_s = silence_s;
    if (hn_sock_resolve("the world's link at", host, port, 1, &ai, why) != 0) {
        hn_free(s);
        return NULL;
    }
    for (a = ai; a != NULL && s->fd < 0; a = a->ai_next) {
        int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            err = errno;
            continue;
        }
        (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 256) == 0) {
            struct sockaddr_storage sa;
            socklen_t len = sizeof(sa);
            (void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
            s->fd = fd;
            if (getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
                *port_out = ntohs(sa.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&sa)->sin6_port
                                                           : ((struct sockaddr_in *)&sa)->sin_port);
            break;
        }
        err = errno;
        close(fd);
    }
    freeaddrinfo(ai);
    if (s->fd < 0) {
        hn_sb_printf(why, "the world's link: cannot listen on %s:%d: %s", host != NULL ? host : "*", port, strerror(err));
        hn_free(s);
        return NULL;
    }
    if (pipe2(s->wake, O_CLOEXEC | O_NONBLOCK) != 0 || pthread_create(&s->thread, NULL, server_main, s) != 0) {
        hn_sb_printf(why, "the world's link: cannot start its thread");
        hn_net_server_close(s, 0);
        return NULL;
    }
    s->thread_up = 1;
    return s;
}

void hn_net_server_close(hn_net_server *s, double linger_s)
{
    frame bye = {'B', 0, 0, 0, 0, 0};
    double end = hn_now() + linger_s;
    if (s == NULL)
        return;
    while (s->thread_up && __atomic_load_n(&s->staying, __ATOMIC_ACQUIRE) > 0 && hn_now() < end)
        usleep(5000);
    __atomic_store_n(&s->stop, 1, __ATOMIC_RELEASE);
    if (s->thread_up) {
        if (write(s->wake[1], "x", 1) < 0) { /* it leaves within its poll's slice anyway */
        }
        pthread_join(s->thread, NULL);
    }
    while (s->nconns > 0) {
        (void)send_frame(s->conns[s->nconns - 1]->fd, &bye, NULL);
        conn_drop(s, s->nconns - 1, NULL);
    }
    while (s->blobs != NULL) {
        blob *b = s->blobs;
        s->blobs = b->next;
        hn_free(b->data);
        hn_free(b);
    }
    if (s->fd >= 0)
        close(s->fd);
    for (int i = 0; i < 2; i++)
        if (s->wake[i] >= 0)
            close(s->wake[i]);
    hn_free(s);
}

/* ---- a process's end ---- */

typedef struct waiter {
    uint64_t tag;
    int from;
    int done;
    void *data;
    size_t bytes;
    struct waiter *next;
} waiter;

struct hn_net {
    int fd;
    int rank;
    char where[300]; /* "host:port", for messages */
    double silence_s;
    hn_net_events ev;
    pthread_mutex_t send_mu; /* one frame at a time */
    pthread_mutex_t mu;      /* guards waiters, up */
    pthread_cond_t cv;
    waiter *waiters;
    int up, quiet, stop;
    pthread_t thread;
    int thread_up;
};

static int send_locked(hn_net *n, const frame *f, const void *payload)
{
    int r;
    pthread_mutex_lock(&n->send_mu);
    r = n->fd >= 0 ? send_frame(n->fd, f, payload) : -1;
    pthread_mutex_unlock(&n->send_mu);
    return r;
}

static void link_down(hn_net *n, const char *how)
{
    int was;
    pthread_mutex_lock(&n->mu);
    was = n->up;
    n->up = 0;
    pthread_cond_broadcast(&n->cv);
    pthread_mutex_unlock(&n->mu);
    if (was && how != NULL && !__atomic_load_n(&n->quiet, __ATOMIC_ACQUIRE) && n->ev.lost != NULL) {
        char text[TEXT_MAX];
        snprintf(text, sizeof(text), "its process, which serves the world's link at %s, %s", n->where, how);
        n->ev.lost(n->ev.ctx, 0, text);
    }
}

static void deliver(hn_net *n, const frame *f, const unsigned char *p)
{
    char text[TEXT_MAX];
    size_t len = f->len < TEXT_MAX ? f->len : TEXT_MAX - 1;
    switch (f->op) {
    case 'D': {
        void *copy = hn_malloc(f->len + 1);
        pthread_mutex_lock(&n->mu);
        for (waiter *w = n->waiters; w != NULL; w = w->next)
            if (!w->done && w->tag == f->tag && w->from == f->a) {
                if (copy != NULL)
                    memcpy(copy, p, f->len);
                w->data = copy;
                w->bytes = f->len;
                w->done = copy != NULL ? 1 : -1;
                copy = NULL;
                pthread_cond_broadcast(&n->cv);
                break;
            }
        pthread_mutex_unlock(&n->mu);
        hn_free(copy); /* its take was withdrawn */
        return;
    }
    case 'A':
    case 'L':
        memcpy(text, p, len);
        text[len] = '\0';
        if (__atomic_load_n(&n->quiet, __ATOMIC_ACQUIRE))
            return;
        if (f->op == 'A' && n->ev.failed != NULL)
            n->ev.failed(n->ev.ctx, (hn_status_t)f->a, f->b, f->c, text);
        if (f->op == 'L' && n->ev.lost != NULL)
            n->ev.lost(n->ev.ctx, f->a, text);
        return;
    case 'B': link_down(n, NULL); return;
    default: return;
    }
}

static void *client_main(void *arg)
{
    hn_net *n = arg;
    inbox in = {NULL, 0, 0};
    double heard = hn_now(), beat = 0;
    while (!__atomic_load_n(&n->stop, __ATOMIC_ACQUIRE) && hn_net_up(n)) {
        struct pollfd q = {n->fd, POLLIN, 0};
        int r = poll(&q, 1, 100);
        double now = hn_now();
        frame f;
        const unsigned char *pl;
        if (r < 0 && errno != EINTR)
            break;
        if (r > 0) {
            int closed = inbox_fill(&in, n->fd) != 0;
            heard = now;
            while ((r = inbox_peek(&in, &f, &pl)) == 1) {
                deliver(n, &f, pl);
                inbox_pop(&in, &f);
            }
            if (r < 0 || closed) {
                link_down(n, r < 0 ? "sent what this process does not understand (another build?)"
                                   : "is gone: the connection ended without goodbye (the process died, or its "
                                     "node or the network went down)");
                break;
            }
        } else if (now - heard > n->silence_s) {
            char how[128];
            snprintf(how, sizeof(how), "fell silent for %.0f s: its node or the network is down, or the process "
                     "hangs", n->silence_s);
            link_down(n, how);
            break;
        }
        if (now - beat >= HN_NET_BEAT_S) {
            frame k = {'K', 0, 0, 0, 0, 0};
            beat = now;
            (void)send_locked(n, &k, NULL);
        }
    }
    hn_free(in.buf);
    return NULL;
}

hn_net *hn_net_connect(const char *host, int port, int rank, int node, double silence_s, const hn_net_events *ev,
                       double timeout_s, hn_strbuf *why)
{
    struct addrinfo *ai;
    hn_net *n;
    double deadline = hn_now() + timeout_s;
    char hello[160], name[64];
    frame f;
    if ((n = hn_calloc(1, sizeof(*n))) == NULL)
        return NULL;
    n->fd = -1;
    n->rank = rank;
    n->silence_s = silence_s;
    if (ev != NULL)
        n->ev = *ev;
    snprintf(n->where, sizeof(n->where), "%s:%d", host, port);
    pthread_mutex_init(&n->send_mu, NULL);
    pthread_mutex_init(&n->mu, NULL);
    pthread_cond_init(&n->cv, NULL);
    if (hn_sock_resolve("the world's link at", host, port, 0, &ai, why) != 0) {
        hn_net_close(n);
        return NULL;
    }
    for (;;) {
        double left = deadline - hn_now();
        n->fd = hn_sock_connect_once(ai, left <= 0 ? 0 : left < 1 ? (int)(left * 1000) + 1 : 1000);
        if (n->fd >= 0 || left <= 0)
            break;
        usleep(20000); /* the server is not up yet */
    }
    freeaddrinfo(ai);
    if (n->fd < 0) {
        hn_sb_printf(why, "the world's link at %s: nobody answered within %.0f s (rank 0's process serves it)",
                     n->where, timeout_s);
        hn_net_close(n);
        return NULL;
    }
    set_fast(n->fd);
    if (gethostname(name, sizeof(name)) != 0)
        snprintf(name, sizeof(name), "?");
    name[sizeof(name) - 1] = '\0';
    snprintf(hello, sizeof(hello), "pid %d on host %s", (int)getpid(), name);
    f = (frame){'H', rank, node, 0, (uint32_t)strlen(hello), 0};
    n->up = 1;
    if (send_frame(n->fd, &f, hello) != 0 || pthread_create(&n->thread, NULL, client_main, n) != 0) {
        hn_sb_printf(why, "the world's link at %s: the greeting failed", n->where);
        hn_net_close(n);
        return NULL;
    }
    n->thread_up = 1;
    return n;
}

void hn_net_quiet(hn_net *n)
{
    if (n != NULL)
        __atomic_store_n(&n->quiet, 1, __ATOMIC_RELEASE);
}

void hn_net_close(hn_net *n)
{
    frame bye = {'B', 0, 0, 0, 0, 0};
    if (n == NULL)
        return;
    hn_net_quiet(n);
    if (n->fd >= 0 && hn_net_up(n))
        (void)send_locked(n, &bye, NULL);
    __atomic_store_n(&n->stop, 1, __ATOMIC_RELEASE);
    if (n->thread_up)
        pthread_join(n->thread, NULL);
    if (n->fd >= 0)
        close(n->fd);
    while (n->waiters != NULL) { /* none: every take removes its own */
        waiter *w = n->waiters;
        n->waiters = w->next;
        hn_free(w->data);
        hn_free(w);
    }
    pthread_mutex_destroy(&n->send_mu);
    pthread_mutex_destroy(&n->mu);
    pthread_cond_destroy(&n->cv);
    hn_free(n);
}

int hn_net_up(const hn_net *n)
{
    int up;
    pthread_mutex_lock((pthread_mutex_t *)&n->mu);
    up = n->up;
    pthread_mutex_unlock((pthread_mutex_t *)&n->mu);
    return up;
}

int hn_net_put(hn_net *n, uint64_t tag, int from, int readers, const void *data, size_t bytes)
{
    frame f = {'P', from, readers, 0, (uint32_t)bytes, tag};
    if (bytes > HN_NET_BLOB_MAX || readers < 1 || !hn_net_up(n))
        return -1;
    return send_locked(n, &f, data);
}

int hn_net_take(hn_net *n, uint64_t tag, int from, void **data, size_t *bytes, double deadline,
                int (*stop)(void *), void *stop_ctx)
{
    waiter w = {tag, from, 0, NULL, 0, NULL}, **p;
    frame f = {'T', from, 0, 0, 0, tag};
    int r;
    *data = NULL;
    *bytes = 0;
    pthread_mutex_lock(&n->mu);
    w.next = n->waiters;
    n->waiters = &w;
    pthread_mutex_unlock(&n->mu);
    r = send_locked(n, &f, NULL) == 0 ? 0 : -1;
    pthread_mutex_lock(&n->mu);
    while (r == 0 && w.done == 0) {
        double now = hn_now(), until = now + SLICE_S < deadline ? now + SLICE_S : deadline;
        struct timespec ts;
        if (!n->up) {
            r = -1;
            break;
        }
        if (now >= deadline) {
            r = 1;
            break;
        }
        if (stop != NULL) {
            int s;
            pthread_mutex_unlock(&n->mu);
            s = stop(stop_ctx);
            pthread_mutex_lock(&n->mu);
            if (s && w.done == 0) {
                r = 2;
                break;
            }
        }
        {
            struct timespec rt;
            double left = until - hn_now();
            clock_gettime(CLOCK_REALTIME, &rt);
            if (left < 0)
                left = 0;
            ts.tv_sec = rt.tv_sec + (time_t)left;
            ts.tv_nsec = rt.tv_nsec + (long)((left - (double)(time_t)left) * 1e9);
            if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
            }
            (void)pthread_cond_timedwait(&n->cv, &n->mu, &ts);
        }
    }
    if (w.done != 0)
        r = w.done > 0 ? 0 : -1;
    for (p = &n->waiters; *p != &w; p = &(*p)->next) {
    }
    *p = w.next;
    pthread_mutex_unlock(&n->mu);
    if (r == 0) {
        *data = w.data;
        *bytes = w.bytes;
    } else {
        frame x = {'W', from, 0, 0, 0, tag};
        hn_free(w.data);
        if (n->up)
            (void)send_locked(n, &x, NULL);
    }
    return r;
}

int hn_net_abort(hn_net *n, hn_status_t st, int rank, int instr, const char *text)
{
    size_t len = strlen(text);
    frame f = {'A', (int32_t)st, rank, instr, (uint32_t)(len < TEXT_MAX ? len : TEXT_MAX - 1), 0};
    if (n == NULL || !hn_net_up(n))
        return -1;
    return send_locked(n, &f, text);
}
