/* The key-value store over TCP (store_tcp.h). The server keeps the table
 * and serves the connections from one thread (poll over the listening
 * socket, a wake-up pipe and every connection); its own process sets and
 * gets on the table directly. A frame is an operation byte ('S' set, 'G'
 * get), the key's and the value's lengths (4 bytes each, little-endian)
 * and their bytes; an answer is a status byte (0: done), a length and the
 * value. A connection that sends a malformed frame or does not take its
 * answer is dropped; a get the server cannot answer yet waits on its
 * connection until the key is set. */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../base/settings.h"
#include "sock.h"
#include "store_tcp.h"

#define HEADER 9 /* op, key length, value length */
#define FRAME_MAX (HEADER + HN_TCP_STORE_KEY_MAX + HN_TCP_STORE_VALUE_MAX)
#define CONNS_MAX 1024

typedef struct entry {
    char *key, *value;
    struct entry *next;
} entry;

typedef struct conn {
    int fd;
    unsigned char buf[FRAME_MAX];
    size_t have;
    char *waiting; /* the key of a get not answered yet, or NULL */
} conn;

struct hn_tcp_store {
    int serve;
    int fd; /* the server's listening socket, or a client's connection (-1: none) */
    char host[256];
    int port;
    /* server */
    pthread_t thread;
    int thread_up;
    int wake[2];
    int stop; /* atomic */
    pthread_mutex_t mu; /* guards kv */
    pthread_cond_t cv;
    entry *kv;
    int nkeys;
    conn **conns;
    int nconns;
};

static void put_u32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get_u32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static double deadline_after(double s)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9 + s;
}

static int ms_until(double deadline)
{
    double left = deadline - deadline_after(0);
    return left <= 0 ? 0 : left > 1e6 ? 1000000000 : (int)(left * 1000) + 1;
}

/* ---- the table (server) ---- */

static entry *find(hn_tcp_store *s, const char *key)
{
    for (entry *e = s->kv; e != NULL; e = e->next)
        if (strcmp(e->key, key) == 0)
            return e;
    return NULL;
}

static int table_set(hn_tcp_store *s, const char *key, const char *value)
{
    entry *e;
    char *v = hn_strdup(value);
    if (v == NULL)
        return -1;
    pthread_mutex_lock(&s->mu);
    if ((e = find(s, key)) == NULL) {
        if (s->nkeys >= HN_TCP_STORE_KEYS_MAX || (e = hn_calloc(1, sizeof(*e))) == NULL ||
            (e->key = hn_strdup(key)) == NULL) {
            pthread_mutex_unlock(&s->mu);
            hn_free(e);
            hn_free(v);
            return -1;
        }
        e->next = s->kv;
        s->kv = e;
        s->nkeys++;
    }
    hn_free(e->value);
    e->value = v;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    if (write(s->wake[1], "s", 1) < 0) { /* the thread answers the waiting gets; a full pipe wakes it too */
    }
    return 0;
}

/* ---- the server's thread ---- */

/* Sends all of a short answer at once or drops the connection (a client
 * that does not read must not hold the server). */
static int answer(conn *c, int status, const char *value)
{
    unsigned char out[5 + HN_TCP_STORE_VALUE_MAX];
    size_t n = value != NULL ? strlen(value) : 0;
    out[0] = (unsigned char)status;
    put_u32(out + 1, (uint32_t)n);
    memcpy(out + 5, value != NULL ? value : "", n);
    return send(c->fd, out, 5 + n, MSG_DONTWAIT | MSG_NOSIGNAL) == (ssize_t)(5 + n) ? 0 : -1;
}

static void conn_drop(hn_tcp_store *s, int i)
{
    conn *c = s->conns[i];
    close(c->fd);
    hn_free(c->waiting);
    hn_free(c);
    s->conns[i] = s->conns[--s->nconns];
}

/* Answers c's get if its key is set now: 1 answered, 0 not yet, -1 drop. */
static int try_answer(hn_tcp_store *s, conn *c)
{
    entry *e;
    int r = 0;
    pthread_mutex_lock(&s->mu);
    if ((e = find(s, c->waiting)) != NULL)
        r = answer(c, 0, e->value) == 0 ? 1 : -1;
    pthread_mutex_unlock(&s->mu);
    if (r == 1) {
        hn_free(c->waiting);
        c->waiting = NULL;
    }
    return r;
}

/* The frames complete in c's buffer, in turn; -1: drop the connection. */
static int serve_frames(hn_tcp_store *s, conn *c)
{
    while (c->waiting == NULL && c->have >= HEADER) {
        uint32_t kl = get_u32(c->buf + 1), vl = get_u32(c->buf + 5);
        char key[HN_TCP_STORE_KEY_MAX + 1], value[HN_TCP_STORE_VALUE_MAX + 1];
        size_t len;
        int op = c->buf[0];
        if ((op != 'S' && op != 'G') || kl == 0 || kl > HN_TCP_STORE_KEY_MAX || vl > HN_TCP_STORE_VALUE_MAX ||
            (op == 'G' && vl != 0))
            return -1;
        len = HEADER + kl + vl;
        if (c->have < len)
            return 0;
        memcpy(key, c->buf + HEADER, kl);
        key[kl] = '\0';
        memcpy(value, c->buf + HEADER + kl, vl);
        value[vl] = '\0';
        if (memchr(key, '\0', kl) != NULL || memchr(value, '\0', vl) != NULL)
            return -1;
        memmove(c->buf, c->buf + len, c->have - len);
        c->have -= len;
        if (op == 'S') {
            if (table_set(s, key, value) != 0 || answer(c, 0, NULL) != 0)
                return -1;
        } else if ((c->waiting = hn_strdup(key)) == NULL || try_answer(s, c) < 0) {
            return -1;
        }
    }
    return 0;
}

static void *server_main(void *arg)
{
    hn_tcp_store *s = arg;
    struct pollfd *p = hn_calloc(CONNS_MAX + 2, sizeof(*p));
    while (p != NULL && !__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE)) {
        int n = 0;
        p[n++] = (struct pollfd){s->wake[0], POLLIN, 0};
        p[n++] = (struct pollfd){s->fd, s->nconns < CONNS_MAX ? POLLIN : 0, 0};
        for (int i = 0; i < s->nconns; i++)
            p[n++] = (struct pollfd){s->conns[i]->fd, POLLIN, 0};
        if (poll(p, (nfds_t)n, 1000) < 0 && errno != EINTR)
            break;
        if (p[0].revents & POLLIN) { /* a set: the gets waiting may be answered */
            char drain[64];
            int dropped = 0;
            while (read(s->wake[0], drain, sizeof(drain)) > 0) {
            }
            for (int i = s->nconns - 1; i >= 0; i--) {
                int r = s->conns[i]->waiting != NULL ? try_answer(s, s->conns[i]) : 0;
                if (r < 0 || (r > 0 && serve_frames(s, s->conns[i]) != 0)) {
                    conn_drop(s, i);
                    dropped = 1;
                }
            }
            if (dropped) /* the connections moved: poll them again */
                continue;
        }
        /* the connections polled, from the last (a drop moves the last one into its place) */
        for (int k = n - 1; k >= 2; k--) {
            conn *c = s->conns[k - 2];
            ssize_t got;
            if (p[k].revents == 0)
                continue;
            got = recv(c->fd, c->buf + c->have, sizeof(c->buf) - c->have, MSG_DONTWAIT);
            if (got <= 0) {
                if (got < 0 && (errno == EAGAIN || errno == EINTR))
                    continue;
                conn_drop(s, k - 2); /* closed, or a frame longer than any allowed */
                continue;
            }
            c->have += (size_t)got;
            if (serve_frames(s, c) != 0)
                conn_drop(s, k - 2);
        }
        if (p[1].revents & POLLIN) {
            int fd = accept(s->fd, NULL, NULL);
            conn *c = fd >= 0 ? hn_calloc(1, sizeof(*c)) : NULL;
            if (c == NULL) {
                if (fd >= 0)
                    close(fd);
                continue;
            }
            c->fd = fd;
            s->conns[s->nconns++] = c;
        }
    }
    hn_free(p);
    return NULL;
}

/* ---- opening ---- */

static int listen_on(hn_tcp_store *s, hn_strbuf *why)
{
    struct addrinfo *ai, *a;
    int err = 0, one = 1;
    if (hn_sock_resolve("store", s->host, s->port, 0, &ai, why) != 0)
        return -1;
    for (a = ai; a != NULL; a = a->ai_next) {
        int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            err = errno;
            continue;
        }
        (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 128) == 0) {
            (void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
            s->fd = fd;
            freeaddrinfo(ai);
            return 0;
        }
        err = errno;
        close(fd);
    }
    freeaddrinfo(ai);
    hn_sb_printf(why, "store %s:%d: cannot listen there: %s (another store or program holds the port? "
                 "HIRNODE_STORE=host:port names another)", s->host, s->port, strerror(err));
    return -1;
}

static int connect_until(hn_tcp_store *s, double deadline, hn_strbuf *why)
{
    struct addrinfo *ai;
    int one = 1;
    if (hn_sock_resolve("store", s->host, s->port, 0, &ai, why) != 0)
        return -1;
    for (;;) {
        int left = ms_until(deadline);
        s->fd = hn_sock_connect_once(ai, left < 1000 ? left : 1000);
        if (s->fd >= 0 || left <= 0)
            break;
        usleep(20000); /* the server is not up yet */
    }
    freeaddrinfo(ai);
    if (s->fd < 0) {
        hn_sb_printf(why, "store %s:%d: no server answered before the deadline (the process of rank 0 serves "
                     "it)", s->host, s->port);
        return -1;
    }
    (void)setsockopt(s->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return 0;
}

hn_tcp_store *hn_tcp_store_open(const char *host, int port, int serve, double timeout_s, hn_strbuf *why)
{
    hn_tcp_store *s;
    if (host == NULL || host[0] == '\0' || strlen(host) >= sizeof(s->host) || port < 1 || port > 65535) {
        hn_sb_printf(why, "store %s:%d: not an address", host != NULL ? host : "(none)", port);
        return NULL;
    }
    if ((s = hn_calloc(1, sizeof(*s))) == NULL)
        return NULL;
    snprintf(s->host, sizeof(s->host), "%s", host);
    s->port = port;
    s->serve = serve;
    s->fd = s->wake[0] = s->wake[1] = -1;
    pthread_mutex_init(&s->mu, NULL);
    {
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&s->cv, &ca);
        pthread_condattr_destroy(&ca);
    }
    if (!serve) {
        if (connect_until(s, deadline_after(timeout_s), why) != 0) {
            hn_tcp_store_close(s);
            return NULL;
        }
        return s;
    }
    if ((s->conns = hn_calloc(CONNS_MAX, sizeof(*s->conns))) == NULL || pipe2(s->wake, O_CLOEXEC | O_NONBLOCK) != 0 ||
        listen_on(s, why) != 0) {
        hn_tcp_store_close(s);
        return NULL;
    }
    if (pthread_create(&s->thread, NULL, server_main, s) != 0) {
        hn_sb_printf(why, "store %s:%d: cannot start its thread", host, port);
        hn_tcp_store_close(s);
        return NULL;
    }
    s->thread_up = 1;
    return s;
}

void hn_tcp_store_close(hn_tcp_store *s)
{
    if (s == NULL)
        return;
    if (s->thread_up) {
        __atomic_store_n(&s->stop, 1, __ATOMIC_RELEASE);
        if (write(s->wake[1], "x", 1) < 0) { /* it leaves within its poll's second anyway */
        }
        pthread_join(s->thread, NULL);
    }
    while (s->nconns > 0)
        conn_drop(s, s->nconns - 1);
    hn_free(s->conns);
    if (s->fd >= 0)
        close(s->fd);
    for (int i = 0; i < 2; i++)
        if (s->wake[i] >= 0)
            close(s->wake[i]);
    while (s->kv != NULL) {
        entry *e = s->kv;
        s->kv = e->next;
        hn_free(e->key);
        hn_free(e->value);
        hn_free(e);
    }
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    hn_free(s);
}

/* ---- a client's requests ---- */

static int recv_all(int fd, unsigned char *p, size_t n, double deadline)
{
    while (n > 0) {
        struct pollfd q = {fd, POLLIN, 0};
        ssize_t r;
        int ready = poll(&q, 1, ms_until(deadline));
        if (ready < 0 && errno == EINTR)
            continue;
        if (ready <= 0)
            return -1; /* the deadline */
        if ((r = recv(fd, p, n, 0)) <= 0) {
            if (r < 0 && errno == EINTR)
                continue;
            return -1;
        }
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

/* One request and its answer (value into out, cap bytes, when out). A
 * connection whose answer did not come in time is closed: a late answer
 * must not be taken for the next request's. */
static int request(hn_tcp_store *s, int op, const char *key, const char *value, char *out, size_t cap,
                   double timeout_s)
{
    unsigned char frame[FRAME_MAX], head[5];
    size_t kl = strlen(key), vl = value != NULL ? strlen(value) : 0;
    uint32_t n;
    double deadline = deadline_after(timeout_s);
    if (kl == 0 || kl > HN_TCP_STORE_KEY_MAX || vl > HN_TCP_STORE_VALUE_MAX)
        return -1;
    if (s->fd < 0) {
        hn_strbuf why;
        int r;
        hn_sb_init(&why);
        r = connect_until(s, deadline, &why);
        hn_sb_free(&why);
        if (r != 0)
            return -1;
    }
    frame[0] = (unsigned char)op;
    put_u32(frame + 1, (uint32_t)kl);
    put_u32(frame + 5, (uint32_t)vl);
    memcpy(frame + HEADER, key, kl);
    if (vl > 0)
        memcpy(frame + HEADER + kl, value, vl);
    if (hn_sock_send_all(s->fd, frame, HEADER + kl + vl) != 0 || recv_all(s->fd, head, 5, deadline) != 0 ||
        head[0] != 0 || (n = get_u32(head + 1)) > HN_TCP_STORE_VALUE_MAX ||
        recv_all(s->fd, frame, n, deadline) != 0) {
        close(s->fd);
        s->fd = -1;
        return -1;
    }
    if (out != NULL) {
        if (n >= cap)
            return -1;
        memcpy(out, frame, n);
        out[n] = '\0';
    }
    return 0;
}

int hn_tcp_store_set(hn_tcp_store *s, const char *key, const char *value)
{
    if (s == NULL || key == NULL || value == NULL || key[0] == '\0' || strlen(key) > HN_TCP_STORE_KEY_MAX ||
        strlen(value) > HN_TCP_STORE_VALUE_MAX)
        return -1;
    return s->serve ? table_set(s, key, value) : request(s, 'S', key, value, NULL, 0, 30.0);
}

int hn_tcp_store_get(hn_tcp_store *s, const char *key, char *value, size_t cap, double timeout_s)
{
    entry *e;
    int r = -1;
    if (s == NULL || key == NULL || value == NULL || cap == 0 || key[0] == '\0' ||
        strlen(key) > HN_TCP_STORE_KEY_MAX)
        return -1;
    if (!s->serve)
        return request(s, 'G', key, NULL, value, cap, timeout_s);
    {
        double deadline = deadline_after(timeout_s);
        struct timespec until;
        until.tv_sec = (time_t)deadline;
        until.tv_nsec = (long)((deadline - (double)until.tv_sec) * 1e9);
        pthread_mutex_lock(&s->mu);
        while ((e = find(s, key)) == NULL)
            if (pthread_cond_timedwait(&s->cv, &s->mu, &until) == ETIMEDOUT)
                break;
        if (e != NULL && strlen(e->value) < cap) {
            memcpy(value, e->value, strlen(e->value) + 1);
            r = 0;
        }
        pthread_mutex_unlock(&s->mu);
    }
    return r;
}

/* ---- the launcher's address ---- */

static int parse_port(const char *text, int *port)
{
    char *end;
    long v;
    errno = 0;
    v = strtol(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || v < 1 || v > 65535)
        return -1;
    *port = (int)v;
    return 0;
}

int hn_tcp_store_address(char *host, size_t cap, int *port, hn_strbuf *why)
{
    const char *store = NULL, *addr = getenv("MASTER_ADDR"), *mport = getenv("MASTER_PORT");
    if (hn_setting_address("store", &store, why) != HN_OK)
        return -1;
    if (store != NULL && store[0] != '\0') {
        const char *colon = strrchr(store, ':');
        size_t hl = colon != NULL ? (size_t)(colon - store) : 0;
        if (colon == NULL || hl == 0 || hl >= cap || parse_port(colon + 1, port) != 0) {
            hn_sb_printf(why, "HIRNODE_STORE=%s: expected host:port", store);
            return -1;
        }
        memcpy(host, store, hl);
        host[hl] = '\0';
        if (host[0] == '[' && hl > 2 && host[hl - 1] == ']') { /* [v6 address] */
            memmove(host, host + 1, hl - 2);
            host[hl - 2] = '\0';
        }
        return 1;
    }
    if (addr == NULL || addr[0] == '\0' || mport == NULL || mport[0] == '\0')
        return 0;
    if (strlen(addr) >= cap || parse_port(mport, port) != 0 || *port == 65535) {
        hn_sb_printf(why, "MASTER_ADDR=%s MASTER_PORT=%s: expected an address and a port from 1 to 65534 (the "
                     "store takes MASTER_PORT + 1)", addr, mport);
        return -1;
    }
    snprintf(host, cap, "%s", addr);
    *port += 1; /* torchrun's store holds MASTER_PORT itself */
    return 1;
}
