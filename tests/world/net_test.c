/* Tests of src/world/net.c, the link between the nodes of a world: a
 * server and clients (threads of this process over loopback) put and
 * take blobs — a take before its put waits, a blob goes once its readers
 * took it, a big one arrives whole, a take ends at its deadline and when
 * told to stop; a failure one client says reaches every other; a client
 * that vanishes without goodbye is named to the others; a server that
 * vanishes or falls silent is named by its clients, one that closes in
 * order is not. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "world/net.h"
#include "../test.h"

typedef struct heard {
    pthread_mutex_t mu;
    int failures, losses;
    hn_status_t st;
    int rank, instr, lost_rank;
    char text[512], lost_text[512];
} heard;

static void on_failed(void *ctx, hn_status_t st, int rank, int instr, const char *text)
{
    heard *h = ctx;
    pthread_mutex_lock(&h->mu);
    h->failures++;
    h->st = st;
    h->rank = rank;
    h->instr = instr;
    snprintf(h->text, sizeof(h->text), "%s", text);
    pthread_mutex_unlock(&h->mu);
}

static void on_lost(void *ctx, int rank, const char *text)
{
    heard *h = ctx;
    pthread_mutex_lock(&h->mu);
    h->losses++;
    h->lost_rank = rank;
    snprintf(h->lost_text, sizeof(h->lost_text), "%s", text);
    pthread_mutex_unlock(&h->mu);
}

static int count(heard *h, int losses)
{
    int n;
    pthread_mutex_lock(&h->mu);
    n = losses ? h->losses : h->failures;
    pthread_mutex_unlock(&h->mu);
    return n;
}

/* waits up to s seconds for h to have heard `want` of a kind */
static int hear(heard *h, int losses, int want, double s)
{
    double end = hn_now() + s;
    while (count(h, losses) < want && hn_now() < end)
        usleep(5000);
    return count(h, losses);
}

static hn_net *client(int port, int rank, heard *h, double silence)
{
    hn_net_events ev = {on_failed, on_lost, h};
    hn_strbuf why;
    hn_net *n;
    hn_sb_init(&why);
    n = hn_net_connect("127.0.0.1", port, rank, rank / 2, silence, &ev, 10.0, &why);
    CU_ASSERT_PTR_NOT_NULL(n);
    hn_sb_free(&why);
    return n;
}

typedef struct later {
    hn_net *n;
    uint64_t tag;
    int from, readers, ms;
    const void *data;
    size_t bytes;
} later;

static void *put_later(void *arg)
{
    later *l = arg;
    usleep((useconds_t)l->ms * 1000);
    CU_ASSERT_EQUAL(hn_net_put(l->n, l->tag, l->from, l->readers, l->data, l->bytes), 0);
    return NULL;
}

static int stop_now(void *arg) { return *(int *)arg; }

static void test_put_take(void)
{
    heard h[3];
    hn_net *c[3];
    hn_strbuf why;
    int port = 0, stop = 1;
    void *got;
    size_t len;
    hn_net_server *s;
    size_t big = (size_t)4 << 20;
    unsigned char *data = malloc(big);
    pthread_t t;
    later l;
    hn_sb_init(&why);
    memset(h, 0, sizeof(h));
    for (size_t i = 0; i < big; i++)
        data[i] = (unsigned char)(rand() & 0xff);
    s = hn_net_serve("127.0.0.1", 0, 3, 5.0, &port, &why);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT(port > 0);
    for (int i = 0; i < 3; i++) {
        pthread_mutex_init(&h[i].mu, NULL);
        c[i] = client(port, i, &h[i], 5.0);
    }
    /* a take before its put waits for it; the blob serves its two readers, then it is gone */
    l = (later){c[0], 42, 0, 2, 150, data, big};
    CU_ASSERT_EQUAL(pthread_create(&t, NULL, put_later, &l), 0);
    CU_ASSERT_EQUAL(hn_net_take(c[1], 42, 0, &got, &len, hn_now() + 10, NULL, NULL), 0);
    CU_ASSERT_EQUAL(len, big);
    CU_ASSERT(got != NULL && memcmp(got, data, big) == 0);
    free(got);
    pthread_join(t, NULL);
    CU_ASSERT_EQUAL(hn_net_take(c[2], 42, 0, &got, &len, hn_now() + 10, NULL, NULL), 0);
    CU_ASSERT(len == big && got != NULL && memcmp(got, data, big) == 0);
    free(got);
    {
        double t0 = hn_now();
        CU_ASSERT_EQUAL(hn_net_take(c[1], 42, 0, &got, &len, hn_now() + 0.3, NULL, NULL), 1); /* gone */
        CU_ASSERT(hn_now() - t0 >= 0.25);
        CU_ASSERT_PTR_NULL(got);
    }
    /* another sender's blob under the same tag is another blob; an empty one is one too */
    CU_ASSERT_EQUAL(hn_net_put(c[2], 42, 2, 1, "", 0), 0);
    CU_ASSERT_EQUAL(hn_net_take(c[0], 42, 2, &got, &len, hn_now() + 10, NULL, NULL), 0);
    CU_ASSERT_EQUAL(len, 0);
    free(got);
    /* a take told to stop ends at once, and is withdrawn: the next put waits for a new take */
    CU_ASSERT_EQUAL(hn_net_take(c[0], 7, 1, &got, &len, hn_now() + 10, stop_now, &stop), 2);
    CU_ASSERT_EQUAL(hn_net_put(c[1], 7, 1, 1, "x", 1), 0);
    CU_ASSERT_EQUAL(hn_net_take(c[0], 7, 1, &got, &len, hn_now() + 10, NULL, NULL), 0);
    CU_ASSERT(len == 1 && got != NULL && ((char *)got)[0] == 'x');
    free(got);
    CU_ASSERT_EQUAL(hn_net_put(c[1], 7, 1, 0, "x", 1), -1); /* no reader */
    /* nothing of the above was a failure or a death */
    for (int i = 0; i < 3; i++) {
        CU_ASSERT_EQUAL(count(&h[i], 0), 0);
        CU_ASSERT_EQUAL(count(&h[i], 1), 0);
        hn_net_close(c[i]);
        pthread_mutex_destroy(&h[i].mu);
    }
    hn_net_server_close(s, 5.0);
    hn_sb_free(&why);
    free(data);
}

/* A raw connection that says hello as `rank` and then is dropped without
 * goodbye: what a process that dies leaves. */
static void vanish(int port, int rank)
{
    unsigned char f[32 + 64];
    struct sockaddr_in a;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    const char *who = "pid 1 on host gone";
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    memset(f, 0, sizeof(f));
    f[0] = 'H';
    f[4] = (unsigned char)rank;
    f[8] = 1; /* node */
    f[16] = (unsigned char)strlen(who);
    memcpy(f + 32, who, strlen(who));
    CU_ASSERT_EQUAL_FATAL(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    CU_ASSERT_EQUAL(send(fd, f, 32 + strlen(who), 0), (ssize_t)(32 + strlen(who)));
    usleep(100000);
    close(fd);
}

static void test_failures_and_deaths(void)
{
    heard h[2];
    hn_net *c[2];
    hn_strbuf why;
    int port = 0;
    void *got;
    size_t len;
    hn_net_server *s;
    hn_sb_init(&why);
    memset(h, 0, sizeof(h));
    s = hn_net_serve("127.0.0.1", 0, 4, 5.0, &port, &why);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    for (int i = 0; i < 2; i++) {
        pthread_mutex_init(&h[i].mu, NULL);
        c[i] = client(port, i, &h[i], 5.0);
    }
    /* a failure said once reaches the others, not its sayer */
    CU_ASSERT_EQUAL(hn_net_abort(c[1], HN_ERR_RUNTIME, 1, 3, "prog.hir:4:1: error: rank 1: boom"), 0);
    CU_ASSERT_EQUAL(hear(&h[0], 0, 1, 5.0), 1);
    CU_ASSERT_EQUAL(h[0].st, HN_ERR_RUNTIME);
    CU_ASSERT_EQUAL(h[0].rank, 1);
    CU_ASSERT_EQUAL(h[0].instr, 3);
    CU_ASSERT_STRING_EQUAL(h[0].text, "prog.hir:4:1: error: rank 1: boom");
    CU_ASSERT_EQUAL(count(&h[1], 0), 0);
    /* a process that vanishes is named to every other, once */
    vanish(port, 3);
    CU_ASSERT_EQUAL(hear(&h[0], 1, 1, 5.0), 1);
    CU_ASSERT_EQUAL(hear(&h[1], 1, 1, 5.0), 1);
    CU_ASSERT_EQUAL(h[0].lost_rank, 3);
    CU_ASSERT_PTR_NOT_NULL(strstr(h[0].lost_text, "its process (pid 1 on host gone, node 1) is gone"));
    CU_ASSERT_PTR_NOT_NULL(strstr(h[0].lost_text, "without goodbye"));
    /* a server that closes in order is no death: the link is down, takes say so */
    hn_net_server_close(s, 0);
    usleep(300000);
    CU_ASSERT_EQUAL(hn_net_up(c[0]), 0);
    CU_ASSERT_EQUAL(hn_net_take(c[0], 1, 1, &got, &len, hn_now() + 5, NULL, NULL), -1);
    CU_ASSERT_EQUAL(hn_net_put(c[0], 1, 0, 1, "x", 1), -1);
    CU_ASSERT_EQUAL(count(&h[0], 1), 1);
    for (int i = 0; i < 2; i++) {
        hn_net_close(c[i]);
        pthread_mutex_destroy(&h[i].mu);
    }
    hn_sb_free(&why);
}

/* A fake server: accepts one connection, then (mode 0) closes it at once
 * without goodbye, or (mode 1) holds it and says nothing. */
typedef struct fake {
    int lfd, port, mode, done;
} fake;

static void *fake_main(void *arg)
{
    fake *f = arg;
    int fd = accept(f->lfd, NULL, NULL);
    if (f->mode == 0) {
        usleep(100000);
        close(fd);
    } else {
        while (!__atomic_load_n(&f->done, __ATOMIC_ACQUIRE))
            usleep(10000);
        close(fd);
    }
    return NULL;
}

static void fake_server(fake *f, int mode)
{
    struct sockaddr_in a;
    socklen_t len = sizeof(a);
    memset(f, 0, sizeof(*f));
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    f->lfd = socket(AF_INET, SOCK_STREAM, 0);
    CU_ASSERT_EQUAL(bind(f->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
    CU_ASSERT_EQUAL(listen(f->lfd, 4), 0);
    CU_ASSERT_EQUAL(getsockname(f->lfd, (struct sockaddr *)&a, &len), 0);
    f->port = ntohs(a.sin_port);
    f->mode = mode;
}

static void test_server_gone(void)
{
    for (int mode = 0; mode < 2; mode++) {
        heard h;
        fake f;
        pthread_t t;
        hn_net *c;
        double t0;
        memset(&h, 0, sizeof(h));
        pthread_mutex_init(&h.mu, NULL);
        fake_server(&f, mode);
        CU_ASSERT_EQUAL(pthread_create(&t, NULL, fake_main, &f), 0);
        t0 = hn_now();
        c = client(f.port, 1, &h, 0.6);
        CU_ASSERT_EQUAL(hear(&h, 1, 1, 10.0), 1);
        CU_ASSERT_EQUAL(h.lost_rank, 0);
        CU_ASSERT_PTR_NOT_NULL(strstr(h.lost_text, mode == 0 ? "without goodbye" : "fell silent"));
        if (mode == 1)
            CU_ASSERT(hn_now() - t0 >= 0.5);
        CU_ASSERT_EQUAL(hn_net_up(c), 0);
        __atomic_store_n(&f.done, 1, __ATOMIC_RELEASE);
        pthread_join(t, NULL);
        close(f.lfd);
        hn_net_close(c);
        pthread_mutex_destroy(&h.mu);
    }
}

static void test_refusals(void)
{
    hn_strbuf why;
    int port;
    heard h;
    hn_net_events ev = {on_failed, on_lost, &h};
    hn_sb_init(&why);
    CU_ASSERT_PTR_NULL(hn_net_serve("no-such-host.invalid", 0, 2, 5.0, &port, &why));
    CU_ASSERT_PTR_NOT_NULL(why.data != NULL ? strstr(why.data, "cannot resolve") : NULL);
    hn_sb_free(&why);
    hn_sb_init(&why);
    /* nobody there: named after the timeout */
    CU_ASSERT_PTR_NULL(hn_net_connect("127.0.0.1", 1, 0, 0, 5.0, &ev, 0.2, &why));
    CU_ASSERT_PTR_NOT_NULL(why.data != NULL ? strstr(why.data, "nobody answered") : NULL);
    hn_sb_free(&why);
    hn_sb_init(&why);
    /* a host that does not answer a connection at all (here a listener whose queue is full: its
     * kernel drops the handshake): named at the deadline, not after the kernel's connect timeout */
    {
        struct sockaddr_in a;
        socklen_t len = sizeof(a);
        int l = socket(AF_INET, SOCK_STREAM, 0), c = socket(AF_INET, SOCK_STREAM, 0);
        double t0;
        memset(&a, 0, sizeof(a));
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        CU_ASSERT_EQUAL_FATAL(bind(l, (struct sockaddr *)&a, sizeof(a)), 0);
        CU_ASSERT_EQUAL_FATAL(listen(l, 0), 0);
        CU_ASSERT_EQUAL_FATAL(getsockname(l, (struct sockaddr *)&a, &len), 0);
        CU_ASSERT_EQUAL(connect(c, (struct sockaddr *)&a, sizeof(a)), 0); /* fills the queue */
        t0 = hn_now();
        CU_ASSERT_PTR_NULL(hn_net_connect("127.0.0.1", ntohs(a.sin_port), 0, 0, 5.0, &ev, 0.5, &why));
        CU_ASSERT(hn_now() - t0 < 5.0);
        close(c);
        close(l);
    }
    hn_sb_free(&why);
}

void hn_suite_net(void)
{
    static CU_TestInfo tests[] = {
        {"put and take: a take waits for its put, a blob serves its readers, a big one arrives whole, a take "
         "ends at its deadline or when stopped",
         test_put_take},
        {"a failure reaches every other process; a process that vanishes is named; a server closed in order is "
         "no death",
         test_failures_and_deaths},
        {"a server that vanishes or falls silent is named by its clients", test_server_gone},
        {"no host, nobody there, nothing answering: named within the deadline", test_refusals},
        CU_TEST_INFO_NULL,
    };
    hn_test_add_suite("world/net", tests);
}
