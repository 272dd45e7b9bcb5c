/*
 * A tensor for tests, kept as a host "image" of its whole device allocation:
 *
 *   | guard (pattern) | interior: span elements reachable through the strides | guard |
 *
 * The device buffer comes from fmsa_malloc and is addressed only through
 * fmsa_tensor.byte_offset = guard, so it works for every backend (a cl_mem
 * cannot be offset any other way).  Elements of the interior that the shape
 * does not reach (row padding, gaps of non-contiguous layouts) are "holes".
 *
 * Before a run: guards hold a position-dependent pattern, output interiors and
 * every hole hold 0xFF bytes (NaN in f32, f16 and bf16: "poison").  After a
 * run: guards and holes must be bit-identical, inputs must be bit-identical
 * (a byte comparison is a stronger checksum), and every element of an output
 * must have been written (no NaN left).
 */
#ifndef FMSA_TEST_BUFFER_H
#define FMSA_TEST_BUFFER_H

#include <stddef.h>
#include <stdint.h>

#include "flashmsa/flashmsa.h"

/// Bytes of guard on each side: larger than one row of the widest tile a
/// kernel may overrun (256 fp32 = 1 KiB), so a stray tile write lands in it.
#define FMSA_TEST_GUARD_BYTES 4096
/// Fill byte of output interiors and holes: 0xFFFF.. is a NaN in every float dtype.
#define FMSA_TEST_POISON_BYTE 0xFF

/// Role of a buffer in one call.
typedef enum fmsa_test_role {
    FMSA_TEST_INPUT = 0,  ///< must come back bit-identical
    FMSA_TEST_OUTPUT = 1, ///< poisoned; every element must be written
} fmsa_test_role;

typedef struct fmsa_test_buf {
    const char *name;      ///< "q", "lse", ... for messages
    fmsa_dtype dtype;      ///< element type
    fmsa_test_role role;   ///< input or output of the call under test
    int32_t ndim;          ///< 1..4
    int64_t shape[FMSA_MAX_DIMS];   ///< extents
    int64_t strides[FMSA_MAX_DIMS]; ///< element strides (0 broadcasts)
    int64_t count;         ///< logical elements (product of shape)
    int64_t span;          ///< interior elements (0 when count = 0)
    size_t esize;          ///< bytes per element
    size_t total;          ///< bytes of the allocation: span * esize + 2 guards
    unsigned char *host;   ///< image of the allocation as sent to the device
    unsigned char *hole;   ///< span flags: 1 = no logical element lives there
    void *dev;             ///< fmsa_malloc result (NULL until uploaded)
} fmsa_test_buf;

/// Makes the host image: guards patterned, interior poisoned.  Returns 0, or
/// -1 if host memory ran out.  strides = NULL: contiguous.
int fmsa_test_buf_init(fmsa_test_buf *b, const char *name, fmsa_dtype dtype, fmsa_test_role role,
                       int32_t ndim, const int64_t *shape, const int64_t *strides);
/// Frees host and device memory (ctx may be NULL if never uploaded).
void fmsa_test_buf_free(fmsa_context *ctx, fmsa_test_buf *b);

/// Host address of element 0 inside an image (b->host or a downloaded copy).
void *fmsa_test_buf_origin(const fmsa_test_buf *b, const unsigned char *image);
/// Element offset of the n-th logical element in row-major order of the shape.
int64_t fmsa_test_buf_offset(const fmsa_test_buf *b, int64_t n);

/// Writes dense row-major values (rounded to the dtype; f32/f16/bf16 only).
void fmsa_test_buf_store(fmsa_test_buf *b, const double *dense);
/// Reads an image's logical elements as dense row-major doubles (f32/f16/bf16/i32).
void fmsa_test_buf_load(const fmsa_test_buf *b, const unsigned char *image, double *dense);
/// Writes dense row-major int32 values (FMSA_DTYPE_I32).
void fmsa_test_buf_store_i32(fmsa_test_buf *b, const int32_t *dense);
/// Writes dense row-major bytes (FMSA_DTYPE_U8).
void fmsa_test_buf_store_u8(fmsa_test_buf *b, const unsigned char *dense);

/// Allocates the device buffer if needed and copies the whole image to it.
fmsa_status fmsa_test_buf_upload(fmsa_context *ctx, fmsa_test_buf *b);
/// Copies the whole allocation back into image (b->total bytes).
fmsa_status fmsa_test_buf_download(fmsa_context *ctx, const fmsa_test_buf *b,
                                   unsigned char *image);

/// Device descriptor (data = the allocation, byte_offset = guard).
fmsa_tensor fmsa_test_buf_tensor(const fmsa_test_buf *b);

/// Checks a downloaded image against what was sent: guards and holes intact;
/// inputs unchanged; outputs fully written (no NaN; inf only where
/// allow_inf, for the -inf LSE of fully masked rows).  Returns 0 or -1 with a
/// one-line reason in msg.
int fmsa_test_buf_check(const fmsa_test_buf *b, const unsigned char *image, int allow_inf,
                        char *msg, size_t len);

#endif /* FMSA_TEST_BUFFER_H */
