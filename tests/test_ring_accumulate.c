/*
 * The ring's elementwise op and device copy (common/accumulate.h) on the
 * backend --backend names: copy, fp32 add, scaled add (one fma) and fill over strided 4-d views in
 * every pair of float dtypes, against the same arithmetic done here on dense
 * host arrays.  Every element outside the destination view (gaps between its
 * strided rows, guards) must come back unchanged, every element inside it
 * bit-equal to the host's result: fp32 addition and round-to-nearest-even
 * conversions have one correct answer.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/accumulate.h"
#include "common/fmsa_half.h"
#include "tests/support/fmsa_test_options.h"

static fmsa_test_options g_opt;
static fmsa_context *g_ctx;

enum { A = 2, B = 3, C = 4, E = 5, N = A * B * C * E, PAD = 3, GUARD = 64 };

/* A strided view: dims (A, B, C, E) laid out as [C][A][B][E + PAD] (dims
 * permuted, rows padded), element offset GUARD. */
static void view_strides(int64_t st[4]) {
    st[3] = 1;
    st[1] = E + PAD;
    st[0] = (int64_t)B * (E + PAD);
    st[2] = (int64_t)A * B * (E + PAD);
}

static size_t view_span(void) { return (size_t)C * A * B * (E + PAD) + 2 * GUARD; }

static int64_t at(const int64_t st[4], int a, int b, int c, int e) {
    return GUARD + a * st[0] + b * st[1] + c * st[2] + e * st[3];
}

static unsigned g_seed = 12345u;
static float draw(void) {
    g_seed = g_seed * 1664525u + 1013904223u;
    return (float)((g_seed >> 8) & 0xffff) / 8192.0f - 4.0f;
}

/* One case: dst (dtype dd) op= src (dtype sd), on the device and on the host. */
static void one(fmsa_acc_mode mode, fmsa_dtype dd, fmsa_dtype sd, float fill) {
    const size_t span = view_span(), ed = fmsa_dtype_size(dd), esz = fmsa_dtype_size(sd);
    unsigned char *hd = malloc(span * ed), *hs = malloc(span * esz), *back = malloc(span * ed);
    void *dd_dev = NULL, *ds_dev = NULL;
    int64_t st[4];
    fmsa_tensor td, ts;
    const int64_t shape[4] = {A, B, C, E};
    assert_non_null(hd);
    assert_non_null(hs);
    assert_non_null(back);
    view_strides(st);
    for (size_t i = 0; i < span; ++i) fmsa_store_f32(hd, dd, (int64_t)i, draw());
    for (size_t i = 0; i < span; ++i) fmsa_store_f32(hs, sd, (int64_t)i, draw());
    assert_int_equal(fmsa_malloc(g_ctx, span * ed, &dd_dev), FMSA_SUCCESS);
    assert_int_equal(fmsa_malloc(g_ctx, span * esz, &ds_dev), FMSA_SUCCESS);
    assert_int_equal(fmsa_copy_to_device(g_ctx, dd_dev, 0, hd, span * ed), FMSA_SUCCESS);
    assert_int_equal(fmsa_copy_to_device(g_ctx, ds_dev, 0, hs, span * esz), FMSA_SUCCESS);
    td = fmsa_tensor_contiguous(dd_dev, dd, 4, shape);
    ts = fmsa_tensor_contiguous(ds_dev, sd, 4, shape); /* the source dense, the destination not */
    memcpy(td.strides, st, sizeof st);
    td.byte_offset = (int64_t)(GUARD * ed);
    ts.byte_offset = (int64_t)(GUARD * esz);
    assert_int_equal(fmsa_accumulate(g_ctx, mode, &td, mode == FMSA_ACC_FILL ? NULL : &ts, fill,
                                     NULL),
                     FMSA_SUCCESS);
    assert_int_equal(fmsa_synchronize(g_ctx, NULL), FMSA_SUCCESS);
    assert_int_equal(fmsa_copy_to_host(g_ctx, back, dd_dev, 0, span * ed), FMSA_SUCCESS);
    /* the host's answer, in place in hd */
    for (int a = 0; a < A; ++a)
        for (int b = 0; b < B; ++b)
            for (int c = 0; c < C; ++c)
                for (int e = 0; e < E; ++e) {
                    const int64_t i = at(st, a, b, c, e);
                    const int64_t si = GUARD + ((a * B + b) * C + c) * E + e;
                    float x = mode == FMSA_ACC_FILL ? fill : fmsa_load_f32(hs, sd, si);
                    if (mode == FMSA_ACC_COPY && dd == sd) {
                        memcpy(hd + i * (int64_t)ed, hs + si * (int64_t)esz, ed);
                        continue;
                    }
                    if (mode == FMSA_ACC_ADD) x += fmsa_load_f32(hd, dd, i);
                    if (mode == FMSA_ACC_ADD_SCALED) x = fmaf(x, fill, fmsa_load_f32(hd, dd, i));
                    fmsa_store_f32(hd, dd, i, x);
                }
    if (memcmp(hd, back, span * ed) != 0) {
        for (size_t i = 0; i < span; ++i)
            if (memcmp(hd + i * ed, back + i * ed, ed)) {
                print_message("mode %d dst %d src %d: element %zu: %g, want %g\n", (int)mode,
                              (int)dd, (int)sd, i, (double)fmsa_load_f32(back, dd, (int64_t)i),
                              (double)fmsa_load_f32(hd, dd, (int64_t)i));
                break;
            }
        fail();
    }
    fmsa_free(g_ctx, dd_dev);
    fmsa_free(g_ctx, ds_dev);
    free(hd);
    free(hs);
    free(back);
}

static void modes(void **state) {
    static const fmsa_dtype dts[] = {FMSA_DTYPE_F32, FMSA_DTYPE_F16, FMSA_DTYPE_BF16};
    (void)state;
    for (int i = 0; i < 3; ++i) {
        for (int j = 0; j < 3; ++j) {
            one(FMSA_ACC_COPY, dts[i], dts[j], 0.0f);
            one(FMSA_ACC_ADD, dts[i], dts[j], 0.0f);
            one(FMSA_ACC_ADD_SCALED, dts[i], dts[j], -3.0f);
            one(FMSA_ACC_ADD_SCALED, dts[i], dts[j], 0.3f);
        }
        one(FMSA_ACC_FILL, dts[i], dts[i], 0.0f);
        one(FMSA_ACC_FILL, dts[i], dts[i], -INFINITY);
    }
}

/* The ring's lse shift (dist/ring.c): an fp32 [2, 3, 5] lse view += x times
 * a [2, 3] slope each, read through a view that repeats it over the last dim
 * (stride 0), and a [3] one repeated over the first two. */
static void scaled_broadcast(void **state) {
    float h[2 * 3 * 5], sl[6], back[2 * 3 * 5];
    void *dl = NULL, *ds = NULL;
    const int64_t sh[3] = {2, 3, 5};
    fmsa_tensor tl, ts;
    (void)state;
    for (int i = 0; i < 30; ++i) h[i] = draw();
    for (int i = 0; i < 6; ++i) sl[i] = draw();
    assert_int_equal(fmsa_malloc(g_ctx, sizeof h, &dl), FMSA_SUCCESS);
    assert_int_equal(fmsa_malloc(g_ctx, sizeof sl, &ds), FMSA_SUCCESS);
    assert_int_equal(fmsa_copy_to_device(g_ctx, ds, 0, sl, sizeof sl), FMSA_SUCCESS);
    tl = fmsa_tensor_contiguous(dl, FMSA_DTYPE_F32, 3, sh);
    ts = fmsa_tensor_contiguous(ds, FMSA_DTYPE_F32, 3, sh);
    for (int v = 0; v < 2; ++v) {
        assert_int_equal(fmsa_copy_to_device(g_ctx, dl, 0, h, sizeof h), FMSA_SUCCESS);
        ts.strides[0] = v ? 0 : 3; /* [B, Hq] slopes, or [Hq] repeated over B */
        ts.strides[1] = 1;
        ts.strides[2] = 0;
        assert_int_equal(fmsa_accumulate(g_ctx, FMSA_ACC_ADD_SCALED, &tl, &ts, -2.0f, NULL),
                         FMSA_SUCCESS);
        assert_int_equal(fmsa_synchronize(g_ctx, NULL), FMSA_SUCCESS);
        assert_int_equal(fmsa_copy_to_host(g_ctx, back, dl, 0, sizeof back), FMSA_SUCCESS);
        for (int b = 0; b < 2; ++b)
            for (int k = 0; k < 3; ++k)
                for (int i = 0; i < 5; ++i) {
                    const int n = (b * 3 + k) * 5 + i;
                    assert_true(back[n] == fmaf(sl[v ? k : b * 3 + k], -2.0f, h[n]));
                }
    }
    fmsa_free(g_ctx, dl);
    fmsa_free(g_ctx, ds);
}

/* What the op refuses: shapes that differ, a non-float dtype. */
static void refusals(void **state) {
    float x[8];
    const int64_t s4[1] = {4}, s8[1] = {8};
    fmsa_tensor a = fmsa_tensor_contiguous(x, FMSA_DTYPE_F32, 1, s4);
    fmsa_tensor b = fmsa_tensor_contiguous(x, FMSA_DTYPE_F32, 1, s8);
    (void)state;
    assert_int_equal(fmsa_accumulate(g_ctx, FMSA_ACC_ADD, &a, &b, 0.0f, NULL),
                     FMSA_ERR_INVALID_ARGUMENT);
    b = a;
    b.dtype = FMSA_DTYPE_I32;
    assert_int_equal(fmsa_accumulate(g_ctx, FMSA_ACC_COPY, &a, &b, 0.0f, NULL),
                     FMSA_ERR_INVALID_ARGUMENT);
}

/* Bytes between two places of one allocation and into another. */
static void copy_device(void **state) {
    enum { BYTES = 1000 };
    unsigned char h[2 * BYTES], back[2 * BYTES];
    void *src = NULL, *dst = NULL;
    fmsa_status st;
    (void)state;
    for (int i = 0; i < 2 * BYTES; ++i) h[i] = (unsigned char)(i * 7 + 3);
    assert_int_equal(fmsa_malloc(g_ctx, 2 * BYTES, &src), FMSA_SUCCESS);
    assert_int_equal(fmsa_malloc(g_ctx, 2 * BYTES, &dst), FMSA_SUCCESS);
    assert_int_equal(fmsa_copy_to_device(g_ctx, src, 0, h, 2 * BYTES), FMSA_SUCCESS);
    assert_int_equal(fmsa_copy_to_device(g_ctx, dst, 0, h + BYTES, BYTES), FMSA_SUCCESS);
    assert_int_equal(fmsa_copy_to_device(g_ctx, dst, BYTES, h, BYTES), FMSA_SUCCESS);
    st = fmsa_copy_device(g_ctx, dst, 17, src, 301, 555, NULL);
    if (st == FMSA_ERR_NOT_SUPPORTED) { /* OpenCL: the ring refuses it before ever copying */
        fmsa_free(g_ctx, src);
        fmsa_free(g_ctx, dst);
        skip();
    }
    assert_int_equal(st, FMSA_SUCCESS);
    assert_int_equal(fmsa_synchronize(g_ctx, NULL), FMSA_SUCCESS);
    assert_int_equal(fmsa_copy_to_host(g_ctx, back, dst, 0, 2 * BYTES), FMSA_SUCCESS);
    assert_memory_equal(back, h + BYTES, 17);
    assert_memory_equal(back + 17, h + 301, 555);
    assert_memory_equal(back + 17 + 555, h + BYTES + 17 + 555, BYTES - 17 - 555);
    assert_memory_equal(back + BYTES, h, BYTES);
    fmsa_free(g_ctx, src);
    fmsa_free(g_ctx, dst);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(modes),
        cmocka_unit_test(scaled_broadcast),
        cmocka_unit_test(refusals),
        cmocka_unit_test(copy_device),
    };
    fmsa_status st;
    int rc;
    if (fmsa_test_options_parse(argc, argv, &g_opt) != 0) return 2;
    st = fmsa_test_context_create(&g_opt, &g_ctx);
    if (st == FMSA_ERR_BACKEND_UNAVAILABLE && g_opt.backend != FMSA_BACKEND_CPU)
        return FMSA_TEST_EXIT_SKIP;
    if (st != FMSA_SUCCESS) return 1;
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    fmsa_context_destroy(g_ctx);
    return rc;
}
