/* The world's TCP endpoints' shared pieces (sock.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sock.h"

int hn_sock_send_all(int fd, const void *p, size_t n)
{
    const unsigned char *q = p;
    while (n > 0) {
        ssize_t w = send(fd, q, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        q += w;
        n -= (size_t)w;
    }
    return 0;
}

int hn_sock_resolve(const char *what, const char *host, int port, int passive, struct addrinfo **out, hn_strbuf *why)
{
    struct addrinfo hints;
    char service[16];
    int e;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = passive ? AI_PASSIVE : 0;
    snprintf(service, sizeof(service), "%d", port);
    if ((e = getaddrinfo(host, service, &hints, out)) != 0) {
        hn_sb_printf(why, "%s %s:%d: cannot resolve %s: %s", what, host != NULL ? host : "*", port,
                     host != NULL ? host : "*", gai_strerror(e));
        return -1;
    }
    return 0;
}

int hn_sock_connect_once(const struct addrinfo *ai, int ms)
{
    for (const struct addrinfo *a = ai; a != NULL; a = a->ai_next) {
        int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol), err = 0;
        socklen_t len = sizeof(err);
        struct pollfd p;
        if (fd < 0)
            continue;
        if (connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
            p = (struct pollfd){fd, POLLOUT, 0};
            if (errno != EINPROGRESS || poll(&p, 1, ms) != 1 ||
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
                close(fd);
                continue;
            }
        }
        (void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
        return fd;
    }
    return -1;
}
