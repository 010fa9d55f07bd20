/* A strided tensor's geometry: its element type, shape and strides, and
 * the pure helpers over them (tensor.c) that every layer above shares. */
#ifndef HN_TENSOR_H
#define HN_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "dtype.h"

#define HN_TENSOR_MAX_DIMS 8

/* A strided tensor as the backends see it: element strides, data pointer
 * already offset to element [0,...,0]. */
typedef struct hn_tensor {
    void *data;
    hn_dtype dtype;
    int ndim;
    int64_t shape[HN_TENSOR_MAX_DIMS];
    int64_t stride[HN_TENSOR_MAX_DIMS];
} hn_tensor;

/* Row-major strides from t's shape (dimensions >= 0). 0 when the element
 * count and the byte size fit in int64; 1 when they overflow (then the
 * strides are unspecified and t must not be used). Every tensor made by a
 * program passes here, so that numel, bytes and every offset of its
 * views fit afterwards. */
int hn_tensor_make_contiguous(hn_tensor *t);
/* "d0 × d1 elements overflows" (or "... elements of N bytes overflows"),
 * for a shape hn_tensor_make_contiguous rejected. */
void hn_shape_overflow_text(const hn_tensor *t, char *buf, size_t n);
int64_t hn_tensor_numel(const hn_tensor *t);
/* "bf16[4, 8]", for messages. */
void hn_tensor_shape_text(const hn_tensor *t, char *buf, size_t n);
int hn_tensor_is_contiguous(const hn_tensor *t);
size_t hn_tensor_bytes(const hn_tensor *t); /* numel * element size */

#endif
