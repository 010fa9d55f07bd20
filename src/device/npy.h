/* NumPy .npy files (format 1.0, little-endian, C order) for tensors. */
#ifndef HN_NPY_H
#define HN_NPY_H

#include "device.h"

/* The bytes of a .npy file of a contiguous host tensor, appended to out;
 * bf16/f16 as float32, integers as they are. */
hn_status_t hn_npy_encode(const hn_tensor *t, hn_strbuf *out);
/* Writes a contiguous host tensor; bf16/f16 are written as float32. */
hn_status_t hn_npy_write(const char *path, const hn_tensor *t, hn_strbuf *err);
/* Reads into a contiguous host buffer of t's dtype and shape (converting
 * from f2/f4/f8/i4/i8); the file's shape must equal t's, its size exactly
 * the header and that shape's data, and it must be a regular file (checked
 * before it is read). Errors as `path: error: ...` lines into err. */
hn_status_t hn_npy_read(const char *path, const hn_tensor *t, hn_strbuf *err);
/* The same from a whole file held in memory (size bytes); `path` only
 * names it in errors. Values an integer tensor cannot hold are refused. */
hn_status_t hn_npy_decode(const void *data, size_t size, const char *path, const hn_tensor *t, hn_strbuf *err);

#endif
