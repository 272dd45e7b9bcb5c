/*
 * The CUDA tile choice, without a device: the planner's rows
 * (common/plan_tables/cuda_mma.c) and the compiled instances
 * (backends/cuda/cuda_fwd_instances.h, cuda_bwd_instances.h,
 * cuda_bwd_f32_instances.h) are one to one -- every row has its kernel in
 * each dtype it serves, with the same tile, warps, stages and shared memory,
 * and every kernel has its row -- and the planner's choice is the instance
 * lists' rule (the smallest D + D_v that covers the problem and fits, the
 * earlier row on a tie) for every head-dim pair on the devices we target.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "backends/cuda/cuda_bwd_f32_instances.h"
#include "backends/cuda/cuda_bwd_instances.h"
#include "backends/cuda/cuda_fwd_instances.h"
#include "common/planner.h"

#define KIB 1024
#define MAX_DIM 576

static fmsa_device_info cuda_dev(const char *arch, size_t optin) {
    fmsa_device_info d;
    memset(&d, 0, sizeof d);
    d.backend = FMSA_BACKEND_CUDA;
    snprintf(d.arch, sizeof d.arch, "%s", arch);
    d.sram_per_block = 48 * KIB;
    d.sram_per_block_optin = optin;
    d.multiprocessors = 132;
    d.warp_size = 32;
    return d;
}

static const fmsa_arch_table *cuda_table(void) {
    fmsa_device_info d = cuda_dev("sm90", 227 * KIB);
    const fmsa_arch_table *t = fmsa_plan_find_table(&d);
    assert_non_null(t);
    return t;
}

static int fwd_variant_of(const fmsa_tile_row *r) {
    return r->not_with ? FMSA_CUDA_FWD_FAST : FMSA_CUDA_FWD_FULL;
}

static int fwd_row_instance(const fmsa_tile_row *r, int dt) {
    return fmsa_cuda_fwd_instance_of(dt, fwd_variant_of(r), r->max_head_dim, r->max_head_dim_v,
                                     r->warps, r->block_m, r->block_n, r->stages,
                                     (long long)r->sram_bytes);
}

static const fmsa_cuda_bwd_instance *bwd_row_instance(const fmsa_tile_row *r, fmsa_dtype dt,
                                                      int cc, int masked) {
    return fmsa_cuda_bwd_instance_of(dt, r->max_head_dim, r->max_head_dim_v, r->block_m,
                                     r->block_n, r->stages, r->sram_bytes, cc, masked);
}

/* Two instances are the same tile: a row's variants (with and without OPT bit 15). */
static int same_tile(const fmsa_cuda_bwd_instance *a, const fmsa_cuda_bwd_instance *b) {
    if (!a || !b) return a == b;
    return a->bf16 == b->bf16 && a->head_dim == b->head_dim && a->head_dim_v == b->head_dim_v &&
           a->own_v == b->own_v && a->block_m == b->block_m && a->block_n == b->block_n &&
           a->stages == b->stages && a->smem_main == b->smem_main;
}

/* Every row: its kernel in each dtype of its class, on both compute
 * capabilities; every kernel (main, not the split decode ones): one row. */
static void rows_and_instances_are_one_to_one(void **state) {
    const fmsa_arch_table *t = cuda_table();
    int n, i, r, hits;
    const fmsa_cuda_fwd_instance *fi = fmsa_cuda_fwd_instance_table(&n);
    (void)state;
    for (r = 0; r < t->num_rows; ++r) {
        const fmsa_tile_row *row = &t->rows[r];
        const int f32 = row->dtypes == FMSA_PLAN_DTYPES_F32;
        /* RUN but the forward's wgmma row, which has run on the host emulation only */
        assert_int_equal(row->verified,
                         !(row->pass == FMSA_PASS_FORWARD && row->dtypes == FMSA_PLAN_DTYPES_16BIT_WGMMA));
        assert_true(row->sram_bytes > 0);
        if (row->pass == FMSA_PASS_FORWARD) {
            if (f32) assert_true(fwd_row_instance(row, FMSA_CUDA_DT_F32) >= 0);
            else assert_true(fwd_row_instance(row, FMSA_CUDA_DT_BF16) >= 0 &&
                             fwd_row_instance(row, FMSA_CUDA_DT_F16) >= 0);
        } else {
            for (int cc = 8; cc <= 9; ++cc) {
                for (int masked = 0; masked < 2; ++masked) {
                    if (f32) assert_non_null(bwd_row_instance(row, FMSA_DTYPE_F32, cc, masked));
                    else assert_true(bwd_row_instance(row, FMSA_DTYPE_BF16, cc, masked) &&
                                     bwd_row_instance(row, FMSA_DTYPE_F16, cc, masked));
                }
            }
        }
    }
    for (i = 0; i < n; ++i) {
        hits = 0;
        for (r = 0; r < t->num_rows; ++r) {
            const fmsa_tile_row *row = &t->rows[r];
            if (row->pass == FMSA_PASS_FORWARD &&
                (row->dtypes == FMSA_PLAN_DTYPES_F32) == (fi[i].dtype == FMSA_CUDA_DT_F32) &&
                fwd_row_instance(row, fi[i].dtype) == i)
                ++hits;
        }
        if (hits != 1) fail_msg("forward instance %s has %d rows", fi[i].name, hits);
    }
    for (i = 0; i < FMSA_CUDA_BWD_NUM_INSTANCES + FMSA_CUDA_BWD_WG_NUM + FMSA_CUDA_BWD_F32_NUM; ++i) {
        const int j = i - FMSA_CUDA_BWD_NUM_INSTANCES;
        const fmsa_cuda_bwd_instance *c = j < 0                      ? &fmsa_cuda_bwd_instance_list[i]
                                          : j < FMSA_CUDA_BWD_WG_NUM ? &fmsa_cuda_bwd_wg_list[j]
                                                                     : &fmsa_cuda_bwd_f32_list[j - FMSA_CUDA_BWD_WG_NUM];
        const fmsa_dtype dt = c->bf16 < 0 ? FMSA_DTYPE_F32 : c->bf16 ? FMSA_DTYPE_BF16 : FMSA_DTYPE_F16;
        hits = 0;
        for (r = 0; r < t->num_rows; ++r)
            if (t->rows[r].pass == FMSA_PASS_BACKWARD &&
                bwd_row_instance(&t->rows[r], dt, 9, c->cut_full) == c)
                ++hits;
        if (hits != 1) fail_msg("backward instance %s has %d rows", c->main, hits);
    }
}

/* The devices: H100/H200 (227 KiB opt-in), A100 (163), sm86/89 (99), none (48). */
static const struct {
    const char *arch;
    size_t optin;
    int cc;
} devices[] = {{"sm90", 227 * KIB, 9}, {"sm80", 163 * KIB, 8}, {"sm86", 99 * KIB, 8},
               {"sm80", 0, 8}};

static int plan_row_caps(const fmsa_device_info *d, fmsa_pass pass, fmsa_dtype dt, unsigned feat,
                         int D, int Dv, unsigned caps, const fmsa_tile_row **row) {
    fmsa_plan_request q;
    fmsa_tile_plan p;
    memset(&q, 0, sizeof q);
    q.head_dim = D, q.head_dim_v = Dv, q.dtype = dt, q.pass = pass, q.features = feat, q.caps = caps;
    q.seqlen_q = q.seqlen_k = 4096, q.batch_heads = 64;
    if (fmsa_plan_tiles(d, &q, &p) != FMSA_SUCCESS) return 0;
    *row = p.row;
    return 1;
}

static int plan_row(const fmsa_device_info *d, fmsa_pass pass, fmsa_dtype dt, unsigned feat,
                    int D, int Dv, const fmsa_tile_row **row) {
    return plan_row_caps(d, pass, dt, feat, D, Dv, 0u, row);
}

/* The forward: the planned row's instance is fmsa_cuda_fwd_select's, except
 * where no instance of the problem's variant fits: there the planner may take
 * a FULL row (every feature behind run-time checks) for a FAST problem. */
static void forward_plan_is_the_instance_rule(void **state) {
    const int dts[3] = {FMSA_CUDA_DT_BF16, FMSA_CUDA_DT_F16, FMSA_CUDA_DT_F32};
    const fmsa_dtype pdt[3] = {FMSA_DTYPE_BF16, FMSA_DTYPE_F16, FMSA_DTYPE_F32};
    long long agree = 0;
    (void)state;
    for (size_t k = 0; k < sizeof devices / sizeof devices[0]; ++k) {
        const fmsa_device_info d = cuda_dev(devices[k].arch, devices[k].optin);
        const long long smem = devices[k].optin ? (long long)devices[k].optin : 48 * KIB;
        for (int t = 0; t < 3; ++t)
            for (int full = 0; full < 2; ++full)
                for (int D = 8; D <= MAX_DIM; D += 8)
                    for (int Dv = 8; Dv <= MAX_DIM; Dv += 8) {
                        fmsa_cuda_fwd_params fp;
                        const fmsa_tile_row *row = NULL;
                        int want, got = -1;
                        memset(&fp, 0, sizeof fp);
                        fp.batch = 2, fp.heads_q = 8, fp.heads_kv = 2;
                        fp.head_dim = D, fp.head_dim_v = Dv, fp.alibi = full ? (const float *)8 : NULL;
                        want = fmsa_cuda_fwd_select(dts[t], &fp, smem);
                        if (plan_row(&d, FMSA_PASS_FORWARD, pdt[t], full ? FMSA_FEAT_ALIBI : 0u, D,
                                     Dv, &row))
                            got = fwd_row_instance(row, dts[t]);
                        if (want >= 0 && got != want)
                            fail_msg("%s fwd dt %d full %d (%d, %d): planner %d, rule %d",
                                     d.arch, dts[t], full, D, Dv, got, want);
                        if (want < 0 && got >= 0 && (full || fwd_variant_of(row) != FMSA_CUDA_FWD_FULL))
                            fail_msg("%s fwd dt %d full %d (%d, %d): planner %s where the rule has none",
                                     d.arch, dts[t], full, D, Dv, row->name);
                        agree += want >= 0;
                    }
    }
    assert_true(agree > 10000);
}

/* The backward: the planned row's instance is fmsa_cuda_bwd_select's (16-bit)
 * or fmsa_cuda_bwd_f32_select's tile everywhere, and of a row's two variants
 * the one with OPT bit 15 exactly where the problem is causal / windowed. */
static void backward_plan_is_the_instance_rule(void **state) {
    const fmsa_dtype dts[3] = {FMSA_DTYPE_BF16, FMSA_DTYPE_F16, FMSA_DTYPE_F32};
    long long agree = 0;
    (void)state;
    for (size_t k = 0; k < sizeof devices / sizeof devices[0]; ++k) {
        const fmsa_device_info d = cuda_dev(devices[k].arch, devices[k].optin);
        const size_t smem = devices[k].optin ? devices[k].optin : 48 * KIB;
        for (int t = 0; t < 3; ++t)
            for (int D = 8; D <= MAX_DIM; D += 8)
                for (int Dv = 8; Dv <= MAX_DIM; Dv += 8) {
                    const fmsa_tile_row *row = NULL;
                    const fmsa_cuda_bwd_instance *want =
                        dts[t] == FMSA_DTYPE_F32
                            ? fmsa_cuda_bwd_f32_select(D, Dv, smem)
                            : fmsa_cuda_bwd_select(dts[t], D, Dv, smem, devices[k].cc);
                    for (int masked = 0; masked < 2; ++masked) {
                        const fmsa_cuda_bwd_instance *got = NULL;
                        if (plan_row(&d, FMSA_PASS_BACKWARD, dts[t],
                                     masked ? FMSA_FEAT_CAUSAL : 0u, D, Dv, &row))
                            got = bwd_row_instance(row, dts[t], devices[k].cc, masked);
                        if (!same_tile(got, want))
                            fail_msg("%s bwd dt %d (%d, %d): planner %s, rule %s", d.arch,
                                     (int)dts[t], D, Dv, got ? got->main : "none",
                                     want ? want->main : "none");
                        if (got && want && got != want && got->cut_full != masked)
                            fail_msg("%s bwd dt %d (%d, %d) masked %d: %s", d.arch, (int)dts[t],
                                     D, Dv, masked, got->main);
                        agree += want != NULL;
                    }
                }
    }
    assert_true(agree > 10000);
}

/* The Hopper (wgmma) backward: the planner's W16 rows (d64, d128, d256), taken
 * only with FMSA_PLAN_CAP_WGMMA and none of their not_with features, ahead
 * of the mma.sync row of their D whose geometry and workspace the instances
 * keep; the cap is asked only for the passes the kernels serve beyond those
 * features (fmsa_cuda_bwd_wg_serves), each exclusion alone withholding it. */
static void hopper_backward_is_the_wgmma_row_where_it_serves(void **state) {
    const fmsa_dtype dts[2] = {FMSA_DTYPE_BF16, FMSA_DTYPE_F16};
    const int dims[3] = {64, 128, 256};
    const char *names[3] = {"cuda-bwd-d64-wgmma-128x128-p2", "cuda-bwd-d128-wgmma-64x128-p2",
                            "cuda-bwd-d256-wgmma-64x64-p2"};
    const unsigned not_with[5] = {FMSA_FEAT_SOFTCAP, FMSA_FEAT_ALIBI, FMSA_FEAT_MASK, FMSA_FEAT_VARLEN,
                                  FMSA_FEAT_PAGED};
    const fmsa_device_info d = cuda_dev("sm90", 227 * KIB);
    (void)state;
    for (int t = 0; t < 6; ++t) {
        const int dim = dims[t / 2];
        const fmsa_cuda_bwd_instance *mma = fmsa_cuda_bwd_select(dts[t % 2], dim, dim, 227 * KIB, 9);
        const fmsa_tile_row *row = NULL;
        const fmsa_cuda_bwd_instance *wg;
        fmsa_cuda_bwd_params p, q;
        int listed = 0;
        assert_non_null(mma);
        assert_true(plan_row_caps(&d, FMSA_PASS_BACKWARD, dts[t % 2], FMSA_FEAT_CAUSAL, dim, dim,
                                  FMSA_PLAN_CAP_WGMMA, &row));
        assert_string_equal(row->name, names[t / 2]);
        wg = bwd_row_instance(row, dts[t % 2], 9, 1);
        assert_non_null(wg);
        for (int i = 0; i < FMSA_CUDA_BWD_WG_NUM; ++i) listed += wg == &fmsa_cuda_bwd_wg_list[i];
        assert_int_equal(listed, 1);
        assert_ptr_equal(fmsa_cuda_bwd_wg_variant(wg, 1), wg);
        /* a development variant is one of the instance's own D and dtype */
        if (wg->bf16) {
            const fmsa_cuda_bwd_instance *v = fmsa_cuda_bwd_wg_variant(wg, 2);
            assert_non_null(v);
            assert_int_equal(v->head_dim, dim), assert_int_equal(v->block_m, wg->block_m);
            assert_int_equal(v->wg_opt, 0);
        } else
            assert_null(fmsa_cuda_bwd_wg_variant(wg, 2));
        assert_int_equal(wg->bf16, mma->bf16);
        assert_int_equal(wg->head_dim, mma->head_dim), assert_int_equal(wg->head_dim_v, mma->head_dim_v);
        assert_int_equal(wg->block_m, mma->block_m), assert_int_equal(wg->block_n, mma->block_n);
        assert_int_equal(wg->stages, mma->stages), assert_int_equal(wg->threads_main, mma->threads_main);
        assert_int_equal(wg->threads_aux, mma->threads_aux);
        assert_string_equal(wg->pre, mma->pre);
        assert_string_equal(wg->post, mma->post); /* the tiled accumulator's postprocess */
        assert_true(strstr(wg->post, "post_t_") != NULL);
        assert_true(fmsa_cuda_bwd_smem(wg, 9) <= 227 * KIB);
        /* the planner: without the cap, or with a feature of not_with, the mma.sync row */
        assert_true(plan_row_caps(&d, FMSA_PASS_BACKWARD, dts[t % 2], FMSA_FEAT_CAUSAL, dim, dim, 0u, &row));
        assert_ptr_equal(bwd_row_instance(row, dts[t % 2], 9, 1), mma);
        for (int f = 0; f < 5; ++f) {
            assert_true(plan_row_caps(&d, FMSA_PASS_BACKWARD, dts[t % 2], not_with[f], dim, dim,
                                      FMSA_PLAN_CAP_WGMMA, &row));
            if (strstr(row->name, "wgmma"))
                fail_msg("d%d dt %d: feature %u takes %s", dim, (int)dts[t % 2], not_with[f], row->name);
        }
        /* the cap: asked for the base pass, withheld for each exclusion */
        memset(&p, 0, sizeof p);
        p.fwd.head_dim = p.fwd.head_dim_v = dim;
        p.fwd.batch = 2, p.fwd.seqlen_q = p.fwd.total_q = 1024, p.fwd.seqlen_k = p.fwd.total_k = 1000;
        p.fwd.heads_q = 8, p.fwd.heads_kv = 2;
        p.fwd.window_left = 100, p.fwd.window_right = 0;
        assert_true(fmsa_cuda_bwd_wg_serves(&p, 1));
        assert_false(fmsa_cuda_bwd_wg_serves(&p, 0));
#define WITHHOLDS(change)                                                                     \
    do {                                                                                      \
        q = p;                                                                                \
        change;                                                                               \
        if (fmsa_cuda_bwd_wg_serves(&q, 1)) fail_msg("d%d dt %d: cap asked with %s", dim, (int)dts[t % 2], #change); \
    } while (0)
        WITHHOLDS(q.deterministic = 1);
        WITHHOLDS(q.fwd.has_seqused_k = 1);
        WITHHOLDS(q.fwd.seqlen_q = q.fwd.total_q = 1000);
        WITHHOLDS(q.fwd.total_q = 2048);
        WITHHOLDS(q.fwd.head_dim = q.fwd.head_dim_v = dim - 8);
        WITHHOLDS(q.fwd.head_dim_v = dim == 64 ? 128 : 64);
#undef WITHHOLDS
    }
}

/* The Hopper forward: with the cap, d128 / d256 bf16 / f16 FAST problems (causal
 * and windows included) take the wgmma row, whose instance is the Hopper one
 * of the dtype; without the cap, or with a feature of not_with, the mma.sync
 * row; the cap is asked for exactly where the kernel serves the problem
 * (fmsa_cuda_fwd_wg_serves), each exclusion alone withholding it. */
static void hopper_forward_is_the_wgmma_row_where_it_serves(void **state) {
    const fmsa_dtype pdt[2] = {FMSA_DTYPE_BF16, FMSA_DTYPE_F16};
    const int dts[2] = {FMSA_CUDA_DT_BF16, FMSA_CUDA_DT_F16}, dims[2] = {128, 256};
    const char *names[2] = {"cuda-fwd-d128-wgmma-128x128-p2", "cuda-fwd-d256-wgmma-128x64-p2"};
    const char *kernels[2][2] = {{"_bf16_d128_ovl", "_f16_d128_ovl"}, {"_bf16_d256_ovl", "_f16_d256_ovl"}};
    const unsigned not_with[5] = {FMSA_FEAT_SOFTCAP, FMSA_FEAT_ALIBI, FMSA_FEAT_MASK, FMSA_FEAT_VARLEN,
                                  FMSA_FEAT_PAGED};
    const fmsa_device_info d = cuda_dev("sm90", 227 * KIB);
    int n;
    const fmsa_cuda_fwd_instance *fi = fmsa_cuda_fwd_instance_table(&n);
    (void)state;
    for (int t = 0; t < 4; ++t) {
        const int dim = dims[t / 2];
        const fmsa_tile_row *row = NULL;
        fmsa_cuda_fwd_params p, q;
        int i;
        for (unsigned feat = 0; feat <= FMSA_FEAT_CAUSAL; ++feat) {
            assert_true(plan_row_caps(&d, FMSA_PASS_FORWARD, pdt[t % 2], feat, dim, dim, FMSA_PLAN_CAP_WGMMA, &row));
            assert_string_equal(row->name, names[t / 2]);
        }
        i = fwd_row_instance(row, dts[t % 2]);
        assert_true(i >= 0);
        assert_non_null(fi[i].serial);
        assert_int_equal(fi[i].threads, 256), assert_int_equal(fi[i].dtype, dts[t % 2]);
        assert_int_equal(fi[i].head_dim, dim), assert_int_equal(fi[i].head_dim_v, dim);
        assert_non_null(strstr(fi[i].name, kernels[t / 2][t % 2]));
        assert_true(fi[i].smem_bytes <= 227 * KIB);
        /* without the cap, or with a feature of not_with: an mma.sync row */
        assert_true(plan_row_caps(&d, FMSA_PASS_FORWARD, pdt[t % 2], FMSA_FEAT_CAUSAL, dim, dim, 0u, &row));
        assert_null(fi[fwd_row_instance(row, dts[t % 2])].serial);
        for (int f = 0; f < 5; ++f) {
            assert_true(plan_row_caps(&d, FMSA_PASS_FORWARD, pdt[t % 2], not_with[f], dim, dim,
                                      FMSA_PLAN_CAP_WGMMA, &row));
            if (strstr(row->name, "wgmma")) fail_msg("d%d dt %d: feature %u takes %s", dim, dts[t % 2], not_with[f], row->name);
        }
        /* the cap: asked for the base pass, withheld for each exclusion */
        memset(&p, 0, sizeof p);
        p.head_dim = p.head_dim_v = dim;
        p.batch = 2, p.seqlen_q = p.total_q = 1000, p.seqlen_k = p.total_k = 1000;
        p.heads_q = 8, p.heads_kv = 2, p.window_left = 100, p.window_right = 0;
        assert_true(fmsa_cuda_fwd_wg_serves(&p, 1));
        assert_true(fmsa_cuda_fwd_wg_serves(&p, 2));
        assert_false(fmsa_cuda_fwd_wg_serves(&p, 0));
#define WITHHOLDS(change)                                                                         \
    do {                                                                                          \
        q = p;                                                                                    \
        change;                                                                                   \
        if (fmsa_cuda_fwd_wg_serves(&q, 1)) fail_msg("d%d dt %d: cap asked with %s", dim, dts[t % 2], #change); \
    } while (0)
        WITHHOLDS(q.head_dim = q.head_dim_v = dim - 8);
        WITHHOLDS(q.head_dim_v = 64);
        WITHHOLDS(q.is_varlen = 1);
        WITHHOLDS(q.has_seqused_k = 1);
        WITHHOLDS(q.sinks = (const float *)8);
        WITHHOLDS(q.softcap = 30.0f);
        WITHHOLDS(q.alibi = (const float *)8);
        WITHHOLDS(q.mask = (const unsigned char *)8);
        WITHHOLDS(q.is_paged = 1);
#undef WITHHOLDS
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(hopper_forward_is_the_wgmma_row_where_it_serves),
        cmocka_unit_test(rows_and_instances_are_one_to_one),
        cmocka_unit_test(forward_plan_is_the_instance_rule),
        cmocka_unit_test(backward_plan_is_the_instance_rule),
        cmocka_unit_test(hopper_backward_is_the_wgmma_row_where_it_serves),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
