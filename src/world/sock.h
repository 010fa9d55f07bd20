/* What the world's TCP endpoints share (sock.c): the store (store_tcp.c)
 * and the link between nodes (net.c). */
#ifndef HN_WORLD_SOCK_H
#define HN_WORLD_SOCK_H

#include <netdb.h>
#include <stddef.h>

#include "../base/util.h"

/* Sends all n bytes (blocking; no SIGPIPE); 0, or -1 once the peer is gone. */
int hn_sock_send_all(int fd, const void *p, size_t n);
/* The stream addresses of host:port (host NULL with passive: every
 * address of this machine, to listen on) into *out (freeaddrinfo); -1
 * with "WHAT host:port: cannot resolve host: ..." in why. */
int hn_sock_resolve(const char *what, const char *host, int port, int passive, struct addrinfo **out, hn_strbuf *why);

/* One try to connect to any of ai's addresses, each within ms: the
 * connected socket (blocking, close-on-exec), or -1. A host that does not
 * answer costs ms, not the kernel's connect timeout. */
int hn_sock_connect_once(const struct addrinfo *ai, int ms);

#endif
