/*
 * The CUDA backend's host side, without a device (CTest runs this with
 * CUDA_VISIBLE_DEVICES="" so a GPU machine takes the same no-device path):
 * the embedded fatbins, the kernel-argument structs filled from hand-built
 * problems, validation's deferral of metadata reads, the plan's refusals, and
 * a machine with no usable CUDA device -- the backend lists nothing, an
 * explicit CUDA context fails cleanly and the CPU still runs from the same
 * binary.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backends/cuda/cuda_bwd_f32_instances.h"
#include "backends/cuda/cuda_bwd_instances.h"
#include "backends/cuda/cuda_fwd_instances.h"
#include "backends/cuda/cuda_internal.h"
#include "common/backend.h"
#include "common/validate.h"

/* Fake device addresses: params filling only does arithmetic on them. */
#define DEV(n) ((void *)(uintptr_t)(0x7f0000000000ull + (unsigned long long)(n) * 0x10000000ull))
#define AT(n, off) ((uintptr_t)DEV(n) + (uintptr_t)(off))

static fmsa_view4 view4(int n, int64_t off, int64_t sb, int64_t ss, int64_t sh) {
    fmsa_view4 v = {DEV(n), off, sb, ss, sh};
    return v;
}

/* bf16 forward, b 2, sq 100, sk 130, 8 / 2 heads, d 64, padded strides,
 * lse, alibi [B, Hq], broadcast mask, window and softcap. */
static fmsa_problem fwd_problem(void) {
    fmsa_problem p;
    memset(&p, 0, sizeof p);
    p.pass = FMSA_PASS_FORWARD;
    p.dtype = FMSA_DTYPE_BF16;
    p.batch = 2, p.seqlen_q = 100, p.seqlen_k = 130, p.heads_q = 8, p.heads_kv = 2;
    p.head_dim = 64, p.head_dim_v = 64, p.total_q = 100, p.total_k = 130;
    p.softmax_scale = 0.125f, p.softcap = 30.0f, p.window_left = 17, p.window_right = 0;
    p.causal = 1, p.has_lse = 1, p.has_alibi = 1, p.has_mask = 1;
    p.q = view4(1, 128, 100 * 8 * 72, 8 * 72, 72);
    p.k = view4(2, 256, 130 * 2 * 64, 2 * 64, 64);
    p.v = view4(3, 0, 130 * 2 * 80, 2 * 80, 80);
    p.o = view4(4, 64, 100 * 8 * 64, 8 * 64, 64);
    p.lse.data = DEV(5), p.lse.byte_offset = 16, p.lse.s0 = 8 * 104, p.lse.s1 = 104, p.lse.s2 = 1;
    p.alibi.data = DEV(6), p.alibi.byte_offset = 4, p.alibi.s0 = 8, p.alibi.s1 = 1;
    p.mask.data = DEV(7), p.mask.byte_offset = 3, p.mask.s0 = 0, p.mask.s1 = 0, p.mask.s2 = 17;
    return p;
}

static fmsa_cuda_plan plan_with_splits(void) {
    fmsa_cuda_plan plan;
    memset(&plan, 0, sizeof plan);
    plan.num_splits = 3;
    plan.ws_o_accum = 0, plan.ws_lse_accum = 4096;
    plan.ws_dsum = 8192, plan.ws_dq_accum = 12288;
    plan.ws_dk_accum = FMSA_CUDA_WS_NONE, plan.ws_dv_accum = FMSA_CUDA_WS_NONE;
    return plan;
}

static void fwd_params_from_problem(void **state) {
    const fmsa_problem p = fwd_problem();
    const fmsa_cuda_plan plan = plan_with_splits();
    fmsa_cuda_fwd_params f;
    (void)state;
    fmsa_cuda_fwd_params_fill(&p, &plan, (fmsa_cu_deviceptr)AT(9, 0), (fmsa_cu_deviceptr)AT(8, 0),
                              &f);
    assert_int_equal((uintptr_t)f.q, AT(1, 128));
    assert_int_equal((uintptr_t)f.k, AT(2, 256));
    assert_int_equal((uintptr_t)f.v, AT(3, 0));
    assert_int_equal((uintptr_t)f.o, AT(4, 64));
    assert_int_equal((uintptr_t)f.lse, AT(5, 16));
    assert_int_equal((uintptr_t)f.alibi, AT(6, 4));
    assert_int_equal((uintptr_t)f.mask, AT(7, 3));
    assert_null(f.cu_seqlens_q), assert_null(f.cu_seqlens_k);
    assert_null(f.block_table), assert_null(f.seqused_k), assert_null(f.sinks);
    assert_int_equal((uintptr_t)f.status, AT(9, 0));
    assert_int_equal((uintptr_t)f.o_accum, AT(8, 0));
    assert_int_equal((uintptr_t)f.lse_accum, AT(8, 4096));
    assert_int_equal(f.q_sb, 100 * 8 * 72), assert_int_equal(f.q_ss, 8 * 72);
    assert_int_equal(f.q_sh, 72);
    assert_int_equal(f.k_sb, 130 * 2 * 64), assert_int_equal(f.k_ss, 128), assert_int_equal(f.k_sh, 64);
    assert_int_equal(f.v_ss, 160), assert_int_equal(f.v_sh, 80);
    assert_int_equal(f.o_sb, 100 * 8 * 64), assert_int_equal(f.o_ss, 512), assert_int_equal(f.o_sh, 64);
    assert_int_equal(f.lse_sb, 8 * 104), assert_int_equal(f.lse_sh, 104), assert_int_equal(f.lse_ss, 1);
    assert_int_equal(f.alibi_sb, 8), assert_int_equal(f.alibi_sh, 1);
    assert_int_equal(f.mask_sb, 0), assert_int_equal(f.mask_sh, 0), assert_int_equal(f.mask_ss, 17);
    assert_int_equal(f.batch, 2), assert_int_equal(f.seqlen_q, 100), assert_int_equal(f.seqlen_k, 130);
    assert_int_equal(f.heads_q, 8), assert_int_equal(f.heads_kv, 2);
    assert_int_equal(f.head_dim, 64), assert_int_equal(f.head_dim_v, 64);
    assert_int_equal(f.total_q, 100), assert_int_equal(f.total_k, 130);
    assert_int_equal(f.num_splits, 3);
    assert_int_equal(f.window_left, 17), assert_int_equal(f.window_right, 0);
    assert_true(f.softmax_scale == 0.125f);
    /* exp(x * scale) = exp2(x * scale_log2): 0.125 * log2(e), rounded once */
    assert_true(f.scale_log2 == (float)(0.125 * 1.4426950408889634));
    assert_true(f.softcap == 30.0f);
    assert_int_equal(f.is_varlen, 0), assert_int_equal(f.is_paged, 0);
    assert_int_equal(f.has_seqused_k, 0);
}

static void fwd_params_varlen_and_paged(void **state) {
    fmsa_problem p = fwd_problem();
    fmsa_cuda_plan plan = plan_with_splits();
    fmsa_cuda_fwd_params f;
    (void)state;
    plan.ws_o_accum = plan.ws_lse_accum = FMSA_CUDA_WS_NONE;
    plan.num_splits = 0; /* a pick that leaves it unset still launches one split */
    p.is_varlen = 1;
    p.cu_seqlens_q.data = DEV(10), p.cu_seqlens_q.byte_offset = 8, p.cu_seqlens_q.s0 = 2;
    p.cu_seqlens_k.data = DEV(11), p.cu_seqlens_k.byte_offset = 0, p.cu_seqlens_k.s0 = 1;
    fmsa_cuda_fwd_params_fill(&p, &plan, 0, (fmsa_cu_deviceptr)AT(8, 0), &f);
    assert_int_equal((uintptr_t)f.cu_seqlens_q, AT(10, 8));
    assert_int_equal((uintptr_t)f.cu_seqlens_k, AT(11, 0));
    assert_int_equal(f.cu_q_s, 2), assert_int_equal(f.cu_k_s, 1);
    assert_int_equal(f.is_varlen, 1), assert_int_equal(f.num_splits, 1);
    assert_null(f.o_accum), assert_null(f.lse_accum);

    p = fwd_problem();
    p.is_paged = 1, p.has_seqused_k = 1;
    p.page_size = 16, p.max_pages = 9, p.num_pages = 40;
    p.block_table.data = DEV(12), p.block_table.byte_offset = 12;
    p.block_table.s0 = 11, p.block_table.s1 = 1;
    p.seqused_k.data = DEV(13), p.seqused_k.byte_offset = 4, p.seqused_k.s0 = 3;
    fmsa_cuda_fwd_params_fill(&p, &plan, 0, 0, &f);
    assert_int_equal((uintptr_t)f.block_table, AT(12, 12));
    assert_int_equal((uintptr_t)f.seqused_k, AT(13, 4));
    assert_int_equal(f.bt_sb, 11), assert_int_equal(f.bt_sp, 1), assert_int_equal(f.su_s, 3);
    assert_int_equal(f.page_size, 16), assert_int_equal(f.max_pages, 9);
    assert_int_equal(f.num_pages, 40);
    assert_int_equal(f.is_paged, 1), assert_int_equal(f.has_seqused_k, 1);
}

static void bwd_params_from_problem(void **state) {
    fmsa_problem p = fwd_problem();
    const fmsa_cuda_plan plan = plan_with_splits();
    fmsa_cuda_bwd_params b;
    (void)state;
    p.pass = FMSA_PASS_BACKWARD;
    p.deterministic = 1;
    p.dout = view4(20, 32, 1000, 520, 65);
    p.dq = view4(21, 0, 2000, 512, 64);
    p.dk = view4(22, 8, 3000, 128, 64);
    p.dv = view4(23, 24, 4000, 136, 68);
    fmsa_cuda_bwd_params_fill(&p, &plan, (fmsa_cu_deviceptr)AT(9, 0), (fmsa_cu_deviceptr)AT(8, 0),
                              &b);
    assert_int_equal((uintptr_t)b.fwd.q, AT(1, 128)); /* the embedded forward params */
    assert_int_equal((uintptr_t)b.fwd.lse, AT(5, 16));
    assert_int_equal((uintptr_t)b.dout, AT(20, 32));
    assert_int_equal((uintptr_t)b.dq, AT(21, 0));
    assert_int_equal((uintptr_t)b.dk, AT(22, 8));
    assert_int_equal((uintptr_t)b.dv, AT(23, 24));
    assert_int_equal(b.do_sb, 1000), assert_int_equal(b.do_ss, 520), assert_int_equal(b.do_sh, 65);
    assert_int_equal(b.dq_sb, 2000), assert_int_equal(b.dq_ss, 512), assert_int_equal(b.dq_sh, 64);
    assert_int_equal(b.dk_sb, 3000), assert_int_equal(b.dk_ss, 128), assert_int_equal(b.dk_sh, 64);
    assert_int_equal(b.dv_sb, 4000), assert_int_equal(b.dv_ss, 136), assert_int_equal(b.dv_sh, 68);
    assert_int_equal((uintptr_t)b.dsum, AT(8, 8192));
    assert_int_equal((uintptr_t)b.dq_accum, AT(8, 12288));
    assert_null(b.dk_accum), assert_null(b.dv_accum);
    assert_null(b.dlse), assert_null(b.dsinks);
    assert_int_equal(b.deterministic, 1);
}

/* A validation reader that must not be called. */
static int reads;
static fmsa_status counting_reader(void *st, void *dst, const void *src, size_t off, size_t n) {
    (void)st;
    ++reads;
    memcpy(dst, (const char *)src + off, n);
    return FMSA_SUCCESS;
}

static void validation_defers_metadata_reads(void **state) {
    enum { SQ = 40, SK = 56, H = 2, D = 16 };
    static float q[SQ * H * D], k[SK * H * D], v[SK * H * D];
    int32_t cu_q[3] = {0, 25, SQ}, cu_k[3] = {0, 20, SK};
    const int64_t qs[4] = {1, SQ, H, D}, ks[4] = {1, SK, H, D}, n = 3;
    fmsa_tensor tq = fmsa_tensor_contiguous(q, FMSA_DTYPE_F32, 4, qs);
    fmsa_tensor tk = fmsa_tensor_contiguous(k, FMSA_DTYPE_F32, 4, ks);
    fmsa_tensor tv = fmsa_tensor_contiguous(v, FMSA_DTYPE_F32, 4, ks);
    fmsa_attention_desc desc = fmsa_attention_desc_init(D);
    fmsa_call_tensors t = {0};
    fmsa_problem p;
    (void)state;
    t.q = &tq, t.k = &tk, t.v = &tv;
    desc.cu_seqlens_q = fmsa_tensor_contiguous(cu_q, FMSA_DTYPE_I32, 1, &n);
    desc.cu_seqlens_k = fmsa_tensor_contiguous(cu_k, FMSA_DTYPE_I32, 1, &n);
    /* both bounds given: nothing read; a generous bound is capped at the total */
    desc.max_seqlen_q = 30, desc.max_seqlen_k = (int64_t)1 << 40;
    reads = 0;
    assert_int_equal(fmsa_problem_build_meta(&p, FMSA_PASS_FORWARD, &desc, &t, 1, counting_reader,
                                             NULL, 1), FMSA_SUCCESS);
    assert_int_equal(reads, 0);
    assert_int_equal(p.seqlen_q, 30), assert_int_equal(p.seqlen_k, SK);
    /* one bound missing: read (and measured), as on every backend */
    desc.max_seqlen_k = 0;
    assert_int_equal(fmsa_problem_build_meta(&p, FMSA_PASS_FORWARD, &desc, &t, 1, counting_reader,
                                             NULL, 1), FMSA_SUCCESS);
    assert_true(reads > 0);
    assert_int_equal(p.seqlen_q, 25), assert_int_equal(p.seqlen_k, 36);
    /* not deferred: read even with both bounds */
    reads = 0;
    desc.max_seqlen_k = 60;
    assert_int_equal(fmsa_problem_build_meta(&p, FMSA_PASS_FORWARD, &desc, &t, 1, counting_reader,
                                             NULL, 0), FMSA_SUCCESS);
    assert_true(reads > 0);
    /* a bad table entry is the device's to find when deferred, the host's otherwise */
    cu_k[1] = 60;
    reads = 0;
    assert_int_equal(fmsa_problem_build_meta(&p, FMSA_PASS_FORWARD, &desc, &t, 1, counting_reader,
                                             NULL, 1), FMSA_SUCCESS);
    assert_int_equal(reads, 0);
    assert_int_equal(fmsa_problem_build_meta(&p, FMSA_PASS_FORWARD, &desc, &t, 1, counting_reader,
                                             NULL, 0), FMSA_ERR_INVALID_ARGUMENT);
}

static void validation_defers_block_table(void **state) {
    enum { B = 2, PAGES = 5, PS = 8, MAXP = 3, H = 1, D = 16 };
    static float q[B * 4 * H * D], k[PAGES * PS * H * D], v[PAGES * PS * H * D];
    int32_t table[B * MAXP] = {0, 1, 2, 3, 99, 4}, used[B] = {20, 9};
    const int64_t qs[4] = {B, 4, H, D}, ks[4] = {PAGES, PS, H, D}, ts[2] = {B, MAXP}, us = B;
    fmsa_tensor tq = fmsa_tensor_contiguous(q, FMSA_DTYPE_F32, 4, qs);
    fmsa_tensor tk = fmsa_tensor_contiguous(k, FMSA_DTYPE_F32, 4, ks);
    fmsa_tensor tv = fmsa_tensor_contiguous(v, FMSA_DTYPE_F32, 4, ks);
    fmsa_attention_desc desc = fmsa_attention_desc_init(D);
    fmsa_call_tensors t = {0};
    fmsa_problem p;
    (void)state;
    t.q = &tq, t.k = &tk, t.v = &tv;
    desc.block_table = fmsa_tensor_contiguous(table, FMSA_DTYPE_I32, 2, ts);
    desc.seqused_k = fmsa_tensor_contiguous(used, FMSA_DTYPE_I32, 1, &us);
    desc.page_size = PS;
    reads = 0;
    assert_int_equal(fmsa_problem_build_meta(&p, FMSA_PASS_FORWARD, &desc, &t, 1, counting_reader,
                                             NULL, 1), FMSA_SUCCESS);
    assert_int_equal(reads, 0);
    assert_int_equal(p.seqlen_k, MAXP * PS); /* the bound, not the measured 20 */
    /* the host path reads and finds entry [1][1] = 99 (sequence 1 uses 2 pages) */
    assert_int_equal(fmsa_problem_build_meta(&p, FMSA_PASS_FORWARD, &desc, &t, 1, counting_reader,
                                             NULL, 0), FMSA_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(fmsa_last_error(), "block_table[1][1]"));
}

/* A made-up CUDA device of compute capability cc with optin bytes of shared
 * memory per block (48 KiB without the opt-in), and the backend state on it:
 * what the picks read. */
static fmsa_cuda_state *fake_cuda(fmsa_cuda_device *dev, fmsa_cuda_state *st, int cc,
                                  size_t optin) {
    memset(dev, 0, sizeof *dev);
    memset(st, 0, sizeof *st);
    dev->info.backend = FMSA_BACKEND_CUDA;
    snprintf(dev->info.arch, sizeof dev->info.arch, "sm%d0", cc);
    dev->cc_major = cc;
    dev->info.sram_per_block = 48 << 10, dev->info.sram_per_block_optin = optin;
    dev->info.multiprocessors = 132;
    dev->max_threads_per_block = 1024;
    st->dev = dev;
    return st;
}

/* A plan on a made-up sm90 device: 32-bit geometry, then the instance lists. */
static void plan_refusals(void **state) {
    fmsa_cuda_device dev;
    fmsa_cuda_state st;
    fmsa_problem p = fwd_problem();
    fmsa_cuda_plan plan;
    (void)state;
    fake_cuda(&dev, &st, 9, 227 << 10);
    p.total_k = (int64_t)INT32_MAX + 1;
    assert_int_equal(fmsa_cuda_plan_make(&st, &p, &plan), FMSA_ERR_NOT_SUPPORTED);
    assert_non_null(strstr(fmsa_last_error(), "total_k"));
    p = fwd_problem();
    /* without the instance lists merged every shape is refused, by name */
    if (fmsa_cuda_plan_make(&st, &p, &plan) != FMSA_SUCCESS) {
        assert_non_null(strstr(fmsa_last_error(), "head_dim"));
    } else {
        assert_true(plan.launches >= 1 && plan.launches <= FMSA_CUDA_MAX_LAUNCHES);
    }
    /* fp32: the forward runs it (3xTF32) to D = 256, the backward refuses it by name */
    p = fwd_problem();
    p.dtype = FMSA_DTYPE_F32;
    assert_int_equal(fmsa_cuda_plan_make(&st, &p, &plan), FMSA_SUCCESS);
    assert_string_equal(plan.instance, "fmsa_cuda_fwd_f32_d64_full");
    p.head_dim = p.head_dim_v = 512;
    p.q.ss = p.q.sh = p.k.ss = p.k.sh = p.v.ss = p.v.sh = p.o.ss = p.o.sh = 512;
    assert_int_equal(fmsa_cuda_plan_make(&st, &p, &plan), FMSA_ERR_NOT_SUPPORTED);
    assert_non_null(strstr(fmsa_last_error(), "cuda (forward): f32"));
    assert_non_null(strstr(fmsa_last_error(), "runs head dims up to 256"));
    /* the backward runs it too (its own 3xTF32 list, bwd_pick_f32), to 256 */
    p = fwd_problem();
    p.dtype = FMSA_DTYPE_F32;
    p.pass = FMSA_PASS_BACKWARD;
    assert_int_equal(fmsa_cuda_plan_make(&st, &p, &plan), FMSA_SUCCESS);
    assert_non_null(strstr(plan.instance, "fmsa_cuda_bwd_f32_main_d64v64_"));
    p.head_dim = p.head_dim_v = 512;
    p.q.ss = p.q.sh = p.k.ss = p.k.sh = p.v.ss = p.v.sh = p.o.ss = p.o.sh = 512;
    assert_int_equal(fmsa_cuda_plan_make(&st, &p, &plan), FMSA_ERR_NOT_SUPPORTED);
    assert_non_null(strstr(fmsa_last_error(), "cuda (backward): f32"));
    assert_non_null(strstr(fmsa_last_error(), "not supported by this backend"));
}

/* The forward's pick over head dim pairs (through the planner's rows): the
 * smallest D + Dv instance that covers both and fits the device's shared
 * memory (sm_90 227 KiB, sm_80 163 KiB); an aligned problem without features. */
static int fwd_plan_wgmma_fwd = 0; /* fwd_pick_hopper: the made-up device's FLASHMSA_CUDA_WGMMA_FWD */
static fmsa_cuda_plan fwd_pick_plan; /* the last pick's plan */
static const char *fwd_pick_name_dt(int dt, int D, int Dv, long long smem, int seqlen_q) {
    static fmsa_cuda_device dev;
    static fmsa_cuda_state st;
    fmsa_cuda_plan *const plan = &fwd_pick_plan;
    fmsa_problem p;
    fake_cuda(&dev, &st, smem > (163 << 10) ? 9 : 8, (size_t)smem);
    dev.wgmma = dev.wgmma_fwd = fwd_plan_wgmma_fwd;
    memset(&p, 0, sizeof p);
    p.pass = FMSA_PASS_FORWARD;
    p.dtype = dt == FMSA_CUDA_DT_BF16 ? FMSA_DTYPE_BF16
              : dt == FMSA_CUDA_DT_F32 ? FMSA_DTYPE_F32 : FMSA_DTYPE_F16;
    p.batch = 2, p.seqlen_q = seqlen_q, p.seqlen_k = 4096, p.heads_q = 8, p.heads_kv = 2;
    p.head_dim = D, p.head_dim_v = Dv, p.total_q = seqlen_q, p.total_k = 4096;
    p.softmax_scale = 0.1f, p.window_left = p.window_right = -1;
    p.q = view4(1, 0, (int64_t)seqlen_q * 8 * D, 8 * D, D);
    p.k = view4(2, 0, 4096 * 2 * D, 2 * D, D);
    p.v = view4(3, 0, 4096 * 2 * Dv, 2 * Dv, Dv);
    p.o = view4(4, 0, (int64_t)seqlen_q * 8 * Dv, 8 * Dv, Dv);
    if (fmsa_cuda_plan_make(&st, &p, plan) != FMSA_SUCCESS) return NULL;
    return plan->instance;
}

static const char *fwd_pick_name(int D, int Dv, long long smem, int seqlen_q) {
    return fwd_pick_name_dt(FMSA_CUDA_DT_BF16, D, Dv, smem, seqlen_q);
}

static void fwd_pick_value_dims(void **state) {
    const long long sm90 = 227 << 10, sm80 = 163 << 10;
    (void)state;
    assert_string_equal(fwd_pick_name(64, 64, sm90, 512), "fmsa_cuda_fwd_bf16_d64_fast");
    assert_string_equal(fwd_pick_name(8, 8, sm90, 512), "fmsa_cuda_fwd_bf16_d64_fast");
    assert_string_equal(fwd_pick_name(192, 128, sm90, 512), "fmsa_cuda_fwd_bf16_d192v128_fast");
    assert_string_equal(fwd_pick_name(136, 120, sm90, 512), "fmsa_cuda_fwd_bf16_d192v128_fast");
    assert_string_equal(fwd_pick_name(128, 192, sm90, 512), "fmsa_cuda_fwd_bf16_d192_fast");
    assert_string_equal(fwd_pick_name(64, 256, sm90, 512), "fmsa_cuda_fwd_bf16_d256_fast");
    assert_string_equal(fwd_pick_name(264, 264, sm90, 512), "fmsa_cuda_fwd_bf16_d512_fast");
    assert_string_equal(fwd_pick_name(512, 512, sm90, 512), "fmsa_cuda_fwd_bf16_d512_fast");
    assert_string_equal(fwd_pick_name(576, 512, sm90, 512), "fmsa_cuda_fwd_bf16_d576v512_fast");
    assert_string_equal(fwd_pick_name(520, 264, sm90, 512), "fmsa_cuda_fwd_bf16_d576v512_fast");
    assert_string_equal(fwd_pick_name(576, 576, sm90, 512), "fmsa_cuda_fwd_bf16_d576_fast");
    assert_string_equal(fwd_pick_name(64, 520, sm90, 512), "fmsa_cuda_fwd_bf16_d576_fast");
    assert_null(fwd_pick_name(584, 512, sm90, 512));
    /* above 256 the tiles need sm_90's opt-in shared memory */
    assert_null(fwd_pick_name(512, 512, sm80, 512));
    /* d256's 128 x 64 tiles need 192 KiB: sm_80 takes the 64 x 64 row (160 KiB),
     * sm_90 the first row on the tie; d192 fits sm_80 as it is (144 KiB).  With
     * FMSA_CUDA_FWD_D256_SINGLE the FAST d256 row is 64 x 64 in 96.5 KiB and fits
     * sm_80 itself (FULL keeps both rows) */
    assert_string_equal(fwd_pick_name(256, 256, sm80, 512), FMSA_CUDA_FWD_D256_SINGLE
                                                              ? "fmsa_cuda_fwd_bf16_d256_fast"
                                                              : "fmsa_cuda_fwd_bf16_d256_m64_fast");
    assert_string_equal(fwd_pick_name(64, 256, sm80, 512), FMSA_CUDA_FWD_D256_SINGLE
                                                             ? "fmsa_cuda_fwd_bf16_d256_fast"
                                                             : "fmsa_cuda_fwd_bf16_d256_m64_fast");
    assert_string_equal(fwd_pick_name(256, 256, sm90, 512), "fmsa_cuda_fwd_bf16_d256_fast");
    assert_string_equal(fwd_pick_name(192, 192, sm80, 512), "fmsa_cuda_fwd_bf16_d192_fast");
    /* fp32 (3xTF32): to 256, every row within sm_80's opt-in */
    assert_string_equal(fwd_pick_name_dt(FMSA_CUDA_DT_F32, 64, 64, sm80, 512), "fmsa_cuda_fwd_f32_d64_fast");
    assert_string_equal(fwd_pick_name_dt(FMSA_CUDA_DT_F32, 96, 96, sm80, 512), "fmsa_cuda_fwd_f32_d128_fast");
    assert_string_equal(fwd_pick_name_dt(FMSA_CUDA_DT_F32, 192, 128, sm80, 512), "fmsa_cuda_fwd_f32_d256_fast");
    assert_string_equal(fwd_pick_name_dt(FMSA_CUDA_DT_F32, 256, 256, sm80, 512), "fmsa_cuda_fwd_f32_d256_fast");
    assert_null(fwd_pick_name_dt(FMSA_CUDA_DT_F32, 264, 264, sm90, 512));
    assert_string_equal(fwd_pick_name_dt(FMSA_CUDA_DT_F32, 128, 128, sm80, 1), "fmsa_cuda_fwd_f32_d128_split_fast");
    assert_string_equal(fwd_pick_name_dt(FMSA_CUDA_DT_F32, 256, 256, sm80, 1), "fmsa_cuda_fwd_f32_d256_split_fast");
    /* decode: split-KV up to max(D, Dv) = 256, the main kernel above */
    assert_string_equal(fwd_pick_name(192, 128, sm90, 1), "fmsa_cuda_fwd_bf16_d256_split_fast");
    assert_string_equal(fwd_pick_name(512, 512, sm90, 1), "fmsa_cuda_fwd_bf16_d512_fast");
}

/* The forward's pick on a made-up device that runs wgmma: with
 * FLASHMSA_CUDA_WGMMA_FWD set (wgmma_fwd 1), bf16 / f16 at exactly D = Dv =
 * 128 or 256 take the Hopper instance (256 threads, 128-row blocks, its shared
 * memory), 2 its serial schedule; unset, another D, a value dim of its own,
 * decode (split-KV) or sm_80: the mma.sync kernels. */
static void fwd_pick_hopper(void **state) {
    const long long sm90 = 227 << 10;
    const fmsa_cuda_plan *plan = &fwd_pick_plan;
    (void)state;
    fwd_plan_wgmma_fwd = 1;
    assert_string_equal(fwd_pick_name(128, 128, sm90, 1000), "fmsa_cuda_fwd_wg_bf16_d128_ovl");
    assert_int_equal(plan->launches, 1);
    assert_string_equal(plan->launch[0].kernel, "fmsa_cuda_fwd_wg_bf16_d128_ovl");
    assert_int_equal(plan->launch[0].threads, 256);
    assert_int_equal(plan->launch[0].grid[0], 8); /* 1000 rows in 128-row blocks */
    assert_int_equal(plan->launch[0].grid[1], 8), assert_int_equal(plan->launch[0].grid[2], 2);
    assert_int_equal((int)plan->launch[0].smem, FMSA_CUDA_FWD_WG_SMEM(128, 128, 128, 2));
    assert_string_equal(fwd_pick_name_dt(FMSA_CUDA_DT_F16, 128, 128, sm90, 1000), "fmsa_cuda_fwd_wg_f16_d128_ovl");
    assert_string_equal(fwd_pick_name(256, 256, sm90, 1000), "fmsa_cuda_fwd_wg_bf16_d256_ovl");
    assert_int_equal((int)plan->launch[0].smem, FMSA_CUDA_FWD_WG_SMEM(256, 128, 64, 2));
    assert_int_equal(plan->launch[0].grid[0], 8), assert_int_equal(plan->launch[0].threads, 256);
    assert_string_equal(fwd_pick_name(248, 248, sm90, 1000), "fmsa_cuda_fwd_bf16_d256_fast");
    assert_string_equal(fwd_pick_name(120, 120, sm90, 1000), "fmsa_cuda_fwd_bf16_d128_fast");
    assert_string_equal(fwd_pick_name(128, 64, sm90, 1000), "fmsa_cuda_fwd_bf16_d128_fast");
    assert_string_equal(fwd_pick_name(64, 64, sm90, 1000), "fmsa_cuda_fwd_bf16_d64_fast");
    assert_string_equal(fwd_pick_name(128, 128, sm90, 1), "fmsa_cuda_fwd_bf16_d128_split_fast");
    assert_string_equal(fwd_pick_name_dt(FMSA_CUDA_DT_F32, 128, 128, sm90, 1000), "fmsa_cuda_fwd_f32_d128_fast");
    fwd_plan_wgmma_fwd = 2;
    assert_string_equal(fwd_pick_name(128, 128, sm90, 1000), "fmsa_cuda_fwd_wg_bf16_d128");
    assert_string_equal(plan->launch[0].kernel, "fmsa_cuda_fwd_wg_bf16_d128");
    assert_string_equal(fwd_pick_name_dt(FMSA_CUDA_DT_F16, 128, 128, sm90, 1000), "fmsa_cuda_fwd_wg_f16_d128");
    assert_string_equal(fwd_pick_name_dt(FMSA_CUDA_DT_F16, 256, 256, sm90, 1000), "fmsa_cuda_fwd_wg_f16_d256");
    fwd_plan_wgmma_fwd = 0;
    assert_string_equal(fwd_pick_name(256, 256, sm90, 1000), "fmsa_cuda_fwd_bf16_d256_fast");
    assert_string_equal(fwd_pick_name(128, 128, sm90, 1000), "fmsa_cuda_fwd_bf16_d128_fast");
}

/* An aligned bf16 backward of head dims (d, dv) on a device of compute
 * capability cc with optin bytes of shared memory per block. */
static fmsa_dtype bwd_plan_dtype = FMSA_DTYPE_BF16; /* bwd_pick_f32 sets f32 */
static int bwd_plan_seqlen = 300; /* bwd_pick_hopper: whole 16-row groups */
static int bwd_plan_wgmma = 0;    /* the made-up device's wgmma setting (cuda_device.c) */

static fmsa_status bwd_plan_v(int d, int dv, int cc, size_t optin, int dsink, fmsa_cuda_plan *plan) {
    static fmsa_cuda_device dev;
    static fmsa_cuda_state st;
    fmsa_problem p;
    const int s = bwd_plan_seqlen;
    fake_cuda(&dev, &st, cc, optin);
    dev.wgmma = bwd_plan_wgmma;
    memset(&p, 0, sizeof p);
    p.pass = FMSA_PASS_BACKWARD;
    p.dtype = bwd_plan_dtype;
    p.batch = 2, p.seqlen_q = p.seqlen_k = p.total_q = p.total_k = s;
    p.heads_q = 6, p.heads_kv = 2, p.head_dim = d, p.head_dim_v = dv, p.softmax_scale = 0.1f;
    p.has_lse = 1;
    p.q = view4(1, 0, s * 6 * d, 6 * d, d), p.o = view4(4, 0, s * 6 * dv, 6 * dv, dv);
    p.dout = view4(20, 0, s * 6 * dv, 6 * dv, dv), p.dq = view4(21, 0, s * 6 * d, 6 * d, d);
    p.k = view4(2, 0, s * 2 * d, 2 * d, d), p.v = view4(3, 0, s * 2 * dv, 2 * dv, dv);
    p.dk = view4(22, 0, s * 2 * d, 2 * d, d), p.dv = view4(23, 0, s * 2 * dv, 2 * dv, dv);
    p.lse.data = DEV(5), p.lse.s0 = 6 * s, p.lse.s1 = s, p.lse.s2 = 1;
    if (dsink) {
        p.has_sinks = p.has_dsink = 1;
        p.sinks.data = DEV(6), p.sinks.s0 = 1;
        p.dsink.data = DEV(7), p.dsink.s0 = 1;
    }
    return fmsa_cuda_plan_make(&st, &p, plan);
}

static fmsa_status bwd_plan(int d, int cc, size_t optin, int dsink, fmsa_cuda_plan *plan) {
    return bwd_plan_v(d, d, cc, optin, dsink, plan);
}

/* The backward's pick: the first row of the head dim whose shared memory fits
 * the device (d64's 128-row tile and the 2-stage rows on the H100/H200, the
 * 64-row / 1-stage rows on the A100's 164 KiB), a 4th launch (dsink) only when
 * dsink is asked for; above 256 the (512, 512) and (576, 512) rows, sm_90's
 * opt-in memory only. */
static void bwd_pick_by_device(void **state) {
    fmsa_cuda_plan plan;
    (void)state;
    assert_int_equal(bwd_plan(64, 9, 227 << 10, 0, &plan), FMSA_SUCCESS);
    assert_non_null(strstr(plan.instance, "_d64_m128_"));
    assert_int_equal(plan.launches, 3);
    assert_true(plan.launch[1].smem <= 227u << 10);
    assert_int_equal(plan.launch[1].grid[0], 3); /* 300 keys in 128-key blocks */
    assert_int_equal(plan.launch[1].grid[1], 2), assert_int_equal(plan.launch[1].grid[2], 2);
    assert_int_equal(bwd_plan(64, 8, 163 << 10, 0, &plan), FMSA_SUCCESS);
    assert_non_null(strstr(plan.instance, "_d64_m64_"));
    assert_true(plan.launch[1].smem <= 163u << 10);
    assert_int_equal(bwd_plan(128, 9, 227 << 10, 0, &plan), FMSA_SUCCESS);
    assert_non_null(strstr(plan.instance, "_d128_m64_n128_k4_p2_"));
    /* the sm_90 row keeps dQ's accumulator in tiles (OPT bit 13): its own postprocess */
    assert_string_equal(plan.launch[2].kernel, "fmsa_cuda_bwd_post_t_bf16");
    assert_int_equal(bwd_plan(128, 8, 163 << 10, 0, &plan), FMSA_SUCCESS);
    assert_non_null(strstr(plan.instance, "_d128_m64_n128_k4_p1_"));
    assert_string_equal(plan.launch[2].kernel, "fmsa_cuda_bwd_post_bf16");
    assert_int_equal(bwd_plan(256, 8, 163 << 10, 0, &plan), FMSA_SUCCESS);
    assert_non_null(strstr(plan.instance, "_d256_m64_n64_k2_p1_"));
    assert_int_equal(bwd_plan(96, 9, 227 << 10, 1, &plan), FMSA_SUCCESS);
    assert_non_null(strstr(plan.instance, "_d96_"));
    assert_int_equal(plan.launches, 4);
    assert_string_equal(plan.launch[3].kernel, "fmsa_cuda_bwd_dsink");
    assert_int_equal(plan.launch[3].grid[0], 6); /* one block per query head */
    /* above 256: the (512, 512) and (576, 512) rows on sm_90 (32-key blocks,
       209,536 / 221,824 bytes), refused by name where the shared memory is
       short (sm_80) */
    assert_int_equal(bwd_plan(264, 9, 227 << 10, 0, &plan), FMSA_SUCCESS);
    assert_non_null(strstr(plan.instance, "_d512v512_m64_n32_k2_p1_"));
    assert_int_equal(plan.launch[1].smem, 209536);
    assert_int_equal(plan.launch[1].grid[0], 10); /* 300 keys in 32-key blocks */
    assert_int_equal(plan.accum_dim, 512);
    assert_string_equal(plan.launch[0].kernel, "fmsa_cuda_bwd_pre_dv_bf16");
    assert_int_equal(bwd_plan(512, 9, 227 << 10, 1, &plan), FMSA_SUCCESS);
    assert_non_null(strstr(plan.instance, "_d512v512_"));
    assert_int_equal(plan.launches, 4);
    assert_int_equal(bwd_plan_v(576, 512, 9, 227 << 10, 0, &plan), FMSA_SUCCESS);
    assert_non_null(strstr(plan.instance, "_d576v512_m64_n32_k2_p1_"));
    assert_int_equal(plan.launch[1].smem, 221824);
    assert_int_equal(plan.accum_dim, 576);
    assert_int_equal(bwd_plan_v(576, 512, 9, 216 << 10, 0, &plan), FMSA_ERR_NOT_SUPPORTED);
    assert_non_null(strstr(fmsa_last_error(), "head_dim 576"));
    assert_int_equal(bwd_plan(264, 9, 200 << 10, 0, &plan), FMSA_ERR_NOT_SUPPORTED);
    assert_non_null(strstr(fmsa_last_error(), "head_dim 264"));
    assert_int_equal(bwd_plan(264, 8, 163 << 10, 0, &plan), FMSA_ERR_NOT_SUPPORTED);
    assert_non_null(strstr(fmsa_last_error(), "head_dim 264"));
    assert_non_null(strstr(fmsa_last_error(), "sm80"));
    /* a square 576 has no row (V and dO of 576 columns do not fit) */
    assert_int_equal(bwd_plan(576, 9, 227 << 10, 0, &plan), FMSA_ERR_NOT_SUPPORTED);
    assert_non_null(strstr(fmsa_last_error(), "head_dim 576 with head_dim_v 576"));
    assert_non_null(strstr(fmsa_last_error(), "cuda (backward)"));
}

/* The backward's pick over head dim pairs: the smallest D + Dv row that
 * covers both and fits (sm_90 227 KiB, sm_80 163 KiB); square problems keep
 * the square rows (and their preprocess), every other pair takes a row of a
 * value head dim of its own (its preprocess sums dO * O over head_dim_v),
 * above 256 the (512, 512) and (576, 512) rows on sm_90 only. */
static const char *bwd_pick_v(int d, int dv, int cc, fmsa_cuda_plan *plan) {
    const size_t optin = cc >= 9 ? 227u << 10 : 163u << 10;
    if (bwd_plan_v(d, dv, cc, optin, 0, plan) != FMSA_SUCCESS) return NULL;
    assert_true(plan->launch[1].smem <= optin);
    return plan->instance;
}

/* The Hopper backward through the whole pick (params, fmsa_cuda_bwd_wg_serves,
 * the planner's W16 rows, the instance and its launches): on a device that
 * runs wgmma, bf16 / f16 at exactly D = Dv = 64, 128, 256 with whole 16-row
 * query groups take the wgmma kernels in the grid and workspace of the
 * mma.sync row of their tile; anything else, or a device without wgmma,
 * the mma.sync rows; FLASHMSA_CUDA_WGMMA=o<N> (wgmma 2 + N) a variant of the
 * same D, or a refusal that names the variable. */
static void bwd_pick_hopper(void **state) {
    static const struct { int d, grid0, smem; const char *name; } rows[3] = {
        {64, 3, 134144, "fmsa_cuda_bwd_wg_bf16_d64"},
        {128, 3, 149504, "fmsa_cuda_bwd_wg_bf16_d128"},
        {256, 5, 215040, "fmsa_cuda_bwd_wg_bf16_d256"}}; /* 320 keys in 128 / 64-key blocks */
    fmsa_cuda_plan plan;
    (void)state;
    bwd_plan_seqlen = 320, bwd_plan_wgmma = 1;
    for (int r = 0; r < 3; ++r) {
        const int d = rows[r].d;
        assert_int_equal(bwd_plan(d, 9, 227 << 10, r == 1, &plan), FMSA_SUCCESS); /* d128 with dsink */
        assert_string_equal(plan.instance, rows[r].name);
        assert_string_equal(plan.launch[0].kernel, "fmsa_cuda_bwd_pre_bf16");
        assert_string_equal(plan.launch[1].kernel, rows[r].name);
        assert_string_equal(plan.launch[2].kernel, "fmsa_cuda_bwd_post_t_bf16");
        assert_int_equal(plan.launch[1].grid[0], rows[r].grid0);
        assert_int_equal((int)plan.launch[1].smem, rows[r].smem);
        assert_int_equal(plan.launch[1].threads, 256);
        /* 8 below the dim, a value dim of its own, a ragged query group: mma.sync */
        assert_int_equal(bwd_plan(d - 8, 9, 227 << 10, 0, &plan), FMSA_SUCCESS);
        assert_null(strstr(plan.instance, "_wg_"));
        assert_int_equal(bwd_plan_v(d, d == 64 ? 128 : 64, 9, 227 << 10, 0, &plan), FMSA_SUCCESS);
        assert_null(strstr(plan.instance, "_wg_"));
        bwd_plan_seqlen = 312;
        assert_int_equal(bwd_plan(d, 9, 227 << 10, 0, &plan), FMSA_SUCCESS);
        assert_null(strstr(plan.instance, "_wg_"));
        bwd_plan_seqlen = 320;
        /* FLASHMSA_CUDA_WGMMA=o0: the variant of this D (present where the
           kernels are built with their variants) */
        bwd_plan_wgmma = 2;
        assert_int_equal(bwd_plan(d, 9, 227 << 10, 0, &plan), FMSA_SUCCESS);
        assert_non_null(strstr(plan.instance, "_o0"));
        assert_non_null(strstr(plan.instance, rows[r].name));
        bwd_plan_wgmma = 2 + 5;
        assert_int_equal(bwd_plan(d, 9, 227 << 10, 0, &plan), FMSA_ERR_NOT_SUPPORTED);
        assert_non_null(strstr(fmsa_last_error(), "FLASHMSA_CUDA_WGMMA"));
        bwd_plan_wgmma = 0;
        assert_int_equal(bwd_plan(d, 9, 227 << 10, 0, &plan), FMSA_SUCCESS);
        assert_non_null(strstr(plan.instance, "fmsa_cuda_bwd_main_bf16_d"));
        bwd_plan_wgmma = 1;
    }
    bwd_plan_dtype = FMSA_DTYPE_F16;
    assert_int_equal(bwd_plan(256, 9, 227 << 10, 0, &plan), FMSA_SUCCESS);
    assert_string_equal(plan.instance, "fmsa_cuda_bwd_wg_f16_d256");
    bwd_plan_dtype = FMSA_DTYPE_BF16, bwd_plan_seqlen = 300, bwd_plan_wgmma = 0;
}

static void bwd_pick_value_dims(void **state) {
    fmsa_cuda_plan plan;
    (void)state;
    for (int cc = 8; cc <= 9; ++cc) {
        assert_non_null(strstr(bwd_pick_v(192, 128, cc, &plan), "_d192v128_m64_n64_k2_p2_"));
        assert_string_equal(plan.launch[0].kernel, "fmsa_cuda_bwd_pre_dv_bf16");
        assert_string_equal(plan.launch[2].kernel, "fmsa_cuda_bwd_post_bf16");
        assert_int_equal(plan.accum_dim, 192);  /* dQ's accumulator rows are D wide */
        assert_int_equal(plan.launch[1].grid[0], 5); /* 300 keys in 64-key blocks */
        assert_non_null(strstr(bwd_pick_v(136, 120, cc, &plan), "_d192v128_"));
        assert_non_null(strstr(bwd_pick_v(128, 64, cc, &plan), "_d192v128_"));
        assert_non_null(strstr(bwd_pick_v(8, 16, cc, &plan), "_d192v128_"));
        assert_non_null(strstr(bwd_pick_v(64, 256, cc, &plan), "_d64v256_m64_n64_k2_p2_"));
        assert_non_null(strstr(bwd_pick_v(56, 200, cc, &plan), "_d64v256_"));
        assert_non_null(strstr(bwd_pick_v(256, 64, cc, &plan), "_d256v256_m64_n64_k2_p1_"));
        assert_non_null(strstr(bwd_pick_v(200, 256, cc, &plan), "_d256v256_"));
        assert_non_null(strstr(bwd_pick_v(128, 192, cc, &plan), "_d256v256_"));
        /* square problems: the square rows and their preprocess */
        assert_non_null(strstr(bwd_pick_v(128, 128, cc, &plan), "_d128_m64_n128_k4_"));
        assert_string_equal(plan.launch[0].kernel, "fmsa_cuda_bwd_pre_bf16");
        assert_non_null(strstr(bwd_pick_v(256, 256, cc, &plan), "_d256_m64_"));
        assert_non_null(strstr(bwd_pick_v(192, 192, cc, &plan), "_d192_m64_"));
        /* above 256: (512, 512) up to 512, else (576, 512), on sm_90; refused naming both dims
           on sm_80 (shared memory); past (576, 512) or off the grid of 8:
           refused on both */
        if (cc >= 9) {
            assert_non_null(strstr(bwd_pick_v(576, 512, cc, &plan), "_d576v512_m64_n32_k2_p1_"));
            assert_int_equal(plan.accum_dim, 576);
            assert_non_null(strstr(bwd_pick_v(520, 264, cc, &plan), "_d576v512_"));
            assert_non_null(strstr(bwd_pick_v(576, 64, cc, &plan), "_d576v512_"));
            assert_non_null(strstr(bwd_pick_v(264, 128, cc, &plan), "_d512v512_"));
            assert_non_null(strstr(bwd_pick_v(128, 264, cc, &plan), "_d512v512_"));
            assert_non_null(strstr(bwd_pick_v(264, 264, cc, &plan), "_d512v512_"));
            assert_non_null(strstr(bwd_pick_v(512, 512, cc, &plan), "_d512v512_m64_n32_k2_p1_"));
            assert_non_null(strstr(bwd_pick_v(296, 504, cc, &plan), "_d512v512_"));
            assert_int_equal(plan.accum_dim, 512);
        } else {
            assert_null(bwd_pick_v(264, 128, cc, &plan));
            assert_non_null(strstr(fmsa_last_error(), "head_dim 264, head_dim_v 128"));
            assert_null(bwd_pick_v(576, 512, cc, &plan));
            assert_non_null(strstr(fmsa_last_error(), "head_dim 576, head_dim_v 512"));
        }
        assert_null(bwd_pick_v(576, 520, cc, &plan));
        assert_non_null(strstr(fmsa_last_error(), "head_dim 576 with head_dim_v 520"));
        assert_non_null(strstr(fmsa_last_error(), "up to 576 and 512"));
        assert_null(bwd_pick_v(584, 128, cc, &plan));
        assert_non_null(strstr(fmsa_last_error(), "head_dim 584"));
        assert_null(bwd_pick_v(128, 68, cc, &plan));
        assert_non_null(strstr(fmsa_last_error(), "head_dim_v 68"));
    }
}

/* Every instance row: a square row serves head_dim_v == head_dim only, a row
 * of a value head dim of its own says so, and its shared memory is K, V, Q,
 * dO tiles of their own widths (so a D = DV row of either kind costs the same). */
static void bwd_instance_rows(void **state) {
    int own = 0;
    (void)state;
    for (int i = 0; i < FMSA_CUDA_BWD_NUM_INSTANCES; ++i) {
        const fmsa_cuda_bwd_instance *c = &fmsa_cuda_bwd_instance_list[i];
        const size_t base = (size_t)FMSA_CUDA_BWD_SMEM_BASE_V(c->head_dim, c->head_dim_v, c->block_m,
                                                               c->block_n, c->stages);
        assert_true(c->head_dim <= FMSA_CUDA_BWD_MAX_DIM && c->head_dim_v <= FMSA_CUDA_BWD_MAX_DIM_V);
        if (!c->own_v) assert_int_equal(c->head_dim_v, c->head_dim);
        assert_int_equal((size_t)c->smem_main, base);
        assert_non_null(strstr(c->pre, c->own_v ? "_pre_dv_" : "_pre_"));
        own += c->own_v;
    }
    assert_int_equal(own, 10);
    assert_int_equal(FMSA_CUDA_BWD_SMEM_BASE_V(128, 128, 64, 128, 2), FMSA_CUDA_BWD_SMEM_BASE(128, 64, 128, 2));
}

/* The fp32 backward's pick (cuda_bwd_f32_instances.h): its own rows, pre and
 * post, the 16-bit list's dsink stage; the smallest D + DV that covers both
 * dims and fits (the 2-stage d256 row on sm_90 only), refused above 256. */
static void bwd_pick_f32(void **state) {
    fmsa_cuda_plan plan;
    (void)state;
    bwd_plan_dtype = FMSA_DTYPE_F32;
    for (int cc = 8; cc <= 9; ++cc) {
        const size_t optin = cc >= 9 ? 227u << 10 : 163u << 10;
        assert_int_equal(bwd_plan(64, cc, optin, 0, &plan), FMSA_SUCCESS);
        assert_string_equal(plan.instance, "fmsa_cuda_bwd_f32_main_d64v64_m64_n64_p2");
        assert_string_equal(plan.launch[0].kernel, "fmsa_cuda_bwd_pre_f32");
        assert_string_equal(plan.launch[2].kernel, "fmsa_cuda_bwd_post_f32");
        assert_int_equal(plan.launches, 3);
        assert_int_equal(plan.launch[1].smem, 140304);
        assert_int_equal(plan.launch[1].threads, 256);
        assert_int_equal(plan.launch[1].grid[0], 5); /* 300 keys in 64-key blocks */
        assert_int_equal(plan.launch[1].grid[1], 2), assert_int_equal(plan.launch[1].grid[2], 2);
        assert_int_equal(plan.accum_dim, 64);
        assert_int_equal(bwd_plan(8, cc, optin, 1, &plan), FMSA_SUCCESS);
        assert_non_null(strstr(plan.instance, "_d64v64_"));
        assert_int_equal(plan.launches, 4);
        assert_string_equal(plan.launch[3].kernel, "fmsa_cuda_bwd_dsink");
        assert_int_equal(bwd_plan(128, cc, optin, 0, &plan), FMSA_SUCCESS);
        assert_string_equal(plan.instance, "fmsa_cuda_bwd_f32_main_d128v128_m32_n64_p2");
        assert_int_equal(plan.launch[1].smem, 154128);
        assert_int_equal(bwd_plan(72, cc, optin, 0, &plan), FMSA_SUCCESS);
        assert_non_null(strstr(plan.instance, "_d128v128_"));
        assert_int_equal(plan.accum_dim, 128);
        assert_int_equal(bwd_plan(256, cc, optin, 0, &plan), FMSA_SUCCESS);
        assert_string_equal(plan.instance, cc >= 9 ? "fmsa_cuda_bwd_f32_main_d256v256_m32_n32_p2"
                                                   : "fmsa_cuda_bwd_f32_main_d256v256_m32_n32_p1");
        assert_int_equal(plan.launch[1].smem, cc >= 9 ? 209424 : 142608);
        assert_int_equal(plan.launch[1].grid[0], 10); /* 300 keys in 32-key blocks */
        assert_int_equal(bwd_plan_v(192, 128, cc, optin, 0, &plan), FMSA_SUCCESS);
        assert_non_null(strstr(plan.instance, "_d256v256_"));
        assert_int_equal(bwd_plan_v(64, 256, cc, optin, 0, &plan), FMSA_SUCCESS);
        assert_non_null(strstr(plan.instance, "_d256v256_"));
        assert_int_equal(bwd_plan_v(64, 40, cc, optin, 0, &plan), FMSA_SUCCESS);
        assert_non_null(strstr(plan.instance, "_d64v64_"));
        assert_int_equal(bwd_plan(264, cc, optin, 0, &plan), FMSA_ERR_NOT_SUPPORTED);
        assert_non_null(strstr(fmsa_last_error(), "cuda (backward): f32"));
        assert_non_null(strstr(fmsa_last_error(), "up to 256"));
        assert_int_equal(bwd_plan_v(128, 512, cc, optin, 0, &plan), FMSA_ERR_NOT_SUPPORTED);
        assert_non_null(strstr(fmsa_last_error(), "head_dim_v 512"));
    }
    /* every row: its shared memory is the kernel's layout, its tiles what the kernel's
       static_asserts need (16-key warps, pitches of 4 mod 16, chunks of <= 8 k-steps), and
       each head dim has a row within sm_80's 163 KiB */
    for (int i = 0; i < FMSA_CUDA_BWD_F32_NUM; ++i) {
        const fmsa_cuda_bwd_instance *c = &fmsa_cuda_bwd_f32_list[i];
        int fits80 = 0;
        assert_int_equal(c->smem_main, FMSA_CUDA_BWD_F32_SMEM(c->head_dim, c->head_dim_v,
                                                              c->block_m, c->block_n, c->stages));
        assert_true(c->own_v && c->head_dim <= FMSA_CUDA_BWD_F32_MAX_DIM &&
                    c->head_dim_v <= FMSA_CUDA_BWD_F32_MAX_DIM);
        assert_true(c->head_dim % 16 == 0 && c->head_dim_v % 16 == 0 && c->block_m % 16 == 0 &&
                    c->block_n % 16 == 0 && c->block_m <= 64 && c->block_n <= 64);
        for (int j = 0; j < FMSA_CUDA_BWD_F32_NUM; ++j)
            fits80 |= fmsa_cuda_bwd_f32_list[j].head_dim == c->head_dim &&
                      fmsa_cuda_bwd_f32_list[j].smem_main <= 163 << 10;
        assert_true(fits80);
    }
    /* a device whose opt-in memory holds no row: refused naming the shared memory */
    assert_int_equal(bwd_plan(64, 8, 100 << 10, 0, &plan), FMSA_ERR_NOT_SUPPORTED);
    assert_non_null(strstr(fmsa_last_error(), "shared memory"));
    bwd_plan_dtype = FMSA_DTYPE_BF16;
}

/* dlse, sinks and dsink reach the backward's params with their own strides. */
static void bwd_params_dlse_sinks(void **state) {
    fmsa_problem p = fwd_problem();
    const fmsa_cuda_plan plan = plan_with_splits();
    fmsa_cuda_bwd_params b;
    (void)state;
    p.pass = FMSA_PASS_BACKWARD;
    p.has_dlse = p.has_sinks = p.has_dsink = 1;
    p.dlse.data = DEV(24), p.dlse.byte_offset = 8, p.dlse.s0 = 3000, p.dlse.s1 = 200, p.dlse.s2 = 2;
    p.sinks.data = DEV(25), p.sinks.byte_offset = 4, p.sinks.s0 = 3;
    p.dsink.data = DEV(26), p.dsink.byte_offset = 12, p.dsink.s0 = 5;
    fmsa_cuda_bwd_params_fill(&p, &plan, (fmsa_cu_deviceptr)AT(9, 0), (fmsa_cu_deviceptr)AT(8, 0),
                              &b);
    assert_int_equal((uintptr_t)b.dlse, AT(24, 8));
    assert_int_equal(b.dlse_sb, 3000), assert_int_equal(b.dlse_sh, 200), assert_int_equal(b.dlse_ss, 2);
    assert_int_equal((uintptr_t)b.sink_logits, AT(25, 4));
    assert_int_equal(b.sink_logits_s, 3);
    assert_int_equal((uintptr_t)b.dsinks, AT(26, 12));
    assert_int_equal(b.dsinks_s, 5);
}

static void embedded_fatbins(void **state) {
    (void)state;
    assert_true(fmsa_cuda_fatbin_count >= 1);
    for (int i = 0; i < fmsa_cuda_fatbin_count; ++i) {
        const unsigned char *d = fmsa_cuda_fatbins[i].data;
        assert_true(fmsa_cuda_fatbins[i].end - d > 64);
        /* fatbin magic 0xBA55ED50, little-endian */
        assert_int_equal(d[0], 0x50), assert_int_equal(d[1], 0xED);
        assert_int_equal(d[2], 0x55), assert_int_equal(d[3], 0xBA);
        assert_int_equal((uintptr_t)d % 8, 0);
    }
}

static void no_device_is_clean(void **state) {
    const fmsa_backend_vtable *vt = fmsa_backend_cuda_vtable();
    fmsa_context *ctx = NULL;
    fmsa_device_info info;
    int n = -1, total = 0;
    (void)state;
    assert_int_equal(vt->device_count(&n), FMSA_SUCCESS);
    assert_int_equal(n, 0);
    assert_null(fmsa_cuda_load());
    assert_true(strlen(fmsa_cuda_load_error()) > 0);
    assert_int_equal(fmsa_device_count(&total), FMSA_SUCCESS);
    for (int i = 0; i < total; ++i) {
        assert_int_equal(fmsa_device_get(i, &info), FMSA_SUCCESS);
        assert_int_not_equal(info.backend, FMSA_BACKEND_CUDA);
    }
    assert_int_equal(fmsa_context_create(FMSA_BACKEND_CUDA, 0, &ctx), FMSA_ERR_BACKEND_UNAVAILABLE);
    assert_null(ctx);
    assert_non_null(strstr(fmsa_last_error(), "cuda"));
    assert_int_equal(vt->context_create(0, (void **)&ctx), FMSA_ERR_BACKEND_UNAVAILABLE);
    assert_non_null(strstr(fmsa_last_error(), fmsa_cuda_load_error()));
}

static void cpu_still_runs(void **state) {
    enum { S = 24, H = 2, D = 16 };
    float q[S * H * D], o[S * H * D];
    const int64_t shape[4] = {1, S, H, D};
    fmsa_context *ctx = NULL;
    fmsa_attention_desc desc = fmsa_attention_desc_init(D);
    fmsa_tensor tq, to;
    (void)state;
    for (int i = 0; i < S * H * D; ++i) q[i] = (float)((i * 37) % 17) / 17.0f - 0.5f, o[i] = -1.0f;
    tq = fmsa_tensor_contiguous(q, FMSA_DTYPE_F32, 4, shape);
    to = fmsa_tensor_contiguous(o, FMSA_DTYPE_F32, 4, shape);
    assert_int_equal(fmsa_context_create(FMSA_BACKEND_CPU, 0, &ctx), FMSA_SUCCESS);
    desc.causal = 1;
    assert_int_equal(fmsa_forward(ctx, &desc, &tq, &tq, &tq, &to, NULL, NULL, 0, NULL),
                     FMSA_SUCCESS);
    /* row 0 sees only key 0: o = v_0 = q_0 exactly */
    for (int d = 0; d < D; ++d) assert_true(o[d] == q[d]);
    fmsa_context_destroy(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fwd_params_from_problem),
        cmocka_unit_test(fwd_params_varlen_and_paged),
        cmocka_unit_test(bwd_params_from_problem),
        cmocka_unit_test(bwd_params_dlse_sinks),
        cmocka_unit_test(bwd_pick_by_device),
        cmocka_unit_test(bwd_pick_value_dims),
        cmocka_unit_test(bwd_pick_hopper),
        cmocka_unit_test(fwd_pick_hopper),
        cmocka_unit_test(bwd_instance_rows),
        cmocka_unit_test(bwd_pick_f32),
        cmocka_unit_test(validation_defers_metadata_reads),
        cmocka_unit_test(validation_defers_block_table),
        cmocka_unit_test(plan_refusals),
        cmocka_unit_test(fwd_pick_value_dims),
        cmocka_unit_test(embedded_fatbins),
        cmocka_unit_test(no_device_is_clean),
        cmocka_unit_test(cpu_still_runs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
