/*
 * Malformed calls: each one must return its documented status, leave a
 * message naming the field, and leave every output buffer bit-identical.
 *
 * One valid problem (B 2, Sq 16, Sk 24, Hq 4, Hkv 2, D 16, fp32; bf16 on CUDA,
 * chosen when its backward took no fp32, kept as the 16-bit control) is built;
 * each case copies it, breaks one thing, calls the API and compares every
 * buffer (inputs and outputs) with a snapshot taken before the call.  A
 * control case checks that the unbroken call succeeds and does write, so the
 * "nothing written" checks are not vacuous.
 *
 * Backend-neutral: every buffer, metadata included, is device memory made
 * with fmsa_malloc and read back with fmsa_copy_to_host, so the same suite
 * runs with --backend cpu|opencl|... (FLASHMSA_TEST_BACKEND).
 *
 * Memory (issue 18): outputs overlapping inputs, each other, the workspace or
 * themselves, misaligned pointers, views past their OpenCL buffer are refused;
 * inputs sharing memory, broadcast inputs, interleaved outputs of one packed
 * buffer and empty tensors without data are accepted (and compared with the
 * ordinary call's results).  An arena buffer (ARENA) holds the packed views.
 */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "flashmsa/flashmsa.h"
#include "support/fmsa_test_options.h"

enum { B = 2, SQ = 16, SK = 24, HQ = 4, HKV = 2, D = 16 };
/* The workspace and the arena hold the CUDA backward's dQ accumulator too. */
enum { NBUF = 10, NMETA = 6, WS_BYTES = 1 << 22, ARENA = 9, ARENA_BYTES = 1 << 23 };
enum { META_CU_Q, META_CU_K, META_TABLE, META_SLOPES, META_MASK, META_WS };

/* The arguments of one call, as the user would hold them. */
typedef struct call {
    fmsa_context *ctx;
    fmsa_attention_desc desc;
    fmsa_tensor q, k, v, o, lse, dout, dq, dk, dv;
    void *ws;
    size_t ws_bytes;
} call;

typedef struct fixture {
    fmsa_context *ctx;
    void *buf[NBUF];        /* device: q k v o lse dout dq dk dv, the arena */
    size_t bytes[NBUF];
    unsigned char *snap[NBUF], *now[NBUF];
    void *meta[NMETA];      /* device copies of the host metadata below, and the workspace */
    /* host metadata; cases edit these, expect_rejected uploads them */
    int32_t cu_q[B + 1], cu_k[B + 1], table[B * 2];
    float slopes[HQ];
    unsigned char mask[B * HQ * SQ * ((SK + 7) / 8)];
} fixture;

static fixture F;
static fmsa_test_options opts;
/* The control's dtype: one the backend runs (bf16 on CUDA, chosen when its backward
 * had no fp32 kernels), so the control call can succeed and the "nothing written"
 * checks mean something. */
static fmsa_dtype DT = FMSA_DTYPE_F32;
/* A 16-bit dtype other than DT, for the mismatch cases. */
#define DT_OTHER (DT == FMSA_DTYPE_BF16 ? FMSA_DTYPE_F16 : FMSA_DTYPE_BF16)

static void *const meta_host[NMETA] = {F.cu_q, F.cu_k, F.table, F.slopes, F.mask, NULL};
static const size_t meta_bytes[NMETA] = {sizeof F.cu_q, sizeof F.cu_k, sizeof F.table,
                                         sizeof F.slopes, sizeof F.mask, WS_BYTES};

static void upload_meta(void) {
    for (int i = 0; i < NMETA; ++i)
        if (meta_host[i])
            assert_int_equal(fmsa_copy_to_device(F.ctx, F.meta[i], 0, meta_host[i], meta_bytes[i]),
                             FMSA_SUCCESS);
}

static float frand(unsigned *s) {
    *s = *s * 1664525u + 1013904223u;
    return (float)((*s >> 8) & 0xffff) / 65536.0f - 0.5f;
}

static int setup(void **state) {
    int64_t qs[4] = {B, SQ, HQ, D}, ks[4] = {B, SK, HKV, D}, ls[3] = {B, HQ, SQ};
    size_t qn = (size_t)B * SQ * HQ * D, kn = (size_t)B * SK * HKV * D, ln = (size_t)B * HQ * SQ;
    size_t n[NBUF] = {qn, kn, kn, qn, ln, qn, qn, kn, kn, ARENA_BYTES / sizeof(float)};
    unsigned seed = 7;
    (void)qs;
    (void)ks;
    (void)ls;
    assert_int_equal(fmsa_test_context_create(&opts, &F.ctx), FMSA_SUCCESS);
    for (int i = 0; i < NBUF; ++i) {
        F.bytes[i] = n[i] * sizeof(float);
        F.snap[i] = malloc(F.bytes[i]);
        F.now[i] = malloc(F.bytes[i]);
        assert_non_null(F.snap[i]);
        assert_non_null(F.now[i]);
        for (size_t j = 0; j < n[i]; ++j) ((float *)F.snap[i])[j] = frand(&seed);
        if (DT == FMSA_DTYPE_BF16 && i != 4) /* every 16-bit slot a valid bf16 (lse stays fp32) */
            for (size_t j = 0; j < 2 * n[i]; ++j) {
                const float x = frand(&seed);
                uint32_t u;
                memcpy(&u, &x, sizeof u);
                ((uint16_t *)F.snap[i])[j] = (uint16_t)(u >> 16);
            }
        assert_int_equal(fmsa_malloc(F.ctx, F.bytes[i], &F.buf[i]), FMSA_SUCCESS);
        assert_int_equal(fmsa_copy_to_device(F.ctx, F.buf[i], 0, F.snap[i], F.bytes[i]),
                         FMSA_SUCCESS);
    }
    for (int i = 0; i < NMETA; ++i)
        assert_int_equal(fmsa_malloc(F.ctx, meta_bytes[i], &F.meta[i]), FMSA_SUCCESS);
    *state = &F;
    return 0;
}

static int teardown(void **state) {
    (void)state;
    for (int i = 0; i < NBUF; ++i) {
        fmsa_free(F.ctx, F.buf[i]);
        free(F.snap[i]);
        free(F.now[i]);
    }
    for (int i = 0; i < NMETA; ++i) fmsa_free(F.ctx, F.meta[i]);
    fmsa_context_destroy(F.ctx);
    return 0;
}

/* A valid call on the fixture's buffers. */
static call valid_call(void) {
    call c;
    int64_t qs[4] = {B, SQ, HQ, D}, ks[4] = {B, SK, HKV, D}, ls[3] = {B, HQ, SQ};
    memset(&c, 0, sizeof c);
    c.ctx = F.ctx;
    c.desc = fmsa_attention_desc_init(D);
    c.q = fmsa_tensor_contiguous(F.buf[0], DT, 4, qs);
    c.k = fmsa_tensor_contiguous(F.buf[1], DT, 4, ks);
    c.v = fmsa_tensor_contiguous(F.buf[2], DT, 4, ks);
    c.o = fmsa_tensor_contiguous(F.buf[3], DT, 4, qs);
    c.lse = fmsa_tensor_contiguous(F.buf[4], FMSA_DTYPE_F32, 3, ls);
    c.dout = fmsa_tensor_contiguous(F.buf[5], DT, 4, qs);
    c.dq = fmsa_tensor_contiguous(F.buf[6], DT, 4, qs);
    c.dk = fmsa_tensor_contiguous(F.buf[7], DT, 4, ks);
    c.dv = fmsa_tensor_contiguous(F.buf[8], DT, 4, ks);
    c.ws = F.meta[META_WS];
    c.ws_bytes = WS_BYTES;
    return c;
}

/* Turns c into a valid varlen call: sequences of 10 and 6 queries, 24 and 0 keys
 * packed as q [1, 16, ...], k [1, 24, ...]. */
static void make_varlen(call *c) {
    F.cu_q[0] = 0, F.cu_q[1] = 10, F.cu_q[2] = SQ;
    F.cu_k[0] = 0, F.cu_k[1] = SK, F.cu_k[2] = SK;
    int64_t n = B + 1, qs[4] = {1, SQ, HQ, D}, ks[4] = {1, SK, HKV, D}, ls[3] = {1, HQ, SQ};
    c->desc.cu_seqlens_q = fmsa_tensor_contiguous(F.meta[META_CU_Q], FMSA_DTYPE_I32, 1, &n);
    c->desc.cu_seqlens_k = fmsa_tensor_contiguous(F.meta[META_CU_K], FMSA_DTYPE_I32, 1, &n);
    c->q.shape[0] = c->o.shape[0] = c->dout.shape[0] = c->dq.shape[0] = 1;
    c->k.shape[0] = c->v.shape[0] = c->dk.shape[0] = c->dv.shape[0] = 1;
    c->q = fmsa_tensor_contiguous(c->q.data, DT, 4, qs);
    c->o = fmsa_tensor_contiguous(c->o.data, DT, 4, qs);
    c->k = fmsa_tensor_contiguous(c->k.data, DT, 4, ks);
    c->v = fmsa_tensor_contiguous(c->v.data, DT, 4, ks);
    c->lse = fmsa_tensor_contiguous(c->lse.data, FMSA_DTYPE_F32, 3, ls);
}

/* Turns c into a valid paged forward: k/v pools of 4 pages x 12 rows, two pages
 * per sequence (the pool reuses the k/v buffers: 4*12 = 2*24 rows). */
static void make_paged(call *c) {
    int64_t ks[4] = {4, 12, HKV, D}, ts[2] = {B, 2};
    F.table[0] = 3, F.table[1] = 0, F.table[2] = 1, F.table[3] = 2;
    c->k = fmsa_tensor_contiguous(c->k.data, DT, 4, ks);
    c->v = fmsa_tensor_contiguous(c->v.data, DT, 4, ks);
    c->desc.block_table = fmsa_tensor_contiguous(F.meta[META_TABLE], FMSA_DTYPE_I32, 2, ts);
    c->desc.page_size = 12;
}

/* Uploads the (possibly edited) metadata, then records every tensor. */
static void snapshot(void) {
    upload_meta();
    for (int i = 0; i < NBUF; ++i)
        assert_int_equal(fmsa_copy_to_host(F.ctx, F.snap[i], F.buf[i], 0, F.bytes[i]),
                         FMSA_SUCCESS);
}

static int unchanged(void) {
    int same = 1;
    assert_int_equal(fmsa_synchronize(F.ctx, NULL), FMSA_SUCCESS);
    for (int i = 0; i < NBUF; ++i) {
        assert_int_equal(fmsa_copy_to_host(F.ctx, F.now[i], F.buf[i], 0, F.bytes[i]),
                         FMSA_SUCCESS);
        if (memcmp(F.snap[i], F.now[i], F.bytes[i])) same = 0;
    }
    return same;
}

typedef enum which { FWD, BWD, WS } which;

static fmsa_status run_call(which w, call *c, int null_q, int null_desc) {
    const fmsa_tensor *q = null_q ? NULL : &c->q;
    const fmsa_attention_desc *d = null_desc ? NULL : &c->desc;
    size_t bytes = 0;
    switch (w) {
    case FWD:
        return fmsa_forward(c->ctx, d, q, &c->k, &c->v, &c->o, &c->lse, c->ws, c->ws_bytes, NULL);
    case BWD: {
        fmsa_backward_tensors bt = {0};
        if (q) bt.q = *q;
        bt.k = c->k;
        bt.v = c->v;
        bt.o = c->o;
        bt.dout = c->dout;
        bt.lse = c->lse;
        bt.dq = c->dq;
        bt.dk = c->dk;
        bt.dv = c->dv;
        return fmsa_backward(c->ctx, d, null_q ? NULL : &bt, c->ws, c->ws_bytes, NULL);
    }
    case WS: return fmsa_workspace_size(c->ctx, FMSA_PASS_BACKWARD, d, q, &c->k, &c->v, &bytes);
    }
    return FMSA_ERR_INTERNAL;
}

/* Runs one broken call and checks status, message and untouched buffers. */
static void expect_rejected(which w, call c, int null_q, int null_desc, fmsa_status want,
                            const char *field) {
    fmsa_status st;
    snapshot();
    st = run_call(w, &c, null_q, null_desc);
    if (st != want || !strstr(fmsa_last_error(), field))
        print_error("status %d (want %d), message \"%s\" (want it to name \"%s\")\n", (int)st,
                    (int)want, fmsa_last_error(), field);
    assert_int_equal(st, want);
    assert_non_null(strstr(fmsa_last_error(), field));
    assert_true(unchanged());
}

#define CASE(name, ...)                                                         \
    static void name(void **state) {                                            \
        call c = valid_call();                                                  \
        (void)state;                                                            \
        __VA_ARGS__;                                                            \
    }

/* The control: the same calls unbroken succeed and write their outputs. */
static void valid_calls_write(void **state) {
    call c = valid_call();
    (void)state;
    snapshot();
    assert_int_equal(run_call(FWD, &c, 0, 0), FMSA_SUCCESS);
    assert_false(unchanged());
    snapshot();
    assert_int_equal(run_call(BWD, &c, 0, 0), FMSA_SUCCESS);
    assert_false(unchanged());
    make_varlen(&c);
    upload_meta();
    assert_int_equal(run_call(FWD, &c, 0, 0), FMSA_SUCCESS);
    /* max_seqlen is only a bound: a generous one must not size the work */
    c.desc.max_seqlen_q = c.desc.max_seqlen_k = (int64_t)1 << 40;
    assert_int_equal(run_call(FWD, &c, 0, 0), FMSA_SUCCESS);
    assert_int_equal(run_call(BWD, &c, 0, 0), FMSA_SUCCESS);
    c = valid_call();
    make_paged(&c);
    upload_meta();
    assert_int_equal(run_call(FWD, &c, 0, 0), FMSA_SUCCESS);
}

CASE(null_q_tensor, expect_rejected(FWD, c, 1, 0, FMSA_ERR_INVALID_ARGUMENT, "q: tensor pointer"))
CASE(null_desc, expect_rejected(BWD, c, 0, 1, FMSA_ERR_INVALID_ARGUMENT, "desc"))
CASE(null_ctx, c.ctx = NULL; expect_rejected(FWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "ctx"))
CASE(null_k_data, c.k.data = NULL; expect_rejected(FWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "k.data"))
CASE(null_o_data, c.o.data = NULL; expect_rejected(FWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "o.data"))
CASE(null_dq_data, c.dq.data = NULL; expect_rejected(BWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "dq.data"))
CASE(k_dtype_mismatch, c.k.dtype = DT_OTHER;
     expect_rejected(FWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "k.dtype"))
CASE(q_dtype_int, c.q.dtype = FMSA_DTYPE_I32; c.k.dtype = c.v.dtype = FMSA_DTYPE_I32;
     expect_rejected(FWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "q.dtype"))
CASE(o_dtype_mismatch, c.o.dtype = DT_OTHER;
     expect_rejected(FWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "o.dtype"))
CASE(dtype_garbage, c.v.dtype = (fmsa_dtype)77;
     expect_rejected(FWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "v.dtype"))
CASE(q_ndim_3, c.q.ndim = 3; expect_rejected(FWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "q.ndim"))
CASE(q_last_stride, c.q.strides[3] = 2;
     expect_rejected(FWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "q.strides[3]"))
CASE(k_negative_stride, c.k.strides[1] = -1;
     expect_rejected(FWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "k.strides[1]"))
CASE(v_misaligned_offset, c.v.byte_offset = DT == FMSA_DTYPE_F32 ? 2 : 1;
     expect_rejected(FWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "v.byte_offset"))
CASE(negative_shape, c.q.shape[1] = -4;
     expect_rejected(FWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "q.shape[1]"))
CASE(head_dim_0, c.q.shape[3] = c.k.shape[3] = c.v.shape[3] = c.o.shape[3] = 0;
     expect_rejected(FWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "head_dim"))
CASE(head_dim_300, c.q.shape[3] = c.k.shape[3] = c.v.shape[3] = c.o.shape[3] = 300;
     expect_rejected(FWD, c, 0, 0, FMSA_ERR_NOT_SUPPORTED, "head_dim"))
CASE(head_dim_12, c.q.shape[3] = c.k.shape[3] = c.v.shape[3] = c.o.shape[3] = 12;
     expect_rejected(FWD, c, 0, 0, FMSA_ERR_NOT_SUPPORTED, "head_dim"))
CASE(k_head_dim_mismatch, c.k.shape[3] = 8;
     expect_rejected(FWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "k.shape[3]"))
CASE(heads_not_multiple, c.k.shape[2] = c.v.shape[2] = 3;
     expect_rejected(FWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "not a multiple"))
CASE(o_shape_mismatch, c.o.shape[1] = SQ - 1;
     expect_rejected(FWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "o.shape[1]"))
CASE(k_batch_mismatch, c.k.shape[0] = c.v.shape[0] = 1;
     expect_rejected(FWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "k.shape[0]"))
CASE(v_seqlen_mismatch, c.v.shape[1] = SK - 1;
     expect_rejected(FWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "v.shape"))
CASE(dk_shape_mismatch, c.dk.shape[2] = HQ;
     expect_rejected(BWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "dk.shape[2]"))
CASE(scale_nan, c.desc.softmax_scale = NAN;
     expect_rejected(FWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "softmax_scale"))
CASE(scale_inf, c.desc.softmax_scale = INFINITY;
     expect_rejected(BWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "softmax_scale"))
CASE(softcap_negative, c.desc.softcap = -1.0f;
     expect_rejected(FWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "softcap"))
CASE(window_left_below, c.desc.window_left = -2;
     expect_rejected(FWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "window_left"))
CASE(window_right_below, c.desc.window_right = -5;
     expect_rejected(BWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "window_right"))
CASE(causal_with_right_window, c.desc.causal = 1; c.desc.window_right = 5;
     expect_rejected(FWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "causal"))
CASE(lse_wrong_dtype, c.lse.dtype = FMSA_DTYPE_F16;
     expect_rejected(FWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "lse.dtype"))
CASE(lse_wrong_shape, c.lse.shape[2] = SQ + 1;
     expect_rejected(FWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "lse.shape[2]"))
CASE(backward_without_lse, c.lse.data = NULL;
     expect_rejected(BWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "lse"))
CASE(shape_overflow, c.k.shape[1] = c.v.shape[1] = (int64_t)1 << 62;
     expect_rejected(FWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "overflow"))
/* Broadcast (stride 0) dimensions keep the extent small, not the element count. */
CASE(shape_product_overflow, c.q.shape[1] = c.o.shape[1] = (int64_t)1 << 62;
     c.q.strides[0] = c.q.strides[1] = 0;
     expect_rejected(FWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "q: shape product"))
/* fmsa_tensor_contiguous itself must not overflow (UBSan build) on such shapes. */
/* An empty view (no keys) still has its other offsets formed by the kernels. */
CASE(empty_view_stride_overflow, c.k.shape[1] = c.v.shape[1] = 0; c.k.strides[0] = INT64_MAX;
     expect_rejected(FWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "k: shape x strides"))
CASE(contiguous_overflow, int64_t qs[4] = {B, (int64_t)1 << 40, (int64_t)1 << 20, D};
     c.q = fmsa_tensor_contiguous(c.q.data, DT, 4, qs);
     expect_rejected(FWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "overflows int64"))
CASE(output_broadcast_stride, c.o.strides[1] = 0;
     expect_rejected(FWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "o.strides[1]"))
CASE(dk_broadcast_stride, c.dk.strides[2] = 0;
     expect_rejected(BWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "dk.strides[2]"))
CASE(paged_capacity_overflow, make_paged(&c);
     c.k.shape[1] = c.v.shape[1] = (int64_t)1 << 40; c.k.strides[1] = c.v.strides[1] = 0;
     c.desc.page_size = (int64_t)1 << 40; c.desc.block_table.shape[1] = (int64_t)1 << 30;
     c.desc.block_table.strides[1] = 0;
     expect_rejected(FWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "page_size"))
CASE(cu_seqlens_only_q, make_varlen(&c); c.desc.cu_seqlens_k.data = NULL;
     expect_rejected(FWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "cu_seqlens"))
CASE(cu_seqlens_not_zero_based, make_varlen(&c); F.cu_q[0] = 1;
     expect_rejected(FWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "cu_seqlens_q[0]"))
CASE(cu_seqlens_decreasing, make_varlen(&c); F.cu_k[1] = 30; F.cu_k[2] = SK;
     expect_rejected(FWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "non-decreasing"))
CASE(cu_seqlens_wrong_total, make_varlen(&c); F.cu_q[2] = SQ - 2;
     expect_rejected(BWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "packed length"))
CASE(cu_seqlens_broadcast, make_varlen(&c); c.desc.cu_seqlens_k.strides[0] = 0;
     expect_rejected(FWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "cu_seqlens_k.strides[0]"))
CASE(cu_seqlens_wrong_dtype, make_varlen(&c); c.desc.cu_seqlens_q.dtype = FMSA_DTYPE_F32;
     expect_rejected(FWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "cu_seqlens_q.dtype"))
CASE(max_seqlen_too_small, make_varlen(&c); c.desc.max_seqlen_q = 3;
     expect_rejected(FWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "max_seqlen_q"))
CASE(paged_backward, make_paged(&c);
     expect_rejected(BWD, c, 0, 0, FMSA_ERR_NOT_SUPPORTED, "forward-only"))
/* A backend that checks block tables on the device (FMSA_META_DEFERRED: CUDA,
 * backends/cuda/README.md) accepts the call and reports at fmsa_synchronize. */
CASE(paged_page_out_of_range, make_paged(&c); F.table[1] = 4;
     if (opts.backend == FMSA_BACKEND_CUDA) {
         upload_meta();
         assert_int_equal(run_call(FWD, &c, 0, 0), FMSA_SUCCESS);
         assert_int_equal(fmsa_synchronize(F.ctx, NULL), FMSA_ERR_INVALID_ARGUMENT);
         assert_non_null(strstr(fmsa_last_error(), "block_table"));
     } else {
         expect_rejected(FWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "block_table[0][1]");
     })
CASE(paged_page_size_mismatch, make_paged(&c); c.desc.page_size = 8;
     expect_rejected(FWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "page_size"))
CASE(alibi_wrong_shape, int64_t n = HQ - 1;
     c.desc.alibi_slopes = fmsa_tensor_contiguous(F.meta[META_SLOPES], FMSA_DTYPE_F32, 1, &n);
     expect_rejected(FWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "alibi_slopes"))
CASE(mask_too_small, int64_t ms[4] = {B, HQ, SQ, 1};
     c.desc.mask = fmsa_tensor_contiguous(F.meta[META_MASK], FMSA_DTYPE_U8, 4, ms);
     expect_rejected(FWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "desc.mask.shape"))
CASE(mask_wrong_batch, int64_t ms[4] = {3, HQ, SQ, (SK + 7) / 8};
     c.desc.mask = fmsa_tensor_contiguous(F.meta[META_MASK], FMSA_DTYPE_U8, 4, ms);
     expect_rejected(BWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "desc.mask.shape[0]"))
CASE(workspace_query_bad_heads, c.k.shape[2] = c.v.shape[2] = 3;
     expect_rejected(WS, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "heads"))

/* ---- memory: overlaps, alignment, buffer sizes, empty tensors ---- */

enum { QROW = HQ * D * (int)sizeof(float) }; /* bytes of one q row */

CASE(o_aliases_q, c.o.data = c.q.data;
     expect_rejected(FWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "o and q overlap"))
/* q at the arena's start, o one row further: they share all rows but one */
CASE(o_overlaps_q_by_a_row, c.q.data = c.o.data = F.buf[ARENA]; c.o.byte_offset = QROW;
     expect_rejected(FWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "o and q overlap"))
CASE(lse_inside_o, c.lse.data = c.o.data; c.lse.byte_offset = 64;
     expect_rejected(FWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "o and lse overlap"))
CASE(dq_aliases_dout, c.dq.data = c.dout.data;
     expect_rejected(BWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "dq and dout overlap"))
CASE(dk_aliases_k, c.dk.data = c.k.data;
     expect_rejected(BWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "dk and k overlap"))
CASE(dv_aliases_dk, c.dv.data = c.dk.data;
     expect_rejected(BWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "dk and dv overlap"))
CASE(dq_aliases_o, c.dq.data = c.o.data;
     expect_rejected(BWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "dq and o overlap"))
/* an input of the backward may not be written either: lse under dv */
CASE(dv_over_lse, c.lse.data = c.dv.data;
     expect_rejected(BWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "dv and lse overlap"))
/* the mask is an input too */
CASE(o_over_mask, int64_t ms[4] = {1, 1, SQ, (SK + 7) / 8};
     c.desc.mask = fmsa_tensor_contiguous(c.o.data, FMSA_DTYPE_U8, 4, ms);
     c.desc.mask.byte_offset = 8;
     expect_rejected(FWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "o and desc.mask overlap"))
/* rows SQ - 1 apart: the last entry of each (batch, head) row is the next
 * row's first */
CASE(lse_overlaps_itself, c.lse.strides[1] = SQ - 1;
     expect_rejected(FWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "lse: its strides"))
CASE(dq_overlaps_itself, c.dq.strides[1] = D; /* heads HQ*D apart, rows D apart */
     expect_rejected(BWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "dq: its strides"))

/* The workspace is written: it may not hold an output (or an input). */
static void workspace_overlaps_dq(void **state) {
    call c = valid_call();
    size_t need = 0;
    (void)state;
    assert_int_equal(fmsa_workspace_size(c.ctx, FMSA_PASS_BACKWARD, &c.desc, &c.q, &c.k, &c.v,
                                         &need),
                     FMSA_SUCCESS);
    assert_true(need > 0 && need + F.bytes[6] <= ARENA_BYTES);
    c.ws = F.buf[ARENA];
    c.ws_bytes = ARENA_BYTES;
    c.dq.data = F.buf[ARENA];
    c.dq.byte_offset = (int64_t)(need / 64 * 64); /* dq starts in the workspace's last bytes */
    if (c.dq.byte_offset == (int64_t)need) c.dq.byte_offset -= 64;
    expect_rejected(BWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "dq and workspace overlap");
    c = valid_call();
    c.ws = F.buf[ARENA];
    c.ws_bytes = ARENA_BYTES;
    c.k.data = F.buf[ARENA]; /* an input in the workspace: the pass would overwrite it */
    expect_rejected(BWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "workspace and k overlap");
}

static int handle_backend(void) { return opts.backend == FMSA_BACKEND_OPENCL; }

/* Address backends: data + byte_offset must be aligned to the element size
 * (a cl_mem cannot be offset like a pointer, so there byte_offset is all
 * that can be misaligned: v_misaligned_offset). */
static void misaligned_pointers(void **state) {
    call c = valid_call();
    (void)state;
    if (handle_backend()) skip();
    /* half an element off: 2 bytes for f32, 1 for the 16-bit control of CUDA */
    c.q.data = (char *)c.q.data + fmsa_dtype_size(c.q.dtype) / 2;
    expect_rejected(FWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "q.data + q.byte_offset");
    c = valid_call();
    c.dk.data = (char *)c.dk.data + 1;
    expect_rejected(BWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "dk.data + dk.byte_offset");
    c = valid_call();
    {
        int64_t n = HQ;
        c.desc.alibi_slopes =
            fmsa_tensor_contiguous((char *)F.meta[META_SLOPES] + 2, FMSA_DTYPE_F32, 1, &n);
    }
    expect_rejected(FWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "desc.alibi_slopes.data");
}

/* Every view must fit the buffer it names: OpenCL asks CL_MEM_SIZE, CUDA the
 * driver's allocation range (cuMemGetAddressRange); a CPU address carries no
 * size, so there nothing can be checked. */
static void buffer_too_small(void **state) {
    call c = valid_call();
    void *tiny = NULL;
    (void)state;
    if (!handle_backend() && opts.backend != FMSA_BACKEND_CUDA) skip();
    assert_int_equal(fmsa_malloc(F.ctx, 64, &tiny), FMSA_SUCCESS);
    c.q.data = tiny;
    expect_rejected(FWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "q: the view reaches byte");
    c = valid_call();
    {
        int64_t ms[4] = {B, HQ, SQ, (SK + 7) / 8}; /* in a 1-byte buffer */
        void *one = NULL;
        assert_int_equal(fmsa_malloc(F.ctx, 1, &one), FMSA_SUCCESS);
        c.desc.mask = fmsa_tensor_contiguous(one, FMSA_DTYPE_U8, 4, ms);
        expect_rejected(FWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "desc.mask: the view reaches");
        fmsa_free(F.ctx, one);
    }
    c = valid_call();
    if (opts.backend == FMSA_BACKEND_CUDA) {
        /* the driver's allocation range is rounded up to its granularity (a
         * few bytes past the end stay inside it: measured on the H200), so
         * CUDA is shown an origin outside every allocation instead */
        c.dv.byte_offset = (int64_t)1 << 44;
        expect_rejected(BWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT,
                        "dv.data + byte_offset = ");
    } else {
        c.dv.byte_offset = 4; /* one element past the end of dv's buffer */
        expect_rejected(BWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "dv: the view reaches");
    }
    fmsa_free(F.ctx, tiny);
}

/* Runs the call and returns the contents of buffer `which` afterwards. */
static void run_and_read(which w, call *c, int idx, void *out, size_t bytes) {
    upload_meta();
    assert_int_equal(run_call(w, c, 0, 0), FMSA_SUCCESS);
    assert_int_equal(fmsa_synchronize(F.ctx, NULL), FMSA_SUCCESS);
    assert_int_equal(fmsa_copy_to_host(F.ctx, out, F.buf[idx], 0, bytes), FMSA_SUCCESS);
}

/* Inputs may share memory (k and v one buffer; q read as k) and broadcast
 * (stride 0): accepted, with the results of the same values laid out apart. */
static void shared_inputs_accepted(void **state) {
    enum { KN = B * SK * HKV * D, QN = B * SQ * HQ * D };
    static float ref[QN], got[QN], kv[KN];
    call c = valid_call();
    (void)state;
    /* v := k's values, then compare v = k as one buffer with two */
    assert_int_equal(fmsa_copy_to_host(F.ctx, kv, F.buf[1], 0, sizeof kv), FMSA_SUCCESS);
    assert_int_equal(fmsa_copy_to_device(F.ctx, F.buf[2], 0, kv, sizeof kv), FMSA_SUCCESS);
    run_and_read(FWD, &c, 3, ref, sizeof ref);
    c.v.data = c.k.data;
    run_and_read(FWD, &c, 3, got, sizeof got);
    assert_memory_equal(got, ref, sizeof got);
    /* a broadcast input: every head of q reads head 0 */
    c = valid_call();
    c.q.strides[2] = 0;
    assert_int_equal(run_call(FWD, &c, 0, 0), FMSA_SUCCESS);
    assert_int_equal(run_call(BWD, &c, 0, 0), FMSA_SUCCESS);
    /* backward inputs sharing one buffer: dout read through o's memory */
    c = valid_call();
    c.dout.data = c.o.data;
    assert_int_equal(run_call(BWD, &c, 0, 0), FMSA_SUCCESS);
}

/* Outputs interleaved in one packed buffer share no element: dk and dv as
 * the two halves of each row of a [B, SK, 2, HKV, D] gradient. */
static void interleaved_outputs_accepted(void **state) {
    enum { KN = B * SK * HKV * D, ROW = HKV * D };
    static unsigned char dk_ref[KN * 4], dv_ref[KN * 4], packed[2 * KN * 4];
    call c = valid_call();
    const size_t es = fmsa_dtype_size(c.dk.dtype), row = ROW * es;
    (void)state;
    upload_meta();
    assert_int_equal(run_call(FWD, &c, 0, 0), FMSA_SUCCESS); /* a consistent o and lse */
    run_and_read(BWD, &c, 7, dk_ref, KN * es);
    assert_int_equal(fmsa_copy_to_host(F.ctx, dv_ref, F.buf[8], 0, KN * es), FMSA_SUCCESS);
    c.dk.data = c.dv.data = F.buf[ARENA];
    c.dk.strides[0] = c.dv.strides[0] = 2 * (int64_t)SK * ROW;
    c.dk.strides[1] = c.dv.strides[1] = 2 * ROW;
    c.dv.byte_offset = (int64_t)row;
    run_and_read(BWD, &c, ARENA, packed, 2 * KN * es);
    for (int64_t r = 0; r < B * SK; ++r) {
        assert_memory_equal(&packed[2 * r * row], &dk_ref[r * row], row);
        assert_memory_equal(&packed[(2 * r + 1) * row], &dv_ref[r * row], row);
    }
}

/* A tensor of zero elements needs no data: no keys (O = 0, LSE = -inf, dQ =
 * 0) with k, v, dk, dv NULL; no queries with q, o, lse, dout, dq NULL. */
static void empty_tensors_without_data(void **state) {
    enum { QN = B * SQ * HQ * D, LN = B * HQ * SQ };
    static float o[QN], lse[LN], zeros[QN];
    call c = valid_call();
    const size_t qbytes = QN * fmsa_dtype_size(c.q.dtype); /* f32, or CUDA's 16-bit control */
    (void)state;
    c.k.shape[1] = c.v.shape[1] = c.dk.shape[1] = c.dv.shape[1] = 0;
    c.k.data = c.v.data = c.dk.data = c.dv.data = NULL;
    run_and_read(FWD, &c, 3, o, qbytes);
    assert_memory_equal(o, zeros, qbytes);
    assert_int_equal(fmsa_copy_to_host(F.ctx, lse, F.buf[4], 0, sizeof lse), FMSA_SUCCESS);
    for (int i = 0; i < LN; ++i) assert_true(isinf(lse[i]) && lse[i] < 0);
    run_and_read(BWD, &c, 6, o, qbytes);
    assert_memory_equal(o, zeros, qbytes);
    c = valid_call();
    c.q.shape[1] = c.o.shape[1] = c.dout.shape[1] = c.dq.shape[1] = c.lse.shape[2] = 0;
    c.q.data = c.o.data = c.dout.data = c.dq.data = c.lse.data = NULL;
    assert_int_equal(run_call(FWD, &c, 0, 0), FMSA_SUCCESS);
    assert_int_equal(run_call(BWD, &c, 0, 0), FMSA_SUCCESS); /* dk = dv = 0 */
}

/* Too little workspace must be refused before anything is written. */
static void workspace_too_small(void **state) {
    call c = valid_call();
    size_t need = 0;
    (void)state;
    assert_int_equal(fmsa_workspace_size(c.ctx, FMSA_PASS_BACKWARD, &c.desc, &c.q, &c.k, &c.v,
                                         &need),
                     FMSA_SUCCESS);
    /* every backward keeps rowsum(dO*O) in the workspace, so need > 0 */
    assert_true(need > 0);
    c.ws_bytes = need - 1;
    expect_rejected(BWD, c, 0, 0, FMSA_ERR_INSUFFICIENT_WORKSPACE, "workspace_bytes");
    c.ws = NULL;
    c.ws_bytes = need;
    expect_rejected(BWD, c, 0, 0, FMSA_ERR_INVALID_ARGUMENT, "workspace is NULL");
}

/* 1 when the enumeration lists a CUDA device (the GPU machine), where an
 * explicit CUDA context is no longer an error. */
static int have_cuda_device(void) {
    int n = 0;
    fmsa_device_info info;
    if (fmsa_device_count(&n) != FMSA_SUCCESS) return 0;
    for (int i = 0; i < n; ++i)
        if (fmsa_device_get(i, &info) == FMSA_SUCCESS && info.backend == FMSA_BACKEND_CUDA)
            return 1;
    return 0;
}

/* Context creation: unknown enum values, missing backends, bad env values. */
static void context_errors(void **state) {
    fmsa_context *ctx = (fmsa_context *)&F; /* must be reset to NULL on failure */
    (void)state;
    assert_int_equal(fmsa_context_create((fmsa_backend)42, 0, &ctx), FMSA_ERR_INVALID_ARGUMENT);
    assert_null(ctx);
    assert_int_equal(fmsa_context_create(FMSA_BACKEND_CPU, 0, NULL), FMSA_ERR_INVALID_ARGUMENT);
    if (!have_cuda_device()) { /* an explicit request for a missing backend is an error */
        assert_int_equal(fmsa_context_create(FMSA_BACKEND_CUDA, 0, &ctx),
                         FMSA_ERR_BACKEND_UNAVAILABLE);
        assert_non_null(strstr(fmsa_last_error(), "cuda"));
    }
    assert_int_equal(fmsa_context_create(FMSA_BACKEND_CPU, 5, &ctx), FMSA_ERR_BACKEND_UNAVAILABLE);
    assert_int_equal(fmsa_context_create(FMSA_BACKEND_CPU, -1, &ctx), FMSA_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(fmsa_last_error(), "device"));
    assert_null(ctx);
    setenv("FLASHMSA_BACKEND", "bogus", 1);
    assert_int_equal(fmsa_context_create(FMSA_BACKEND_AUTO, 0, &ctx), FMSA_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(fmsa_last_error(), "FLASHMSA_BACKEND"));
    setenv("FLASHMSA_BACKEND", "cpu", 1);
    setenv("FLASHMSA_DEVICE", "x1", 1);
    assert_int_equal(fmsa_context_create(FMSA_BACKEND_AUTO, 0, &ctx), FMSA_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(fmsa_last_error(), "FLASHMSA_DEVICE"));
    unsetenv("FLASHMSA_DEVICE");
    assert_int_equal(fmsa_context_create(FMSA_BACKEND_AUTO, 0, &ctx), FMSA_SUCCESS);
    fmsa_context_destroy(ctx);
    unsetenv("FLASHMSA_BACKEND");
}

/* ------------------------------------------------------------------------ */
/* API v0.2 (issue 13): sinks, dlse, dsink, the value head dim, the merge   */
/* ------------------------------------------------------------------------ */

/* Extra device buffers of these cases (made per test, so the block leaves the
 * fixture above alone): sink logits, dlse, dsink, a merged lse, and v/o large
 * enough for Dv = 584. */
enum { XSINKS, XDLSE, XDSINK, XLSE, XVBIG, XOBIG, NX, DV_BIG = 584 };
static void *X[NX];
static size_t x_bytes[NX];
static unsigned char *x_snap[NX], *x_now[NX];

static int feat_setup(void **state) {
    const size_t n[NX] = {HQ, (size_t)B * HQ * SQ, HQ, (size_t)B * HQ * SQ,
                          (size_t)B * SK * HKV * DV_BIG, (size_t)B * SQ * HQ * DV_BIG};
    unsigned seed = 11;
    (void)state;
    for (int i = 0; i < NX; ++i) {
        x_bytes[i] = n[i] * sizeof(float);
        x_snap[i] = malloc(x_bytes[i]);
        x_now[i] = malloc(x_bytes[i]);
        assert_non_null(x_snap[i]);
        assert_non_null(x_now[i]);
        for (size_t j = 0; j < n[i]; ++j) ((float *)x_snap[i])[j] = frand(&seed);
        assert_int_equal(fmsa_malloc(F.ctx, x_bytes[i], &X[i]), FMSA_SUCCESS);
        assert_int_equal(fmsa_copy_to_device(F.ctx, X[i], 0, x_snap[i], x_bytes[i]), FMSA_SUCCESS);
    }
    return 0;
}

static int feat_teardown(void **state) {
    (void)state;
    for (int i = 0; i < NX; ++i) {
        fmsa_free(F.ctx, X[i]);
        free(x_snap[i]);
        free(x_now[i]);
        X[i] = NULL;
    }
    return 0;
}

/* A valid call of the fixture with the v0.2 tensors: sinks, dlse, dsink. */
typedef struct feat_call {
    call c;
    fmsa_tensor dlse, dsink;
    int use_dlse, use_dsink;
} feat_call;

static feat_call feat_valid(void) {
    feat_call f;
    int64_t h = HQ, ls[3] = {B, HQ, SQ};
    memset(&f, 0, sizeof f);
    f.c = valid_call();
    f.c.desc.sinks = fmsa_tensor_contiguous(X[XSINKS], FMSA_DTYPE_F32, 1, &h);
    f.dlse = fmsa_tensor_contiguous(X[XDLSE], FMSA_DTYPE_F32, 3, ls);
    f.dsink = fmsa_tensor_contiguous(X[XDSINK], FMSA_DTYPE_F32, 1, &h);
    f.use_dlse = f.use_dsink = 1;
    return f;
}

/* v, o, dout, dv of f given value head dim dv (the big buffers for v and o). */
static void feat_value_dim(feat_call *f, int64_t dv) {
    int64_t vs[4] = {B, SK, HKV, dv}, os[4] = {B, SQ, HQ, dv};
    f->c.v = fmsa_tensor_contiguous(X[XVBIG], DT, 4, vs);
    f->c.o = fmsa_tensor_contiguous(X[XOBIG], DT, 4, os);
    f->c.dv = fmsa_tensor_contiguous(F.buf[8], DT, 4, vs);
    f->c.dout = fmsa_tensor_contiguous(F.buf[5], DT, 4, os);
    if (dv > D) { /* dv and dout would not fit the fixture's buffers: only shapes are read */
        f->c.dv.data = X[XVBIG];
        f->c.dout.data = X[XOBIG];
    }
}

static fmsa_status feat_run(which w, const feat_call *f) {
    const call *c = &f->c;
    if (w == FWD)
        return fmsa_forward(c->ctx, &c->desc, &c->q, &c->k, &c->v, &c->o, &c->lse, c->ws,
                            c->ws_bytes, NULL);
    {
        fmsa_backward_tensors bt;
        memset(&bt, 0, sizeof bt);
        bt.q = c->q;
        bt.k = c->k;
        bt.v = c->v;
        bt.o = c->o;
        bt.dout = c->dout;
        bt.lse = c->lse;
        bt.dq = c->dq;
        bt.dk = c->dk;
        bt.dv = c->dv;
        if (f->use_dlse) bt.dlse = f->dlse;
        if (f->use_dsink) bt.dsink = f->dsink;
        return fmsa_backward(c->ctx, &c->desc, &bt, c->ws, c->ws_bytes, NULL);
    }
}

static int feat_unchanged(void) {
    int same = unchanged();
    for (int i = 0; i < NX; ++i) {
        assert_int_equal(fmsa_copy_to_host(F.ctx, x_now[i], X[i], 0, x_bytes[i]), FMSA_SUCCESS);
        if (memcmp(x_snap[i], x_now[i], x_bytes[i])) same = 0;
    }
    return same;
}

static void feat_check(fmsa_status st, fmsa_status want, const char *field) {
    if (st != want || !strstr(fmsa_last_error(), field))
        print_error("status %d (want %d), message \"%s\" (want it to name \"%s\")\n", (int)st,
                    (int)want, fmsa_last_error(), field);
    assert_int_equal(st, want);
    assert_non_null(strstr(fmsa_last_error(), field));
    assert_true(feat_unchanged());
}

static void feat_rejected(which w, feat_call f, fmsa_status want, const char *field) {
    snapshot();
    for (int i = 0; i < NX; ++i)
        assert_int_equal(fmsa_copy_to_host(F.ctx, x_snap[i], X[i], 0, x_bytes[i]), FMSA_SUCCESS);
    feat_check(feat_run(w, &f), want, field);
}

#define FCASE(name, ...)                                                        \
    static void name(void **state) {                                            \
        feat_call f = feat_valid();                                             \
        (void)state;                                                            \
        __VA_ARGS__;                                                            \
    }

FCASE(sinks_wrong_dtype, f.c.desc.sinks.dtype = FMSA_DTYPE_F16;
      feat_rejected(FWD, f, FMSA_ERR_INVALID_ARGUMENT, "desc.sinks.dtype"))
FCASE(sinks_wrong_shape, f.c.desc.sinks.shape[0] = HQ / 2;
      feat_rejected(FWD, f, FMSA_ERR_INVALID_ARGUMENT, "desc.sinks.shape[0]"))
FCASE(sinks_wrong_ndim, int64_t s2[2] = {1, HQ};
      f.c.desc.sinks = fmsa_tensor_contiguous(X[XSINKS], FMSA_DTYPE_F32, 2, s2);
      feat_rejected(BWD, f, FMSA_ERR_INVALID_ARGUMENT, "desc.sinks.ndim"))
FCASE(dsink_without_sinks, f.c.desc.sinks.data = NULL; f.use_dlse = 0;
      feat_rejected(BWD, f, FMSA_ERR_INVALID_ARGUMENT, "dsink"))
FCASE(dsink_wrong_shape, f.dsink.shape[0] = HQ + 1;
      feat_rejected(BWD, f, FMSA_ERR_INVALID_ARGUMENT, "dsink.shape[0]"))
FCASE(dsink_broadcast, f.dsink.strides[0] = 0;
      feat_rejected(BWD, f, FMSA_ERR_INVALID_ARGUMENT, "dsink.strides[0]"))
FCASE(dlse_wrong_shape, f.dlse.shape[2] = SQ - 1;
      feat_rejected(BWD, f, FMSA_ERR_INVALID_ARGUMENT, "dlse.shape[2]"))
FCASE(dlse_wrong_dtype, f.dlse.dtype = FMSA_DTYPE_BF16;
      feat_rejected(BWD, f, FMSA_ERR_INVALID_ARGUMENT, "dlse.dtype"))
FCASE(dlse_wrong_ndim, f.dlse.ndim = 2;
      feat_rejected(BWD, f, FMSA_ERR_INVALID_ARGUMENT, "dlse.ndim"))
FCASE(value_dim_not_multiple_of_8, feat_value_dim(&f, 12);
      feat_rejected(FWD, f, FMSA_ERR_NOT_SUPPORTED, "v.shape[3] (head_dim_v)"))
FCASE(value_dim_above_576, feat_value_dim(&f, DV_BIG);
      feat_rejected(FWD, f, FMSA_ERR_NOT_SUPPORTED, "v.shape[3] (head_dim_v)"))
/* k follows q (D), not v (Dv) */
FCASE(k_head_dim_follows_v, feat_value_dim(&f, 8); f.c.k.shape[3] = 8;
      f.c.k = fmsa_tensor_contiguous(f.c.k.data, DT, 4, f.c.k.shape);
      feat_rejected(FWD, f, FMSA_ERR_INVALID_ARGUMENT, "k.shape[3]"))
FCASE(o_with_head_dim_not_dv, feat_value_dim(&f, 8); int64_t os[4] = {B, SQ, HQ, D};
      f.c.o = fmsa_tensor_contiguous(F.buf[3], DT, 4, os);
      feat_rejected(FWD, f, FMSA_ERR_INVALID_ARGUMENT, "o.shape[3]"))
FCASE(dout_with_head_dim_not_dv, feat_value_dim(&f, 8); int64_t os[4] = {B, SQ, HQ, D};
      f.c.dout = fmsa_tensor_contiguous(F.buf[5], DT, 4, os);
      feat_rejected(BWD, f, FMSA_ERR_INVALID_ARGUMENT, "dout.shape[3]"))
FCASE(dv_with_head_dim_not_dv, feat_value_dim(&f, 8); int64_t ks[4] = {B, SK, HKV, D};
      f.c.dv = fmsa_tensor_contiguous(F.buf[8], DT, 4, ks);
      feat_rejected(BWD, f, FMSA_ERR_INVALID_ARGUMENT, "dv.shape[3]"))

/* The merge over the fixture's buffers: o_a = q's, o_b = dout's, o = o's
 * ([B, SQ, HQ, D] f32), lse_a = lse's, lse_b = dlse's, lse = the extra one. */
typedef struct merge_call {
    fmsa_context *ctx;
    fmsa_tensor o_a, lse_a, o_b, lse_b, o, lse;
} merge_call;

static merge_call merge_valid(void) {
    merge_call m;
    int64_t os[4] = {B, SQ, HQ, D}, ls[3] = {B, HQ, SQ};
    m.ctx = F.ctx;
    m.o_a = fmsa_tensor_contiguous(F.buf[0], FMSA_DTYPE_F32, 4, os);
    m.o_b = fmsa_tensor_contiguous(F.buf[5], FMSA_DTYPE_F32, 4, os);
    m.o = fmsa_tensor_contiguous(F.buf[3], FMSA_DTYPE_F32, 4, os);
    m.lse_a = fmsa_tensor_contiguous(F.buf[4], FMSA_DTYPE_F32, 3, ls);
    m.lse_b = fmsa_tensor_contiguous(X[XDLSE], FMSA_DTYPE_F32, 3, ls);
    m.lse = fmsa_tensor_contiguous(X[XLSE], FMSA_DTYPE_F32, 3, ls);
    return m;
}

static void merge_rejected(merge_call m, fmsa_status want, const char *field) {
    snapshot();
    for (int i = 0; i < NX; ++i)
        assert_int_equal(fmsa_copy_to_host(F.ctx, x_snap[i], X[i], 0, x_bytes[i]), FMSA_SUCCESS);
    feat_check(fmsa_merge_states(m.ctx, &m.o_a, &m.lse_a, &m.o_b, &m.lse_b, &m.o, &m.lse, NULL),
               want, field);
}

#define MCASE(name, ...)                                                        \
    static void name(void **state) {                                            \
        merge_call m = merge_valid();                                           \
        (void)state;                                                            \
        __VA_ARGS__;                                                            \
    }

MCASE(merge_o_b_shape_mismatch, m.o_b.shape[1] = SQ - 1;
      merge_rejected(m, FMSA_ERR_INVALID_ARGUMENT, "o_b.shape[1]"))
MCASE(merge_o_shape_mismatch, m.o.shape[2] = HQ / 2;
      merge_rejected(m, FMSA_ERR_INVALID_ARGUMENT, "o.shape[2]"))
MCASE(merge_lse_a_dtype, m.lse_a.dtype = FMSA_DTYPE_F16;
      merge_rejected(m, FMSA_ERR_INVALID_ARGUMENT, "lse_a.dtype"))
MCASE(merge_lse_shape_mismatch, m.lse.shape[2] = SQ + 1;
      merge_rejected(m, FMSA_ERR_INVALID_ARGUMENT, "lse.shape[2]"))
MCASE(merge_o_b_dtype_i32, m.o_b.dtype = FMSA_DTYPE_I32;
      merge_rejected(m, FMSA_ERR_INVALID_ARGUMENT, "o_b.dtype"))
MCASE(merge_o_ndim, m.o.ndim = 3; merge_rejected(m, FMSA_ERR_INVALID_ARGUMENT, "o.ndim"))
MCASE(merge_lse_b_missing, m.lse_b.data = NULL;
      merge_rejected(m, FMSA_ERR_INVALID_ARGUMENT, "lse_b.data"))
MCASE(merge_head_dim_v_12, m.o_a.shape[3] = m.o_b.shape[3] = m.o.shape[3] = 12;
      merge_rejected(m, FMSA_ERR_NOT_SUPPORTED, "o_a.shape[3] (head_dim_v)"))
MCASE(merge_output_broadcast, m.lse.strides[1] = 0;
      merge_rejected(m, FMSA_ERR_INVALID_ARGUMENT, "lse.strides[1]"))
MCASE(merge_null_ctx, m.ctx = NULL; merge_rejected(m, FMSA_ERR_INVALID_ARGUMENT, "ctx"))

/* The control of this block: the unbroken merge and the v0.2 forward and
 * backward either run and write (so "nothing written" above is not vacuous;
 * on the CPU the merge must run) or are refused by the backend's gate with
 * every buffer intact. */
/* A backward with no query and no key rows still owes dsink its value, the
 * sum over no rows: zeros over the fixture's random dsink, nothing else written. */
static void dsink_of_no_rows(void **state) {
    feat_call f = feat_valid();
    float got[HQ];
    (void)state;
    f.c.q.shape[1] = f.c.o.shape[1] = f.c.dout.shape[1] = f.c.dq.shape[1] = 0;
    f.c.lse.shape[2] = f.dlse.shape[2] = 0;
    f.c.k.shape[1] = f.c.v.shape[1] = f.c.dk.shape[1] = f.c.dv.shape[1] = 0;
    f.c.q.data = f.c.o.data = f.c.dout.data = f.c.dq.data = f.c.lse.data = f.dlse.data = NULL;
    f.c.k.data = f.c.v.data = f.c.dk.data = f.c.dv.data = NULL;
    assert_int_equal(fmsa_copy_to_host(F.ctx, got, X[XDSINK], 0, sizeof got), FMSA_SUCCESS);
    for (int h = 0; h < HQ; ++h) assert_true(got[h] != 0.0f); /* the fixture's random values */
    assert_int_equal(feat_run(BWD, &f), FMSA_SUCCESS);
    assert_int_equal(fmsa_synchronize(F.ctx, NULL), FMSA_SUCCESS);
    assert_int_equal(fmsa_copy_to_host(F.ctx, got, X[XDSINK], 0, sizeof got), FMSA_SUCCESS);
    for (int h = 0; h < HQ; ++h) assert_true(got[h] == 0.0f);
}

static void feat_valid_calls(void **state) {
    merge_call m = merge_valid();
    feat_call f = feat_valid();
    fmsa_status st;
    (void)state;
    snapshot();
    for (int i = 0; i < NX; ++i)
        assert_int_equal(fmsa_copy_to_host(F.ctx, x_snap[i], X[i], 0, x_bytes[i]), FMSA_SUCCESS);
    st = fmsa_merge_states(m.ctx, &m.o_a, &m.lse_a, &m.o_b, &m.lse_b, &m.o, &m.lse, NULL);
    if (st == FMSA_ERR_NOT_SUPPORTED && opts.backend != FMSA_BACKEND_CPU) { /* no merge yet */
        assert_non_null(strstr(fmsa_last_error(), "not supported by this backend"));
        assert_true(feat_unchanged());
    } else {
        assert_int_equal(st, FMSA_SUCCESS);
        assert_false(feat_unchanged());
    }
    for (int w = FWD; w <= BWD; ++w) {
        snapshot();
        for (int i = 0; i < NX; ++i)
            assert_int_equal(fmsa_copy_to_host(F.ctx, x_snap[i], X[i], 0, x_bytes[i]),
                             FMSA_SUCCESS);
        st = feat_run((which)w, &f);
        if (st == FMSA_ERR_NOT_SUPPORTED) {
            assert_non_null(strstr(fmsa_last_error(), "not supported by this backend"));
            assert_true(feat_unchanged());
        } else {
            assert_int_equal(st, FMSA_SUCCESS);
            assert_false(feat_unchanged());
        }
    }
}

int main(int argc, char **argv) {
    fmsa_context *probe = NULL;
    if (fmsa_test_options_parse(argc, argv, &opts) != 0) return 2;
    if (opts.backend == FMSA_BACKEND_CUDA) DT = FMSA_DTYPE_BF16;
    if (fmsa_test_context_create(&opts, &probe) != FMSA_SUCCESS) return FMSA_TEST_EXIT_SKIP;
    fmsa_context_destroy(probe);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(valid_calls_write),
        cmocka_unit_test(null_q_tensor),
        cmocka_unit_test(null_desc),
        cmocka_unit_test(null_ctx),
        cmocka_unit_test(null_k_data),
        cmocka_unit_test(null_o_data),
        cmocka_unit_test(null_dq_data),
        cmocka_unit_test(k_dtype_mismatch),
        cmocka_unit_test(q_dtype_int),
        cmocka_unit_test(o_dtype_mismatch),
        cmocka_unit_test(dtype_garbage),
        cmocka_unit_test(q_ndim_3),
        cmocka_unit_test(q_last_stride),
        cmocka_unit_test(k_negative_stride),
        cmocka_unit_test(v_misaligned_offset),
        cmocka_unit_test(negative_shape),
        cmocka_unit_test(head_dim_0),
        cmocka_unit_test(head_dim_300),
        cmocka_unit_test(head_dim_12),
        cmocka_unit_test(k_head_dim_mismatch),
        cmocka_unit_test(heads_not_multiple),
        cmocka_unit_test(o_shape_mismatch),
        cmocka_unit_test(k_batch_mismatch),
        cmocka_unit_test(v_seqlen_mismatch),
        cmocka_unit_test(dk_shape_mismatch),
        cmocka_unit_test(scale_nan),
        cmocka_unit_test(scale_inf),
        cmocka_unit_test(softcap_negative),
        cmocka_unit_test(window_left_below),
        cmocka_unit_test(window_right_below),
        cmocka_unit_test(causal_with_right_window),
        cmocka_unit_test(lse_wrong_dtype),
        cmocka_unit_test(lse_wrong_shape),
        cmocka_unit_test(backward_without_lse),
        cmocka_unit_test(shape_overflow),
        cmocka_unit_test(shape_product_overflow),
        cmocka_unit_test(empty_view_stride_overflow),
        cmocka_unit_test(contiguous_overflow),
        cmocka_unit_test(output_broadcast_stride),
        cmocka_unit_test(dk_broadcast_stride),
        cmocka_unit_test(paged_capacity_overflow),
        cmocka_unit_test(cu_seqlens_only_q),
        cmocka_unit_test(cu_seqlens_not_zero_based),
        cmocka_unit_test(cu_seqlens_decreasing),
        cmocka_unit_test(cu_seqlens_wrong_total),
        cmocka_unit_test(cu_seqlens_broadcast),
        cmocka_unit_test(cu_seqlens_wrong_dtype),
        cmocka_unit_test(max_seqlen_too_small),
        cmocka_unit_test(paged_backward),
        cmocka_unit_test(paged_page_out_of_range),
        cmocka_unit_test(paged_page_size_mismatch),
        cmocka_unit_test(alibi_wrong_shape),
        cmocka_unit_test(mask_too_small),
        cmocka_unit_test(mask_wrong_batch),
        cmocka_unit_test(workspace_query_bad_heads),
        cmocka_unit_test(workspace_too_small),
        cmocka_unit_test(o_aliases_q),
        cmocka_unit_test(o_overlaps_q_by_a_row),
        cmocka_unit_test(lse_inside_o),
        cmocka_unit_test(dq_aliases_dout),
        cmocka_unit_test(dk_aliases_k),
        cmocka_unit_test(dv_aliases_dk),
        cmocka_unit_test(dq_aliases_o),
        cmocka_unit_test(dv_over_lse),
        cmocka_unit_test(o_over_mask),
        cmocka_unit_test(lse_overlaps_itself),
        cmocka_unit_test(dq_overlaps_itself),
        cmocka_unit_test(workspace_overlaps_dq),
        cmocka_unit_test(misaligned_pointers),
        cmocka_unit_test(buffer_too_small),
        cmocka_unit_test(shared_inputs_accepted),
        cmocka_unit_test(interleaved_outputs_accepted),
        cmocka_unit_test(empty_tensors_without_data),
        cmocka_unit_test(context_errors),
        /* API v0.2 (issue 13) */
        cmocka_unit_test_setup_teardown(feat_valid_calls, feat_setup, feat_teardown),
        cmocka_unit_test_setup_teardown(dsink_of_no_rows, feat_setup, feat_teardown),
        cmocka_unit_test_setup_teardown(sinks_wrong_dtype, feat_setup, feat_teardown),
        cmocka_unit_test_setup_teardown(sinks_wrong_shape, feat_setup, feat_teardown),
        cmocka_unit_test_setup_teardown(sinks_wrong_ndim, feat_setup, feat_teardown),
        cmocka_unit_test_setup_teardown(dsink_without_sinks, feat_setup, feat_teardown),
        cmocka_unit_test_setup_teardown(dsink_wrong_shape, feat_setup, feat_teardown),
        cmocka_unit_test_setup_teardown(dsink_broadcast, feat_setup, feat_teardown),
        cmocka_unit_test_setup_teardown(dlse_wrong_shape, feat_setup, feat_teardown),
        cmocka_unit_test_setup_teardown(dlse_wrong_dtype, feat_setup, feat_teardown),
        cmocka_unit_test_setup_teardown(dlse_wrong_ndim, feat_setup, feat_teardown),
        cmocka_unit_test_setup_teardown(value_dim_not_multiple_of_8, feat_setup, feat_teardown),
        cmocka_unit_test_setup_teardown(value_dim_above_576, feat_setup, feat_teardown),
        cmocka_unit_test_setup_teardown(k_head_dim_follows_v, feat_setup, feat_teardown),
        cmocka_unit_test_setup_teardown(o_with_head_dim_not_dv, feat_setup, feat_teardown),
        cmocka_unit_test_setup_teardown(dout_with_head_dim_not_dv, feat_setup, feat_teardown),
        cmocka_unit_test_setup_teardown(dv_with_head_dim_not_dv, feat_setup, feat_teardown),
        cmocka_unit_test_setup_teardown(merge_o_b_shape_mismatch, feat_setup, feat_teardown),
        cmocka_unit_test_setup_teardown(merge_o_shape_mismatch, feat_setup, feat_teardown),
        cmocka_unit_test_setup_teardown(merge_lse_a_dtype, feat_setup, feat_teardown),
        cmocka_unit_test_setup_teardown(merge_lse_shape_mismatch, feat_setup, feat_teardown),
        cmocka_unit_test_setup_teardown(merge_o_b_dtype_i32, feat_setup, feat_teardown),
        cmocka_unit_test_setup_teardown(merge_o_ndim, feat_setup, feat_teardown),
        cmocka_unit_test_setup_teardown(merge_lse_b_missing, feat_setup, feat_teardown),
        cmocka_unit_test_setup_teardown(merge_head_dim_v_12, feat_setup, feat_teardown),
        cmocka_unit_test_setup_teardown(merge_output_broadcast, feat_setup, feat_teardown),
        cmocka_unit_test_setup_teardown(merge_null_ctx, feat_setup, feat_teardown),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
