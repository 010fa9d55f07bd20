/* A key-value store over TCP, for processes that must meet before they
 * share anything: one process serves it at an address every process
 * knows (its launcher's: HIRNODE_STORE, or torchrun's MASTER_ADDR and
 * MASTER_PORT + 1), the others connect to it. Keys and values are strings;
 * a get waits until the key is set or its deadline passes. The runtime
 * meets through it as through a caller's store (src/runtime/meet.c). */
#ifndef HN_WORLD_STORE_TCP_H
#define HN_WORLD_STORE_TCP_H

#include <stddef.h>

#include "../base/util.h"

#define HN_TCP_STORE_KEY_MAX 512    /* bytes of a key, at most */
#define HN_TCP_STORE_VALUE_MAX 4096 /* bytes of a value, at most */
#define HN_TCP_STORE_KEYS_MAX 4096  /* keys a store holds, at most */

typedef struct hn_tcp_store hn_tcp_store;

/* The store at host:port. serve: this process listens there (on that
 * address only) and answers the others from a thread of its own; else it
 * connects, trying again until timeout_s (the server may come later).
 * NULL with the reason in why. */
hn_tcp_store *hn_tcp_store_open(const char *host, int port, int serve, double timeout_s, hn_strbuf *why);
/* 0: key holds value (replacing an earlier one); -1: refused (too long,
 * or a new key beyond HN_TCP_STORE_KEYS_MAX) or the server is gone. */
int hn_tcp_store_set(hn_tcp_store *s, const char *key, const char *value);
/* 0: key's value, NUL-terminated, in value (cap bytes); -1: not set
 * within timeout_s, too long for cap, or the server is gone. */
int hn_tcp_store_get(hn_tcp_store *s, const char *key, char *value, size_t cap, double timeout_s);
/* Closes the connection, or stops serving (connections dropped). */
void hn_tcp_store_close(hn_tcp_store *s);

/* The launcher's store address: HIRNODE_STORE ("host:port"), else
 * MASTER_ADDR with MASTER_PORT + 1 (torchrun's own store holds
 * MASTER_PORT). 1 when found, 0 when none is set, -1 when malformed (why
 * says). */
int hn_tcp_store_address(char *host, size_t cap, int *port, hn_strbuf *why);

#endif
