/* The fuzz targets' entry points and input formats (programs, .npy files,
 * traces), shared by the libFuzzer builds (make fuzz) and the CUnit suite
 * that replays the committed corpora. */
#ifndef HN_FUZZ_H
#define HN_FUZZ_H

#include <stddef.h>
#include <stdint.h>

/* An input is a header of HN_FUZZ_HEADER bytes, then program text:
 *   [0]     ranks    = 1 + b % 8
 *   [1]     nstreams = 1 + b % 16
 *   [2..3]  little-endian n: when not 0, the n-th allocation fails
 *           (hn_alloc_fail_after) from the parse on
 *   [4..7]  two parameter overrides, (which, value) byte pairs: `which`
 *           with bit 7 set is none, else parameter which % nparams;
 *           `value` below 0xc0 is value - 0x20 (-32 .. 159), else one of
 *           the extreme values (±2^63, 2^62, 2^32, ...)
 * A shorter input is all program text with the default header (4 ranks,
 * 3 streams, no failure, no override). */
#define HN_FUZZ_HEADER 8

/* How far one input went: it reached the parse, parsed, had its parameters
 * resolved, or passed the dry run of every rank. */
typedef enum hn_fuzz_stage {
    HN_FUZZ_REJECTED_PARSE,
    HN_FUZZ_PARSED,
    HN_FUZZ_RESOLVED,
    HN_FUZZ_VERIFIED,
} hn_fuzz_stage;

typedef struct hn_fuzz_outcome {
    hn_fuzz_stage stage;
    int ranks, nstreams;
    char broken[512]; /* a broken promise ("" when none): see fuzz_program.c */
} hn_fuzz_outcome;

/* Parses, verifies statically, prints and parses again, resolves the
 * parameters and dry-runs every rank; frees everything. Writes what
 * happened into *out. Nothing here touches a device or starts a thread. */
void hn_fuzz_program(const uint8_t *data, size_t size, hn_fuzz_outcome *out);

/* ---- the file readers' targets (fuzz_npy.c, fuzz_trace.c) ---- */

/* How far a file went: refused (with a message), or read. */
typedef struct hn_fuzz_file_outcome {
    int accepted;
    char broken[512]; /* a broken promise ("" when none) */
} hn_fuzz_file_outcome;

/* A .npy input is a header of HN_FUZZ_NPY_HEADER bytes, then the file:
 *   [0]     the tensor's dtype: b % 5 of f32, bf16, f16, i32, i64
 *   [1]     its dimensions: 1 + b % 3
 *   [2..4]  their sizes: b % 17 each
 * The file is decoded for a tensor of that dtype and shape (what a program
 * input needs); one that decodes is encoded again and decodes to the same
 * values. */
#define HN_FUZZ_NPY_HEADER 5
void hn_fuzz_npy(const uint8_t *data, size_t size, hn_fuzz_file_outcome *out);

/* A trace input is the whole file: read back, then what `trace summary`
 * and `trace svg` compute from it for every run and for all runs. */
void hn_fuzz_trace(const uint8_t *data, size_t size, hn_fuzz_file_outcome *out);

/* libFuzzer's entry point (in each target, built with HN_FUZZ_ENTRY by
 * make fuzz): the target's function, aborting on a broken promise. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
