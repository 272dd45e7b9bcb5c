/*
 * Reproducers of bugs the fuzzer (tests/fuzz) found, issue 18; fixed, so they
 * guard against regressions.
 *
 * 1. A window wider than any sequence (INT64_MAX) was accepted by the
 *    validation and then overflowed the window arithmetic (common/fmsa_seq.h:
 *    fmsa_window_key_begin's diag - window_left, UBSan "signed integer
 *    overflow: -23 - 9223372036854775807"; fmsa_window_key_end's diag +
 *    window_right + 1): window_right = INT64_MAX wrapped to an empty key range
 *    in the Release build, so O = 0 and LSE = -inf.  validate.c now folds a
 *    window at least as wide as every sequence into -1 (unlimited), so the
 *    result must equal the unwindowed one bit for bit (a refusal naming the
 *    field would pass too).
 * 2. An output view that overlaps itself was accepted: an LSE [B, H, Sq] with
 *    strides {H*Sq, Sq - 1, 2} puts row h's last four entries on row h+1's
 *    first four.  The forward returned FMSA_SUCCESS having overwritten its own
 *    LSE values, and a backward on that LSE gave inf in dQ (the fuzzer's
 *    finding: fp16, D 64, amplitude 5).  common/validate_memory.c refuses it;
 *    the interleaved strides {H*Sq, Sq, 2}, whose rows share no element, are
 *    accepted and give the dense LSE's values.
 * 4. softmax_scale = 0 (valid: any finite scale) gave NaN in every O on the
 *    AVX512-BF16 forward of bf16 inputs: it folds the scale into the exponent
 *    (P = exp2(s * scale - m)) assuming scale > 0, and 0 * -inf is NaN.  With
 *    scale 0 every visible key weighs the same: O = the mean of V.
 * 3. The overlap search itself overflowed (UBSan: INT64_MAX * 2) on a view
 *    whose extent-1 dimension has stride INT64_MAX, which validation accepts
 *    (such a stride reaches nothing): the search now skips extent-1 dims.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "flashmsa/flashmsa.h"

enum { B = 1, SQ = 9, SK = 23, H = 2, D = 16 };

static void run_forward(int64_t left, int64_t right, float *o, float *lse, fmsa_status *st) {
    static float q[B * SQ * H * D], k[B * SK * H * D], v[B * SK * H * D];
    const int64_t qs[4] = {B, SQ, H, D}, ks[4] = {B, SK, H, D}, ls[3] = {B, H, SQ};
    fmsa_context *ctx = NULL;
    unsigned s = 5;
    for (size_t i = 0; i < sizeof q / sizeof q[0]; ++i) q[i] = (float)((s = s * 1664525u + 1013904223u) >> 9) / 8388608.0f - 1.0f;
    for (size_t i = 0; i < sizeof k / sizeof k[0]; ++i) k[i] = (float)((s = s * 1664525u + 1013904223u) >> 9) / 8388608.0f - 1.0f;
    for (size_t i = 0; i < sizeof v / sizeof v[0]; ++i) v[i] = (float)((s = s * 1664525u + 1013904223u) >> 9) / 8388608.0f - 1.0f;
    assert_int_equal(fmsa_context_create(FMSA_BACKEND_CPU, 0, &ctx), FMSA_SUCCESS);
    fmsa_tensor tq = fmsa_tensor_contiguous(q, FMSA_DTYPE_F32, 4, qs);
    fmsa_tensor tk = fmsa_tensor_contiguous(k, FMSA_DTYPE_F32, 4, ks);
    fmsa_tensor tv = fmsa_tensor_contiguous(v, FMSA_DTYPE_F32, 4, ks);
    fmsa_tensor to = fmsa_tensor_contiguous(o, FMSA_DTYPE_F32, 4, qs);
    fmsa_tensor tl = fmsa_tensor_contiguous(lse, FMSA_DTYPE_F32, 3, ls);
    fmsa_attention_desc desc = fmsa_attention_desc_init(D);
    size_t ws_bytes = 0;
    void *ws = NULL;
    desc.window_left = left;
    desc.window_right = right;
    *st = fmsa_workspace_size(ctx, FMSA_PASS_FORWARD, &desc, &tq, &tk, &tv, &ws_bytes);
    if (*st == FMSA_SUCCESS) {
        ws = ws_bytes ? malloc(ws_bytes) : NULL;
        *st = fmsa_forward(ctx, &desc, &tq, &tk, &tv, &to, &tl, ws, ws_bytes, NULL);
    }
    free(ws);
    fmsa_context_destroy(ctx);
}

static void check_wide_window(int64_t left, int64_t right, const char *field) {
    static float o_ref[B * SQ * H * D], lse_ref[B * H * SQ], o[B * SQ * H * D], lse[B * H * SQ];
    fmsa_status st;
    run_forward(-1, -1, o_ref, lse_ref, &st);
    assert_int_equal(st, FMSA_SUCCESS);
    memset(o, 0x7f, sizeof o);
    memset(lse, 0x7f, sizeof lse);
    run_forward(left, right, o, lse, &st);
    if (st == FMSA_ERR_INVALID_ARGUMENT) {
        assert_non_null(strstr(fmsa_last_error(), field)); /* refused, with the field named */
        return;
    }
    assert_int_equal(st, FMSA_SUCCESS);
    assert_memory_equal(o, o_ref, sizeof o);     /* today: O = 0 */
    assert_memory_equal(lse, lse_ref, sizeof lse); /* today: LSE = -inf */
}

static void window_left_int64_max(void **state) {
    (void)state;
    check_wide_window(INT64_MAX, -1, "window_left");
}

static void window_right_int64_max(void **state) {
    (void)state;
    check_wide_window(-1, INT64_MAX, "window_right");
}

/* Forward with an LSE of strides {H*SQ, row_stride, 2} in a buffer of 2x
 * the dense size; the dense LSE's values are compared where it succeeds. */
static fmsa_status forward_strided_lse(int64_t row_stride, float *dense, float *strided) {
    static float q[B * SQ * H * D], o[B * SQ * H * D];
    const int64_t qs[4] = {B, SQ, H, D}, ls[3] = {B, H, SQ};
    fmsa_context *ctx = NULL;
    fmsa_status st;
    for (size_t i = 0; i < sizeof q / sizeof q[0]; ++i) q[i] = (float)(i % 7) * 0.25f - 0.75f;
    assert_int_equal(fmsa_context_create(FMSA_BACKEND_CPU, 0, &ctx), FMSA_SUCCESS);
    fmsa_tensor tq = fmsa_tensor_contiguous(q, FMSA_DTYPE_F32, 4, qs);
    fmsa_tensor to = fmsa_tensor_contiguous(o, FMSA_DTYPE_F32, 4, qs);
    fmsa_tensor td = fmsa_tensor_contiguous(dense, FMSA_DTYPE_F32, 3, ls);
    fmsa_tensor tl = fmsa_tensor_contiguous(strided, FMSA_DTYPE_F32, 3, ls);
    fmsa_attention_desc desc = fmsa_attention_desc_init(D);
    assert_int_equal(fmsa_forward(ctx, &desc, &tq, &tq, &tq, &to, &td, NULL, 0, NULL),
                     FMSA_SUCCESS);
    tl.strides[1] = row_stride;
    tl.strides[2] = 2;
    st = fmsa_forward(ctx, &desc, &tq, &tq, &tq, &to, &tl, NULL, 0, NULL);
    fmsa_context_destroy(ctx);
    return st;
}

static void lse_overlapping_itself(void **state) {
    static float dense[B * H * SQ], lse[B * H * SQ * 2], snap[B * H * SQ * 2];
    (void)state;
    memset(lse, 0x7f, sizeof lse);
    memcpy(snap, lse, sizeof lse);
    /* rows SQ - 1 apart, entries 2 apart: row h+1 starts on row h's fifth entry */
    assert_int_equal(forward_strided_lse(SQ - 1, dense, lse), FMSA_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(fmsa_last_error(), "lse"));
    assert_memory_equal(lse, snap, sizeof lse); /* nothing written */
}

static void lse_interleaved_accepted(void **state) {
    static float dense[B * H * SQ], lse[B * H * SQ * 2];
    (void)state;
    memset(lse, 0x7f, sizeof lse);
    /* rows SQ (odd) apart, entries 2 apart: row 0 on even, row 1 on odd slots */
    assert_int_equal(forward_strided_lse(SQ, dense, lse), FMSA_SUCCESS);
    for (int h = 0; h < H; ++h)
        for (int i = 0; i < SQ; ++i) assert_memory_equal(&lse[h * SQ + 2 * i], &dense[h * SQ + i], 4);
}

static void huge_stride_of_extent_one(void **state) {
    static float dense[B * H * SQ], lse[B * H * SQ * 2];
    static float q[B * SQ * H * D], o[B * SQ * H * D], o_ref[B * SQ * H * D];
    const int64_t qs[4] = {B, SQ, H, D}, ls[3] = {B, H, SQ};
    fmsa_context *ctx = NULL;
    (void)state;
    for (size_t i = 0; i < sizeof q / sizeof q[0]; ++i) q[i] = (float)(i % 5) * 0.25f - 0.5f;
    assert_int_equal(fmsa_context_create(FMSA_BACKEND_CPU, 0, &ctx), FMSA_SUCCESS);
    fmsa_tensor tq = fmsa_tensor_contiguous(q, FMSA_DTYPE_F32, 4, qs);
    fmsa_tensor to = fmsa_tensor_contiguous(o_ref, FMSA_DTYPE_F32, 4, qs);
    fmsa_tensor tl = fmsa_tensor_contiguous(dense, FMSA_DTYPE_F32, 3, ls);
    fmsa_attention_desc desc = fmsa_attention_desc_init(D);
    assert_int_equal(fmsa_forward(ctx, &desc, &tq, &tq, &tq, &to, &tl, NULL, 0, NULL),
                     FMSA_SUCCESS);
    to.data = o;
    tl.data = lse;
    to.strides[0] = INT64_MAX; /* B = 1: the batch stride is never applied */
    tl.strides[0] = INT64_MAX;
    assert_int_equal(fmsa_forward(ctx, &desc, &tq, &tq, &tq, &to, &tl, NULL, 0, NULL),
                     FMSA_SUCCESS);
    fmsa_context_destroy(ctx);
    assert_memory_equal(o, o_ref, sizeof o);
    assert_memory_equal(lse, dense, sizeof dense);
}

static uint16_t to_bf16(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static float from_bf16(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static void zero_scale_bf16(void **state) {
    enum { S = 35, DD = 8 };
    static uint16_t q[S * DD], k[S * DD], v[S * DD], o[S * DD];
    const int64_t shape[4] = {1, S, 1, DD};
    fmsa_context *ctx = NULL;
    unsigned s = 3;
    (void)state;
    for (int i = 0; i < S * DD; ++i) {
        s = s * 1664525u + 1013904223u;
        q[i] = to_bf16((float)(s >> 8) / 8388608.0f - 1.0f);
        k[i] = q[(i * 7) % (S * DD)];
        v[i] = to_bf16((float)((i * 37) % 101) / 50.0f - 1.0f);
    }
    assert_int_equal(fmsa_context_create(FMSA_BACKEND_CPU, 0, &ctx), FMSA_SUCCESS);
    fmsa_tensor tq = fmsa_tensor_contiguous(q, FMSA_DTYPE_BF16, 4, shape);
    fmsa_tensor tk = fmsa_tensor_contiguous(k, FMSA_DTYPE_BF16, 4, shape);
    fmsa_tensor tv = fmsa_tensor_contiguous(v, FMSA_DTYPE_BF16, 4, shape);
    fmsa_tensor to = fmsa_tensor_contiguous(o, FMSA_DTYPE_BF16, 4, shape);
    fmsa_attention_desc desc = fmsa_attention_desc_init(DD);
    desc.softmax_scale = 0.0f;
    assert_int_equal(fmsa_forward(ctx, &desc, &tq, &tk, &tv, &to, NULL, NULL, 0, NULL),
                     FMSA_SUCCESS);
    fmsa_context_destroy(ctx);
    for (int d = 0; d < DD; ++d) {
        double mean = 0.0;
        for (int j = 0; j < S; ++j) mean += from_bf16(v[j * DD + d]);
        mean /= S;
        for (int i = 0; i < S; ++i) { /* bf16 storage: 2^-8 relative, and a little sum error */
            const double got = from_bf16(o[i * DD + d]);
            assert_true(fabs(got - mean) <= 0x1p-8 * fabs(mean) + 1e-5);
        }
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(window_left_int64_max),
        cmocka_unit_test(window_right_int64_max),
        cmocka_unit_test(lse_overlapping_itself),
        cmocka_unit_test(lse_interleaved_accepted),
        cmocka_unit_test(huge_stride_of_extent_one),
        cmocka_unit_test(zero_scale_bf16),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
