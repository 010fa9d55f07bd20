/* Tests of src/world/store_tcp.c: a server and its clients (threads of
 * this process over loopback) set and get, a get waits for a later set
 * and ends at its deadline, a client comes before its server, a
 * malformed frame drops only its connection, a port held by another is
 * named, and the launcher's address is read from the environment. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "world/store_tcp.h"
#include "../test.h"

/* a port nobody listens on now (the kernel's choice; free again once closed) */
static int free_port(void)
{
    struct sockaddr_in a;
    socklen_t len = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

typedef struct later {
    hn_tcp_store *s;
    const char *key, *value;
    int ms;
} later;

static void *set_later(void *arg)
{
    later *l = arg;
    struct timespec nap = {0, (long)l->ms * 1000000L};
    nanosleep(&nap, NULL);
    CU_ASSERT_EQUAL(hn_tcp_store_set(l->s, l->key, l->value), 0);
    return NULL;
}

typedef struct opener {
    int port;
    hn_tcp_store *s;
} opener;

static void *open_client(void *arg)
{
    opener *o = arg;
    hn_strbuf why;
    hn_sb_init(&why);
    o->s = hn_tcp_store_open("127.0.0.1", o->port, 0, 10, &why);
    hn_sb_free(&why);
    return NULL;
}

static void test_set_get(void)
{
    int port = free_port();
    hn_strbuf why;
    hn_tcp_store *srv, *a, *b;
    char v[64], big[HN_TCP_STORE_VALUE_MAX + 2];
    pthread_t t;
    later l;
    CU_ASSERT_FATAL(port > 0);
    hn_sb_init(&why);
    srv = hn_tcp_store_open("127.0.0.1", port, 1, 5, &why);
    CU_ASSERT_PTR_NOT_NULL_FATAL(srv);
    a = hn_tcp_store_open("127.0.0.1", port, 0, 5, &why);
    b = hn_tcp_store_open("localhost", port, 0, 5, &why);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    /* a client's set, read by the server and another client; replaced */
    CU_ASSERT_EQUAL(hn_tcp_store_set(a, "k/1", "one"), 0);
    CU_ASSERT_EQUAL(hn_tcp_store_get(srv, "k/1", v, sizeof(v), 1), 0);
    CU_ASSERT_STRING_EQUAL(v, "one");
    CU_ASSERT_EQUAL(hn_tcp_store_get(b, "k/1", v, sizeof(v), 1), 0);
    CU_ASSERT_STRING_EQUAL(v, "one");
    CU_ASSERT_EQUAL(hn_tcp_store_set(b, "k/1", "uno"), 0);
    CU_ASSERT_EQUAL(hn_tcp_store_get(a, "k/1", v, sizeof(v), 1), 0);
    CU_ASSERT_STRING_EQUAL(v, "uno");
    /* the server's set, read by a client; an empty value */
    CU_ASSERT_EQUAL(hn_tcp_store_set(srv, "k/2", ""), 0);
    memset(v, 'x', sizeof(v));
    CU_ASSERT_EQUAL(hn_tcp_store_get(a, "k/2", v, sizeof(v), 1), 0);
    CU_ASSERT_STRING_EQUAL(v, "");
    /* a get waits for a set that comes later, from a client and from the server */
    l = (later){b, "k/3", "late", 100};
    CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, set_later, &l), 0);
    CU_ASSERT_EQUAL(hn_tcp_store_get(a, "k/3", v, sizeof(v), 10), 0);
    CU_ASSERT_STRING_EQUAL(v, "late");
    pthread_join(t, NULL);
    l = (later){srv, "k/4", "later", 100};
    CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, set_later, &l), 0);
    CU_ASSERT_EQUAL(hn_tcp_store_get(b, "k/4", v, sizeof(v), 10), 0);
    CU_ASSERT_STRING_EQUAL(v, "later");
    pthread_join(t, NULL);
    l = (later){a, "k/5", "at the server", 100};
    CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, set_later, &l), 0);
    CU_ASSERT_EQUAL(hn_tcp_store_get(srv, "k/5", v, sizeof(v), 10), 0);
    CU_ASSERT_STRING_EQUAL(v, "at the server");
    pthread_join(t, NULL);
    /* a get past its deadline fails; the client goes on (a new connection) */
    CU_ASSERT_EQUAL(hn_tcp_store_get(a, "never", v, sizeof(v), 0.1), -1);
    CU_ASSERT_EQUAL(hn_tcp_store_get(srv, "never", v, sizeof(v), 0.1), -1);
    CU_ASSERT_EQUAL(hn_tcp_store_get(a, "k/1", v, sizeof(v), 1), 0);
    CU_ASSERT_STRING_EQUAL(v, "uno");
    /* too long: refused, nothing sent; a value longer than the caller's room */
    memset(big, 'v', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    CU_ASSERT_EQUAL(hn_tcp_store_set(a, "k/big", big), -1);
    CU_ASSERT_EQUAL(hn_tcp_store_set(a, "", "empty key"), -1);
    CU_ASSERT_EQUAL(hn_tcp_store_get(a, "k/3", v, 3, 1), -1);
    CU_ASSERT_EQUAL(hn_tcp_store_get(srv, "k/3", v, 3, 1), -1);
    /* a store holds so many keys: a new one past them refused, an old one replaced */
    for (int k = 0; k < HN_TCP_STORE_KEYS_MAX; k++) {
        char key[32];
        snprintf(key, sizeof(key), "many/%d", k);
        if (hn_tcp_store_set(srv, key, "x") != 0)
            break;
    }
    CU_ASSERT_EQUAL(hn_tcp_store_set(srv, "one/more", "x"), -1);
    CU_ASSERT_EQUAL(hn_tcp_store_set(a, "one/more", "x"), -1);
    CU_ASSERT_EQUAL(hn_tcp_store_set(a, "k/1", "again"), 0);
    CU_ASSERT_EQUAL(hn_tcp_store_get(b, "k/1", v, sizeof(v), 1), 0);
    CU_ASSERT_STRING_EQUAL(v, "again");
    hn_tcp_store_close(a);
    hn_tcp_store_close(b);
    /* once the server is gone, a client's requests fail */
    a = hn_tcp_store_open("127.0.0.1", port, 0, 5, &why);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    hn_tcp_store_close(srv);
    CU_ASSERT_EQUAL(hn_tcp_store_get(a, "k/1", v, sizeof(v), 0.5), -1);
    hn_tcp_store_close(a);
    hn_sb_free(&why);
}

/* A client that comes first waits for its server; a frame that breaks
 * the protocol drops its own connection only. */
static void test_order_and_garbage(void)
{
    int port = free_port(), fd;
    opener o = {port, NULL};
    hn_strbuf why;
    hn_tcp_store *srv;
    struct sockaddr_in addr;
    struct timespec nap = {0, 150000000L};
    pthread_t t;
    char v[16], junk[64];
    CU_ASSERT_FATAL(port > 0);
    hn_sb_init(&why);
    CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, open_client, &o), 0);
    nanosleep(&nap, NULL);
    srv = hn_tcp_store_open("127.0.0.1", port, 1, 5, &why);
    CU_ASSERT_PTR_NOT_NULL_FATAL(srv);
    pthread_join(t, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(o.s);
    memset(&addr, 0, sizeof(addr));
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    fd = socket(AF_INET, SOCK_STREAM, 0);
    CU_ASSERT_EQUAL_FATAL(connect(fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
    memset(junk, 'Z', sizeof(junk)); /* no such operation */
    CU_ASSERT_EQUAL(send(fd, junk, sizeof(junk), MSG_NOSIGNAL), (ssize_t)sizeof(junk));
    CU_ASSERT_EQUAL(recv(fd, junk, sizeof(junk), 0), 0); /* dropped */
    close(fd);
    CU_ASSERT_EQUAL(hn_tcp_store_set(o.s, "after", "fine"), 0);
    CU_ASSERT_EQUAL(hn_tcp_store_get(srv, "after", v, sizeof(v), 1), 0);
    CU_ASSERT_STRING_EQUAL(v, "fine");
    hn_tcp_store_close(o.s);
    hn_tcp_store_close(srv);
    hn_sb_free(&why);
}

/* No server: a client says so at its deadline; a port another holds, an
 * address that is none: named. */
static void test_refusals(void)
{
    int port = free_port();
    hn_strbuf why;
    hn_tcp_store *srv, *again;
    double t0;
    CU_ASSERT_FATAL(port > 0);
    hn_sb_init(&why);
    t0 = hn_now();
    CU_ASSERT_PTR_NULL(hn_tcp_store_open("127.0.0.1", port, 0, 0.3, &why));
    CU_ASSERT(hn_now() - t0 < 5);
    CU_ASSERT_PTR_NOT_NULL(why.data != NULL ? strstr(why.data, "no server answered before the deadline") : NULL);
    hn_sb_free(&why);
    hn_sb_init(&why);
    srv = hn_tcp_store_open("127.0.0.1", port, 1, 1, &why);
    CU_ASSERT_PTR_NOT_NULL_FATAL(srv);
    again = hn_tcp_store_open("127.0.0.1", port, 1, 1, &why);
    CU_ASSERT_PTR_NULL(again);
    CU_ASSERT_PTR_NOT_NULL(why.data != NULL ? strstr(why.data, "cannot listen there") : NULL);
    hn_tcp_store_close(srv);
    hn_sb_free(&why);
    hn_sb_init(&why);
    CU_ASSERT_PTR_NULL(hn_tcp_store_open("127.0.0.1", 0, 1, 1, &why));
    CU_ASSERT_PTR_NULL(hn_tcp_store_open("", port, 0, 1, &why));
    CU_ASSERT_PTR_NOT_NULL(why.data != NULL ? strstr(why.data, "not an address") : NULL);
    hn_sb_free(&why);
}

static void set_env(const char *store, const char *addr, const char *port)
{
    if (store != NULL)
        setenv("HIRNODE_STORE", store, 1);
    else
        unsetenv("HIRNODE_STORE");
    if (addr != NULL)
        setenv("MASTER_ADDR", addr, 1);
    else
        unsetenv("MASTER_ADDR");
    if (port != NULL)
        setenv("MASTER_PORT", port, 1);
    else
        unsetenv("MASTER_PORT");
}

static void test_address(void)
{
    static const char *const vars[] = {"HIRNODE_STORE", "MASTER_ADDR", "MASTER_PORT"};
    char *saved[3], host[64];
    int port = 0;
    hn_strbuf why;
    hn_test_env_save(vars, 3, saved);
    hn_sb_init(&why);
    set_env(NULL, NULL, NULL);
    CU_ASSERT_EQUAL(hn_tcp_store_address(host, sizeof(host), &port, &why), 0);
    set_env(NULL, "10.0.0.7", NULL); /* half of torchrun's: none */
    CU_ASSERT_EQUAL(hn_tcp_store_address(host, sizeof(host), &port, &why), 0);
    set_env(NULL, "10.0.0.7", "29500");
    CU_ASSERT_EQUAL(hn_tcp_store_address(host, sizeof(host), &port, &why), 1);
    CU_ASSERT_STRING_EQUAL(host, "10.0.0.7");
    CU_ASSERT_EQUAL(port, 29501);
    set_env("node-a:4000", "10.0.0.7", "29500"); /* HIRNODE_STORE first */
    CU_ASSERT_EQUAL(hn_tcp_store_address(host, sizeof(host), &port, &why), 1);
    CU_ASSERT_STRING_EQUAL(host, "node-a");
    CU_ASSERT_EQUAL(port, 4000);
    set_env("[::1]:4001", NULL, NULL);
    CU_ASSERT_EQUAL(hn_tcp_store_address(host, sizeof(host), &port, &why), 1);
    CU_ASSERT_STRING_EQUAL(host, "::1");
    CU_ASSERT_EQUAL(port, 4001);
    CU_ASSERT_PTR_NULL(why.data);
    set_env("node-a", NULL, NULL);
    CU_ASSERT_EQUAL(hn_tcp_store_address(host, sizeof(host), &port, &why), -1);
    CU_ASSERT_PTR_NOT_NULL(why.data != NULL ? strstr(why.data, "HIRNODE_STORE: expected host:port") : NULL);
    set_env(":80", NULL, NULL);
    CU_ASSERT_EQUAL(hn_tcp_store_address(host, sizeof(host), &port, &why), -1);
    set_env("h:70000", NULL, NULL);
    CU_ASSERT_EQUAL(hn_tcp_store_address(host, sizeof(host), &port, &why), -1);
    set_env(NULL, "10.0.0.7", "65535"); /* no port above it */
    CU_ASSERT_EQUAL(hn_tcp_store_address(host, sizeof(host), &port, &why), -1);
    set_env(NULL, "10.0.0.7", "x");
    CU_ASSERT_EQUAL(hn_tcp_store_address(host, sizeof(host), &port, &why), -1);
    hn_sb_free(&why);
    hn_test_env_restore(vars, 3, saved);
}

void hn_suite_store_tcp(void)
{
    static CU_TestInfo tests[] = {
        {"a server and its clients set and get; a get waits for a later set, ends at its deadline",
         test_set_get},
        {"a client before its server; a malformed frame drops its connection only", test_order_and_garbage},
        {"no server, a port held, no address: named", test_refusals},
        {"the launcher's address: HIRNODE_STORE, else MASTER_ADDR and MASTER_PORT + 1", test_address},
        CU_TEST_INFO_NULL,
    };
    hn_test_add_suite("world/store_tcp", tests);
}
