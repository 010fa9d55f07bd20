/* NumPy .npy files (format 1.0, little-endian, C order) for tensors. */
#ifndef HN_NPY_H
#define HN_NPY_H

#include "device.h"

/* Writes a contiguous host tensor; bf16/f16 are written as float32. */
hn_status_t hn_npy_write(const char *path, const hn_tensor *t, hn_strbuf *err);
/* Reads into a contiguous host buffer of t's dtype and shape (converting
 * from f2/f4/f8/i4/i8); the file's shape must equal t's. */
hn_status_t hn_npy_read(const char *path, const hn_tensor *t, hn_strbuf *err);

#endif
