/*
 * The fuzz harness's decoder: turns an input's bytes into one attention call
 * (descriptors, host buffers sized to their views, metadata) for
 * fuzz_api.c.  The byte layout is in tests/fuzz/README.md; every byte the
 * input lacks reads as 0, which decodes to the plainest choice, so short
 * inputs are valid small problems and the fuzzer grows them into features.
 */
#ifndef FMSA_TESTS_FUZZ_DECODE_H
#define FMSA_TESTS_FUZZ_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "flashmsa/flashmsa.h"

/// Tensors of one call, in the order of the per-tensor layout bytes.
enum {
    FUZZ_Q, FUZZ_K, FUZZ_V, FUZZ_O, FUZZ_LSE, FUZZ_DOUT, FUZZ_DQ, FUZZ_DK, FUZZ_DV,
    FUZZ_MASK, FUZZ_ALIBI, FUZZ_CU_Q, FUZZ_CU_K, FUZZ_TABLE, FUZZ_USED,
    FUZZ_NT ///< count
};

/// CPU backend settings a context can be created under (fuzz_env_apply).
enum { FUZZ_ENV_COUNT = 8 };

/// One tensor's host allocation; snap is a copy taken before a call.
typedef struct fuzz_buf {
    unsigned char *mem;  ///< what the view's data points at (NULL: absent)
    unsigned char *snap; ///< snapshot for the "nothing written" checks
    size_t bytes;        ///< allocation size: exactly what the view can reach
    int stub;            ///< the view's reach overflows: a small buffer never to be touched
} fuzz_buf;

/// One decoded call.
typedef struct fuzz_call {
    fmsa_attention_desc desc; ///< features; its tensors alias t[FUZZ_MASK..]
    fmsa_tensor t[FUZZ_NT];   ///< every view
    fuzz_buf buf[FUZZ_NT];    ///< the host memory behind each
    void *ws;                 ///< workspace (fuzz_workspace)
    size_t ws_bytes;          ///< its size
    int ws_code;              ///< exact, short by one, none, or larger
    int env;                  ///< which context settings (fuzz_env_apply)
    int backward;             ///< run fmsa_backward after the forward
    int lse_given;            ///< pass t[FUZZ_LSE] (else NULL)
    int inputs_tame;          ///< finite inputs and scalars: successful outputs must be finite
    int forward_ok;           ///< set by the harness: O/LSE hold this forward's results
} fuzz_call;

/// Decodes data into *c and allocates its buffers; 0 on success, -1 when the
/// input is rejected (too large to allocate).  Release with fuzz_release.
int fuzz_decode(const uint8_t *data, size_t size, fuzz_call *c);
/// Frees every buffer of *c.
void fuzz_release(fuzz_call *c);
/// Allocates the workspace for a pass asking `need` bytes, per c->ws_code.
void fuzz_workspace(fuzz_call *c, size_t need);
/// Fills the buffers of the listed tensors with NaN bytes.
void fuzz_fill_nan(fuzz_call *c, const int *which, int n);
/// fuzz_fill_nan, then fuzz_snapshot.
void fuzz_poison(fuzz_call *c, const int *which, int n);
/// Snapshots the listed tensors' buffers.
void fuzz_snapshot(fuzz_call *c, const int *which, int n);
/// Offset in elements of the e-th element of t in row-major index order
/// (every shape entry > 0).
int64_t fuzz_element_offset(const fmsa_tensor *t, int64_t e);
/// Element `off` (in elements, from data + byte_offset) of t as fp32.
float fuzz_load(const fmsa_tensor *t, int64_t off);
/// Short name of tensor index i ("q", "lse", "desc.mask", ...).
const char *fuzz_tensor_name(int i);
/// Sets (or clears) FLASHMSA_CPU_BWD / FLASHMSA_CPU_TILES for setting env.
void fuzz_env_apply(int env);

#endif /* FMSA_TESTS_FUZZ_DECODE_H */
