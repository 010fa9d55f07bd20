/* hirnode public API: run one host program on N devices from one process. */
#ifndef HIRNODE_H
#define HIRNODE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HN_VERSION_MAJOR 0
#define HN_VERSION_MINOR 2
#define HN_VERSION_PATCH 0

/* Status codes: 0 is success, every error is negative. */
typedef enum hn_status {
    HN_OK = 0,
    HN_ERR_NOMEM = -1,       /* an allocation failed */
    HN_ERR_INVALID = -2,     /* bad argument to an API call */
    HN_ERR_PARSE = -3,       /* the program text does not parse */
    HN_ERR_VERIFY = -4,      /* the program is rejected by the verifier */
    HN_ERR_RUNTIME = -5,     /* an instruction failed while running */
    HN_ERR_TIMEOUT = -6,     /* a rank waited past its deadline */
    HN_ERR_MISMATCH = -7,    /* ranks diverged on a communication */
    HN_ERR_UNSUPPORTED = -8, /* the backend does not implement this */
    HN_ERR_IO = -9,          /* a file could not be read or written */
    HN_ERR_ABORTED = -10,    /* another rank failed; this one stopped */
    HN_ERR_DEVICE = -11,     /* the device layer failed */
    HN_ERR_BUSY = -13,       /* work is still running (a query) */
    HN_ERR_DEVICE_LOST = -12, /* a device's context is lost (an illegal
                                 address, a trap): nothing in this process
                                 can use that device any more */
    HN_ERR_PEER_LOST = -14,   /* a process of the world died: this runtime
                                 cannot run again (destroy it) */
} hn_status_t;

/* Element types of inputs and outputs (the IR's f32 bf16 f16 i32 i64). */
typedef enum hn_dtype_code {
    HN_DTYPE_F32 = 0,
    HN_DTYPE_BF16 = 1,
    HN_DTYPE_F16 = 2,
    HN_DTYPE_I32 = 3,
    HN_DTYPE_I64 = 4
} hn_dtype_code;

/* What a device backend's memory and streams are (hn_runtime_device_kind):
 * where tensors bound to a run must live and what a launch's streams are.
 * The values are DLPack's device types (kDLCPU, kDLCUDA). */
typedef enum hn_device_kind {
    HN_DEVICE_KIND_NONE = 0, /* no runtime (hn_runtime_device_kind(NULL)) */
    HN_DEVICE_KIND_HOST = 1, /* host memory: the CPU emulation, ranks are
                                threads; streams are the runtime's own
                                (hn_runtime_stream_create) */
    HN_DEVICE_KIND_CUDA = 2  /* CUDA device memory of the rank's ordinal
                                (hn_runtime_device); streams are
                                cudaStream_t */
} hn_device_kind;

/* A short lowercase text for a status; never NULL, static storage. */
const char *hn_status_string(hn_status_t status);

/* Library version as "major.minor.patch"; static storage. */
const char *hn_version(void);

#ifdef __cplusplus
}
#endif
#endif
