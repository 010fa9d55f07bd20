/* The world's TCP endpoints' shared pieces (sock.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

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
