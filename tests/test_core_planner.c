/*
 * The tile planner and the split-KV heuristic, checked against their
 * documented contract rather than against themselves:
 *
 * - every table row is well formed and respects its architecture's matrix
 *   instruction / SIMD granularity (rules written out here, per arch);
 * - for a sweep of synthetic devices (each arch at its real limits, tiny
 *   16 KiB, huge, zero, unknown archs) x every head dim 8..256 x dtype x
 *   pass x feature combination, the plan is the first applicable row whose
 *   SRAM estimate -- recomputed here from the formulas documented in
 *   common/plan_tables/plan_tables.h -- fits the limit, sram_bytes is that estimate and
 *   within the limit, and NOT_SUPPORTED comes back exactly when no row fits,
 *   with a message naming arch, head dim and limit;
 * - the flagship shapes the tables claim (FA3's 128x176 etc.) are what the
 *   real devices get;
 * - num_splits stays in [1, key tiles], leaves no split empty, is 1 for
 *   prefill shapes, is > 1 for long decodes, and on the CPU never depends
 *   on the core count.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/planner.h"
#include "common/problem.h"

#define KIB ((size_t)1024)

static fmsa_device_info mkdev(fmsa_backend backend, const char *arch, size_t sram,
                              size_t optin, int sms, int warp) {
    fmsa_device_info d;
    memset(&d, 0, sizeof d);
    d.backend = backend;
    snprintf(d.arch, sizeof d.arch, "%s", arch);
    snprintf(d.name, sizeof d.name, "synthetic %s", arch);
    d.sram_per_block = sram;
    d.sram_per_block_optin = optin;
    d.sram_per_multiprocessor = optin > sram ? optin : sram;
    d.multiprocessors = sms;
    d.warp_size = warp;
    d.global_memory = (size_t)1 << 34;
    return d;
}

/* ------------------------------------------------------------------------ */
/* The documented model, written out again (not calling the planner's).     */
/* ------------------------------------------------------------------------ */

static size_t limit_of(const fmsa_device_info *d) {
    size_t l = d->sram_per_block_optin > 0 ? d->sram_per_block_optin : d->sram_per_block;
    if (d->backend == FMSA_BACKEND_CPU && l < 256 * KIB) l = 256 * KIB;
    return l;
}

static int64_t rup(int64_t x, int64_t q) { return (x + q - 1) / q * q; }

static int64_t cpu_width(const fmsa_device_info *d, const fmsa_arch_table *t) {
    return d->warp_size > 0 ? d->warp_size : (t->simd_width > 0 ? t->simd_width : 1);
}

/* Bytes per the formulas in the common/plan_tables/plan_tables.h header comment. */
static size_t model_bytes(const fmsa_arch_table *t, const fmsa_tile_row *r, int64_t D,
                          fmsa_dtype dt, int64_t bm, int64_t bn) {
    int64_t d = t->pad_head_dim ? r->max_head_dim : D, st = r->stages;
    int64_t e = dt == FMSA_DTYPE_F32 ? 4 : 2;
    int64_t b = 0;
    unsigned f = r->sram;
    if (t->model == FMSA_SRAM_MODEL_NONE) return 0; /* private memory only */
    if (r->sram_bytes) return r->sram_bytes;        /* a compiled kernel's own bytes */
    if (t->model == FMSA_SRAM_MODEL_CPU && r->dtypes == FMSA_PLAN_DTYPES_BF16_MMA) {
        if (r->pass == FMSA_PASS_FORWARD)
            return (size_t)(2 * (bm * d + 2 * bn * d + bm * bn) + 4 * (bm * bn + bm * d + 2 * bm));
        return (size_t)(2 * (2 * bm * d + 2 * bn * d + 2 * bm * bn) +
                        4 * (2 * bm * bn + 2 * bn * d + bm * d + 2 * bm));
    }
    if (t->model == FMSA_SRAM_MODEL_CPU) {
        if (r->pass == FMSA_PASS_FORWARD) return (size_t)(4 * (bm * d + 2 * bn * d + bm * bn + bm * d + 2 * bm));
        return (size_t)(4 * (2 * bm * d + 4 * bn * d + bm * d + 2 * bm * bn + 2 * bm));
    }
    if (r->pass == FMSA_PASS_FORWARD) {
        b = ((f & FMSA_TILE_Q_SRAM) ? bm * d * e : 0) + st * 2 * bn * d * e +
            ((f & FMSA_TILE_P_SRAM) ? bm * bn * e : 0);
    } else {
        b = ((f & FMSA_TILE_Q_SRAM) ? st * 2 * bm * d * e : 0) +
            ((f & FMSA_TILE_KV_REGS) ? 0 : 2 * bn * d * e) +
            ((f & FMSA_TILE_P_SRAM) ? 2 * bm * bn * e + st * 2 * bm * 4 : 0) +
            ((f & FMSA_TILE_DQ_SRAM) ? bm * d * 4 : 0);
    }
    return (size_t)b;
}

static int applies(const fmsa_tile_row *r, const fmsa_plan_request *q) {
    int is16 = q->dtype == FMSA_DTYPE_F16 || q->dtype == FMSA_DTYPE_BF16;
    int64_t dv = q->head_dim_v > 0 ? q->head_dim_v : q->head_dim;
    return r->pass == q->pass && q->head_dim <= r->max_head_dim &&
           !(r->max_head_dim_v == FMSA_PLAN_DV_SAME && dv != q->head_dim) &&
           !(r->max_head_dim_v > 0 && dv > r->max_head_dim_v) &&
           !(r->dtypes == FMSA_PLAN_DTYPES_16BIT && !is16) &&
           !(r->dtypes == FMSA_PLAN_DTYPES_F32 && q->dtype != FMSA_DTYPE_F32) &&
           !(r->dtypes == FMSA_PLAN_DTYPES_BF16_MMA &&
             (q->dtype != FMSA_DTYPE_BF16 || !(q->caps & FMSA_PLAN_CAP_BF16_MMA))) &&
           !(r->dtypes == FMSA_PLAN_DTYPES_16BIT_WGMMA && (!is16 || !(q->caps & FMSA_PLAN_CAP_WGMMA))) &&
           !(r->not_with & q->features);
}

typedef struct expect {
    const fmsa_tile_row *row; /* NULL: nothing fits */
    int64_t bm, bn;
    size_t bytes;
    int any_applicable;
} expect;

/* First applicable row that fits; on the CPU prefer one whose micro-kernel B
 * sliver (32 columns of a K or V tile) fits 3/4 of L1. */
static expect model_plan(const fmsa_device_info *d, const fmsa_arch_table *t,
                         const fmsa_plan_request *q) {
    expect e = {0}, fallback = {0};
    size_t lim = limit_of(d);
    size_t l1 = d->sram_per_block > 0 ? d->sram_per_block : 32 * KIB;
    for (int i = 0; i < t->num_rows; i++) {
        const fmsa_tile_row *r = &t->rows[i];
        int64_t bm = r->block_m, bn = r->block_n;
        size_t by;
        if (!applies(r, q)) continue;
        e.any_applicable = fallback.any_applicable = 1;
        if (t->model == FMSA_SRAM_MODEL_CPU) {
            bm = rup(bm, cpu_width(d, t));
            bn = rup(bn, cpu_width(d, t));
        }
        by = model_bytes(t, r, q->head_dim, q->dtype, bm, bn);
        if (by > lim) continue;
        if (!fallback.row) {
            fallback.row = r;
            fallback.bm = bm;
            fallback.bn = bn;
            fallback.bytes = by;
        }
        /* CPU: prefer a B sliver in L1, except on the bf16-product rows (their
         * kernels stream B panel tiles from L2) */
        if (t->model != FMSA_SRAM_MODEL_CPU || r->dtypes == FMSA_PLAN_DTYPES_BF16_MMA ||
            (size_t)(4 * 32 * (bn > q->head_dim ? bn : q->head_dim)) <= l1 / 4 * 3) {
            e.row = r;
            e.bm = bm;
            e.bn = bn;
            e.bytes = by;
            return e;
        }
    }
    return fallback;
}

/* Matrix-instruction / SIMD granularity per arch family, from the hardware:
 * CUDA mma.sync m16n8k16 (16 or 32 rows a warp in the forward, or two warps
 * sharing 16 rows; the backward's 8 warps), CDNA MFMA 16 or 32 rows per wave,
 * OpenCL 8-row quantum with one work-item per row, CPU the SIMD width. */
static void check_granularity(const char *family, fmsa_pass pass, int bm, int bn, int stages,
                              int warps, int64_t simd, const char *what) {
    char msg[160];
    int ok = bm > 0 && bn > 0 && stages >= 1 && warps >= 1;
    if (ok && strcmp(family, "cuda") == 0) {
        ok = bm % 16 == 0 && bn % 16 == 0 &&
             (pass == FMSA_PASS_FORWARD ? bm % (16 * warps) == 0 || (16 * warps) % bm == 0
                                        : warps == 8);
    } else if (ok && strcmp(family, "cdna") == 0) {
        ok = bm % 16 == 0 && bn % 16 == 0 &&
             (pass == FMSA_PASS_FORWARD ? bm % (16 * warps) == 0 : bn % (16 * warps) == 0);
    } else if (ok && strcmp(family, "opencl") == 0) {
        int rows = pass == FMSA_PASS_FORWARD ? bm : bn;
        ok = bm % 8 == 0 && bn % 8 == 0 && stages == 1 && warps == (rows + 31) / 32;
    } else if (ok && strcmp(family, "cpu") == 0) {
        ok = bm % simd == 0 && bn % simd == 0 && stages == 1 && warps == 1;
    } else if (ok) {
        ok = 0;
    }
    if (!ok) {
        snprintf(msg, sizeof msg, "%s: %s %s Br %d Bc %d stages %d warps %d simd %lld", what,
                 family, pass == FMSA_PASS_FORWARD ? "fwd" : "bwd", bm, bn, stages, warps,
                 (long long)simd);
        fail_msg("granularity violated: %s", msg);
    }
}

/* The family of a row is the prefix of its name up to the first '-'. */
static void family_of(const char *name, char *fam, size_t cap) {
    size_t n = strcspn(name, "-");
    if (n >= cap) n = cap - 1;
    memcpy(fam, name, n);
    fam[n] = 0;
}

static const char *expected_family(const fmsa_arch_table *t) {
    if (t->backend == FMSA_BACKEND_CPU) return "cpu";
    if (strcmp(t->arch, "sm80") == 0 || strcmp(t->arch, "sm90") == 0) return "cuda";
    if (strcmp(t->arch, "gfx942") == 0 || strcmp(t->arch, "gfx90a") == 0) return "cdna";
    if (strcmp(t->arch, "opencl") == 0 || strcmp(t->arch, "opencl-cpu") == 0) return "opencl";
    return "?";
}

/* The model a table must be costed with: the CPU's caches, nothing for the
 * OpenCL CPU-device kernels (private memory only), else shared memory. */
static fmsa_sram_model expected_model(const fmsa_arch_table *t) {
    if (t->backend == FMSA_BACKEND_CPU) return FMSA_SRAM_MODEL_CPU;
    if (strcmp(t->arch, "opencl-cpu") == 0) return FMSA_SRAM_MODEL_NONE;
    return FMSA_SRAM_MODEL_GPU;
}

/* Whether a kernel of this tree runs a row on its hardware: the CPU, OpenCL
 * and CUDA tables yes, but the CUDA forward's wgmma row (its kernel has run
 * on the host emulation only, and only FLASHMSA_CUDA_WGMMA_FWD reaches it);
 * the HIP tables wait for their kernels.  When they run, their rows turn RUN
 * and this rule moves with them. */
static int expected_verified(const fmsa_arch_table *t, const fmsa_tile_row *row) {
    if (t->backend == FMSA_BACKEND_CUDA)
        return !(row->pass == FMSA_PASS_FORWARD && row->dtypes == FMSA_PLAN_DTYPES_16BIT_WGMMA);
    return t->backend != FMSA_BACKEND_HIP;
}

/* ------------------------------------------------------------------------ */
/* Tables                                                                   */
/* ------------------------------------------------------------------------ */

static void tables_are_well_formed(void **state) {
    int n = 0;
    const fmsa_arch_table *const *tp = fmsa_plan_arch_tables(&n);
    const char *required[] = {"x86-avx512", "x86-avx2", "x86", "aarch64", "cpu", "sm80",
                              "sm90", "gfx942", "gfx90a", "opencl", "opencl-cpu"};
    (void)state;
    assert_true(n >= 11);
    for (size_t k = 0; k < sizeof required / sizeof required[0]; k++) {
        int found = 0;
        for (int i = 0; i < n; i++) found |= strcmp(tp[i]->arch, required[k]) == 0;
        if (!found) fail_msg("no table for arch %s", required[k]);
    }
    for (int i = 0; i < n; i++) {
        const char *fam = expected_family(tp[i]);
        assert_non_null(tp[i]->rows);
        assert_true(tp[i]->num_rows > 0);
        assert_int_equal(tp[i]->model, expected_model(tp[i]));
        for (int j = 0; j < i; j++)
            if (tp[j]->backend == tp[i]->backend && strcmp(tp[j]->arch, tp[i]->arch) == 0)
                fail_msg("arch %s listed twice", tp[i]->arch);
        if (tp[i]->backend == FMSA_BACKEND_CPU) assert_true(tp[i]->simd_width >= 1);
        /* every (pass, dtype) has a row reaching head dim 256 */
        for (int pass = 0; pass < 2; pass++)
            for (int dt = FMSA_DTYPE_F32; dt <= FMSA_DTYPE_BF16; dt++) {
                fmsa_plan_request q = {256, (fmsa_dtype)dt, (fmsa_pass)pass, 0, 0, 0, 0};
                int covered = 0;
                for (int r = 0; r < tp[i]->num_rows; r++) covered |= applies(&tp[i]->rows[r], &q);
                if (!covered) fail_msg("%s: no row for pass %d dtype %d at d=256", tp[i]->arch, pass, dt);
            }
        for (int r = 0; r < tp[i]->num_rows; r++) {
            const fmsa_tile_row *row = &tp[i]->rows[r];
            char fam_row[16], dims[32], bucket[16];
            assert_non_null(row->name);
            family_of(row->name, fam_row, sizeof fam_row);
            if (strcmp(fam_row, fam) != 0)
                fail_msg("row %s sits in the %s table (%s)", row->name, fam, tp[i]->arch);
            assert_true(row->pass == FMSA_PASS_FORWARD || row->pass == FMSA_PASS_BACKWARD);
            assert_true(strstr(row->name, row->pass == FMSA_PASS_FORWARD ? "-fwd-" : "-bwd-"));
            assert_true(row->max_head_dim >= 8 && row->max_head_dim <= FMSA_HEAD_DIM_MAX &&
                        row->max_head_dim % 8 == 0);
            snprintf(bucket, sizeof bucket, "-d%d-", row->max_head_dim);
            snprintf(dims, sizeof dims, "-%dx%d", row->block_m, row->block_n);
            if (!strstr(row->name, bucket) || !strstr(row->name, dims))
                fail_msg("row name %s does not say %s / %s", row->name, bucket, dims);
            assert_true((strstr(row->name, "-f32-") != NULL) ==
                        (row->dtypes == FMSA_PLAN_DTYPES_F32));
            assert_true((strstr(row->name, "-b16-") != NULL) ==
                        (row->dtypes == FMSA_PLAN_DTYPES_BF16_MMA));
            assert_true((strstr(row->name, "-wgmma-") != NULL) ==
                        (row->dtypes == FMSA_PLAN_DTYPES_16BIT_WGMMA));
            /* bf16-product rows exist on the CPU only, with the instructions'
             * granularity (16 rows of an AMX C tile, k = 32 of tdpbf16ps) */
            assert_true(row->dtypes <= FMSA_PLAN_DTYPES_F32 ||
                        (row->dtypes == FMSA_PLAN_DTYPES_BF16_MMA &&
                         tp[i]->model == FMSA_SRAM_MODEL_CPU && row->block_m % 16 == 0 &&
                         row->block_n % 32 == 0) ||
                        /* wgmma rows: CUDA only, whole warpgroups of 64-row products */
                        (row->dtypes == FMSA_PLAN_DTYPES_16BIT_WGMMA &&
                         tp[i]->backend == FMSA_BACKEND_CUDA && row->warps % 4 == 0 &&
                         row->block_n % 64 == 0));
            if (row->verified != expected_verified(tp[i], row))
                fail_msg("row %s (%s) says verified %d: %s", row->name, tp[i]->arch, row->verified,
                         expected_verified(tp[i], row) ? "its kernel runs in this tree"
                                                  : "no kernel of this tree has run it");
            assert_int_equal(row->not_with & ~0x3fu, 0);
            assert_int_equal(row->sram & ~0xfu, 0);
            if (row->pass == FMSA_PASS_FORWARD)
                assert_int_equal(row->sram & (FMSA_TILE_DQ_SRAM | FMSA_TILE_KV_REGS), 0);
            if (tp[i]->model != FMSA_SRAM_MODEL_GPU) assert_int_equal(row->sram, 0);
            check_granularity(fam, row->pass, row->block_m, row->block_n, row->stages, row->warps,
                              tp[i]->simd_width > 0 ? tp[i]->simd_width : 1, row->name);
            /* names are unique across distinct rows */
            for (int i2 = 0; i2 <= i; i2++)
                for (int r2 = 0; r2 < tp[i2]->num_rows; r2++) {
                    const fmsa_tile_row *o = &tp[i2]->rows[r2];
                    if (o != row && strcmp(o->name, row->name) == 0)
                        fail_msg("row name %s used twice", row->name);
                    if (o == row) break;
                }
        }
    }
}

/* The realistic device of each GPU family, and its limit. */
static fmsa_device_info flagship(const char *fam) {
    if (strcmp(fam, "sm80") == 0) return mkdev(FMSA_BACKEND_CUDA, "sm80", 48 * KIB, 163 * KIB, 108, 32);
    if (strcmp(fam, "sm90") == 0 || strcmp(fam, "cuda") == 0)
        return mkdev(FMSA_BACKEND_CUDA, "sm90", 48 * KIB, 227 * KIB, 132, 32);
    if (strcmp(fam, "cdna") == 0) return mkdev(FMSA_BACKEND_HIP, "gfx942", 64 * KIB, 0, 304, 64);
    if (strcmp(fam, "opencl") == 0) return mkdev(FMSA_BACKEND_OPENCL, "opencl", 2048 * KIB, 0, 16, 1);
    return mkdev(FMSA_BACKEND_CPU, "x86-avx512", 48 * KIB, 2048 * KIB, 16, 16);
}

/* A row that cannot fit its family's flagship part at any dtype it serves is
 * dead weight (or a typo in the table). */
static void every_row_fits_its_flagship(void **state) {
    int n = 0;
    const fmsa_arch_table *const *tp = fmsa_plan_arch_tables(&n);
    (void)state;
    for (int i = 0; i < n; i++) {
        fmsa_device_info d = flagship(expected_family(tp[i]));
        for (int r = 0; r < tp[i]->num_rows; r++) {
            const fmsa_tile_row *row = &tp[i]->rows[r];
            fmsa_dtype dt = row->dtypes == FMSA_PLAN_DTYPES_F32 ? FMSA_DTYPE_F32 : FMSA_DTYPE_BF16;
            size_t b = model_bytes(tp[i], row, row->max_head_dim, dt, row->block_m, row->block_n);
            if (b > limit_of(&d))
                fail_msg("row %s needs %zu bytes, flagship limit %zu", row->name, b, limit_of(&d));
        }
    }
}

static void expect_row_caps(const fmsa_device_info *d, int64_t D, fmsa_dtype dt, fmsa_pass pass,
                            unsigned feat, unsigned caps, const char *row, int bm, int bn) {
    fmsa_plan_request q = {D, dt, pass, feat, 4096, 4096, 64, caps};
    fmsa_tile_plan p;
    memset(&p, 0, sizeof p);
    if (fmsa_plan_tiles(d, &q, &p) != FMSA_SUCCESS) fail_msg("%s: %s", row, fmsa_last_error());
    if (strcmp(p.table_row, row) != 0 || p.block_m != bm || p.block_n != bn)
        fail_msg("%s d=%lld feat %u: got %s %dx%d, want %s %dx%d", d->arch, (long long)D, feat,
                 p.table_row, p.block_m, p.block_n, row, bm, bn);
}

static void expect_row(const fmsa_device_info *d, int64_t D, fmsa_dtype dt, fmsa_pass pass,
                       unsigned feat, const char *row, int bm, int bn) {
    expect_row_caps(d, D, dt, pass, feat, 0, row, bm, bn);
}

/* The shapes the table comments promise on the real parts. */
static void flagship_shapes(void **state) {
    fmsa_device_info h100 = flagship("sm90"), a100 = flagship("sm80"), mi300 = flagship("cdna");
    fmsa_device_info a100_noopt = mkdev(FMSA_BACKEND_CUDA, "sm80", 48 * KIB, 0, 108, 32);
    fmsa_device_info nv_cl = mkdev(FMSA_BACKEND_OPENCL, "opencl", 48 * KIB, 0, 132, 32);
    fmsa_device_info avx = mkdev(FMSA_BACKEND_CPU, "x86-avx512", 32 * KIB, 1024 * KIB, 8, 16);
    fmsa_device_info avx_bigl1 = mkdev(FMSA_BACKEND_CPU, "x86-avx512", 128 * KIB, 1024 * KIB, 8, 16);
    fmsa_device_info avx_smalll2 = mkdev(FMSA_BACKEND_CPU, "x86-avx512", 32 * KIB, 256 * KIB, 8, 16);
    (void)state;
    /* CUDA: the mma.sync kernels' rows (common/plan_tables/cuda_mma.c), the
     * ones the H200 and the A100 run (bench/RESULTS.md, NOTES_FWD/BWD.md) */
    expect_row(&h100, 128, FMSA_DTYPE_BF16, FMSA_PASS_FORWARD, 0, "cuda-fwd-d128-fast-128x64-p2", 128, 64);
    expect_row(&h100, 128, FMSA_DTYPE_F16, FMSA_PASS_FORWARD, FMSA_FEAT_CAUSAL, "cuda-fwd-d128-fast-128x64-p2", 128, 64);
    expect_row(&h100, 128, FMSA_DTYPE_F16, FMSA_PASS_FORWARD, FMSA_FEAT_PAGED, "cuda-fwd-d128-full-128x64-p2", 128, 64);
    expect_row(&h100, 256, FMSA_DTYPE_BF16, FMSA_PASS_FORWARD, 0, "cuda-fwd-d256-fast-64x64-p1", 64, 64);
    expect_row(&h100, 256, FMSA_DTYPE_BF16, FMSA_PASS_FORWARD, FMSA_FEAT_ALIBI, "cuda-fwd-d256-full-128x64-p2", 128, 64);
    expect_row(&h100, 64, FMSA_DTYPE_BF16, FMSA_PASS_FORWARD, 0, "cuda-fwd-d64-fast-128x128-p2", 128, 128);
    expect_row(&h100, 64, FMSA_DTYPE_BF16, FMSA_PASS_FORWARD, FMSA_FEAT_SOFTCAP, "cuda-fwd-d64-full-128x64-p2", 128, 64);
    expect_row(&h100, 128, FMSA_DTYPE_BF16, FMSA_PASS_BACKWARD, 0, "cuda-bwd-d128-64x128-p2", 64, 128);
    expect_row(&h100, 64, FMSA_DTYPE_BF16, FMSA_PASS_BACKWARD, 0, "cuda-bwd-d64-128x128-p2", 128, 128);
    expect_row(&a100, 128, FMSA_DTYPE_BF16, FMSA_PASS_FORWARD, 0, "cuda-fwd-d128-fast-128x64-p2", 128, 64);
    expect_row(&a100, 256, FMSA_DTYPE_BF16, FMSA_PASS_FORWARD, FMSA_FEAT_MASK, "cuda-fwd-d256-full-64x64-p2", 64, 64);
    expect_row(&a100, 64, FMSA_DTYPE_F16, FMSA_PASS_BACKWARD, 0, "cuda-bwd-d64-64x128-p2", 64, 128);
    expect_row(&a100, 128, FMSA_DTYPE_F16, FMSA_PASS_BACKWARD, 0, "cuda-bwd-d128-64x128-p1", 64, 128);
    {
        /* without the opt-in (48 KiB) no 16-bit CUDA kernel fits: refused */
        fmsa_plan_request q = {128, FMSA_DTYPE_F16, FMSA_PASS_FORWARD, 0, 4096, 4096, 64, 0};
        fmsa_tile_plan p;
        assert_int_equal(fmsa_plan_tiles(&a100_noopt, &q, &p), FMSA_ERR_NOT_SUPPORTED);
    }
    expect_row(&mi300, 128, FMSA_DTYPE_BF16, FMSA_PASS_FORWARD, 0, "cdna-fwd-d128-256x64", 256, 64);
    expect_row(&nv_cl, 128, FMSA_DTYPE_F16, FMSA_PASS_FORWARD, 0, "opencl-fwd-d128-64x64", 64, 64);
    expect_row(&nv_cl, 128, FMSA_DTYPE_F32, FMSA_PASS_FORWARD, 0, "opencl-fwd-d128-32x32", 32, 32);
    /* CPU: the micro-kernel's B sliver (4 * 32 * max(D, Bc) bytes) within 3/4
     * of L1 is preferred; at d = 256 it is 32 KiB, over 3/4 of a 32 KiB L1, so
     * there the first row within L2 serves, as on a big L1; at d = 128 the
     * 16 KiB sliver passes, and an L2 below the 128x128 row's 321 KiB falls
     * back to 64x64 */
    expect_row(&avx, 256, FMSA_DTYPE_F32, FMSA_PASS_FORWARD, 0, "cpu-fwd-d256-64x64", 64, 64);
    expect_row(&avx_bigl1, 256, FMSA_DTYPE_F32, FMSA_PASS_FORWARD, 0, "cpu-fwd-d256-64x64", 64, 64);
    expect_row(&avx_smalll2, 256, FMSA_DTYPE_F32, FMSA_PASS_FORWARD, 0, "cpu-fwd-d256-32x64", 32, 64);
    expect_row(&avx, 128, FMSA_DTYPE_F32, FMSA_PASS_FORWARD, 0, "cpu-fwd-d128-128x128", 128, 128);
    expect_row(&avx_smalll2, 128, FMSA_DTYPE_F32, FMSA_PASS_FORWARD, 0, "cpu-fwd-d128-64x64", 64, 64);
    expect_row(&avx, 64, FMSA_DTYPE_F32, FMSA_PASS_FORWARD, 0, "cpu-fwd-d64-128x128", 128, 128);
    /* head dims past 256 (Gemma 4, MLA) on the CPU rows of cpu.c */
    expect_row(&avx, 512, FMSA_DTYPE_F32, FMSA_PASS_FORWARD, 0, "cpu-fwd-d576-64x64", 64, 64);
    expect_row(&avx, 512, FMSA_DTYPE_F32, FMSA_PASS_BACKWARD, 0, "cpu-bwd-d576-64x64", 64, 64);
    expect_row(&avx, 576, FMSA_DTYPE_F32, FMSA_PASS_BACKWARD, 0, "cpu-bwd-d576-32x64", 32, 64);
    expect_row(&avx_smalll2, 512, FMSA_DTYPE_F32, FMSA_PASS_FORWARD, 0, "cpu-fwd-d576-16x16", 16, 16);
    /* CPU bf16 products: only bf16 with the capability gets the bf16 rows
     * (fp16 would lose mantissa bits in bf16; without the instructions the
     * fp32-staged rows serve bf16 too) */
    {
        fmsa_device_info spr = flagship("cpu");
        const unsigned mma = FMSA_PLAN_CAP_BF16_MMA;
        expect_row_caps(&spr, 128, FMSA_DTYPE_BF16, FMSA_PASS_FORWARD, 0, mma, "cpu-fwd-b16-d128-64x256", 64, 256);
        expect_row_caps(&spr, 64, FMSA_DTYPE_BF16, FMSA_PASS_FORWARD, FMSA_FEAT_CAUSAL, mma, "cpu-fwd-b16-d128-64x256", 64, 256);
        expect_row_caps(&spr, 256, FMSA_DTYPE_BF16, FMSA_PASS_FORWARD, 0, mma, "cpu-fwd-b16-d256-64x64", 64, 64);
        expect_row_caps(&spr, 128, FMSA_DTYPE_F16, FMSA_PASS_FORWARD, 0, mma, "cpu-fwd-d128-128x128", 128, 128);
        expect_row_caps(&spr, 128, FMSA_DTYPE_BF16, FMSA_PASS_FORWARD, 0, 0, "cpu-fwd-d128-128x128", 128, 128);
        expect_row_caps(&spr, 128, FMSA_DTYPE_F32, FMSA_PASS_FORWARD, 0, mma, "cpu-fwd-d128-128x128", 128, 128);
    }
}

/* ------------------------------------------------------------------------ */
/* The sweep                                                                */
/* ------------------------------------------------------------------------ */

typedef struct sweep_stats {
    long plans, unsupported;
} sweep_stats;

static void check_one(const fmsa_device_info *d, const fmsa_plan_request *q, sweep_stats *st) {
    const fmsa_arch_table *t = fmsa_plan_find_table(d);
    fmsa_tile_plan p, p2, sentinel;
    fmsa_status s, s2;
    expect e;
    char ctx[200];
    snprintf(ctx, sizeof ctx, "dev %s/%d sram %zu optin %zu warp %d | d %lld dtype %d pass %d feat %u caps %u",
             d->arch, (int)d->backend, d->sram_per_block, d->sram_per_block_optin, d->warp_size,
             (long long)q->head_dim, (int)q->dtype, (int)q->pass, q->features, q->caps);
    if (!t) fail_msg("no table: %s", ctx);
    memset(&sentinel, 0xa5, sizeof sentinel);
    p = sentinel;
    p2 = sentinel;
    s = fmsa_plan_tiles(d, q, &p);
    s2 = fmsa_plan_tiles(d, q, &p2);
    e = model_plan(d, t, q);
    if (s != s2 || memcmp(&p, &p2, sizeof p) != 0) fail_msg("not deterministic: %s", ctx);
    if (!e.row) {
        char num[40];
        if (s != FMSA_ERR_NOT_SUPPORTED) fail_msg("status %d, want NOT_SUPPORTED: %s", (int)s, ctx);
        if (memcmp(&p, &sentinel, sizeof p) != 0) fail_msg("plan written on failure: %s", ctx);
        if (!strstr(fmsa_last_error(), d->arch)) fail_msg("message lacks arch: %s", fmsa_last_error());
        snprintf(num, sizeof num, "head_dim %lld", (long long)q->head_dim);
        if (!strstr(fmsa_last_error(), num)) fail_msg("message lacks %s: %s", num, fmsa_last_error());
        snprintf(num, sizeof num, "%zu", limit_of(d));
        if (!strstr(fmsa_last_error(), num)) fail_msg("message lacks limit %s: %s", num, fmsa_last_error());
        st->unsupported++;
        return;
    }
    if (s != FMSA_SUCCESS) fail_msg("status %d (%s), want a plan from %s: %s", (int)s, fmsa_last_error(), e.row->name, ctx);
    st->plans++;
    if (!p.table_row || strcmp(p.table_row, e.row->name) != 0)
        fail_msg("row %s, want %s: %s", p.table_row ? p.table_row : "(null)", e.row->name, ctx);
    if (p.block_m != e.bm || p.block_n != e.bn || p.stages != e.row->stages || p.warps != e.row->warps)
        fail_msg("shape %dx%d st %d w %d, want %lldx%lld: %s", p.block_m, p.block_n, p.stages, p.warps,
                 (long long)e.bm, (long long)e.bn, ctx);
    if (p.dtypes != (int)e.row->dtypes) fail_msg("dtypes %d, want %d: %s", p.dtypes, (int)e.row->dtypes, ctx);
    if (p.sram_bytes != e.bytes) fail_msg("sram_bytes %zu, model %zu: %s", p.sram_bytes, e.bytes, ctx);
    if (p.sram_bytes > limit_of(d) || (p.sram_bytes == 0) != (t->model == FMSA_SRAM_MODEL_NONE))
        fail_msg("sram_bytes %zu vs limit %zu: %s", p.sram_bytes, limit_of(d), ctx);
    if (p.sram != e.row->sram || p.verified != e.row->verified)
        fail_msg("sram %u verified %d, row %s says %u / %d: %s", p.sram, p.verified, e.row->name,
                 e.row->sram, e.row->verified, ctx);
    /* what the CPU and OpenCL backends run must be a row some kernel has run */
    if ((d->backend == FMSA_BACKEND_CPU || d->backend == FMSA_BACKEND_OPENCL) && !p.verified)
        fail_msg("unverified row %s planned for a %s device: %s", p.table_row,
                 d->backend == FMSA_BACKEND_CPU ? "CPU" : "OpenCL", ctx);
    check_granularity(expected_family(t), q->pass, p.block_m, p.block_n, p.stages, p.warps,
                      t->model == FMSA_SRAM_MODEL_CPU ? cpu_width(d, t) : 1, ctx);
    if (p.num_splits < 1) fail_msg("num_splits %d: %s", p.num_splits, ctx);
    if (q->pass == FMSA_PASS_BACKWARD && p.num_splits != 1) fail_msg("bwd split: %s", ctx);
    if (q->pass == FMSA_PASS_FORWARD &&
        p.num_splits != fmsa_plan_num_splits(d, q->batch_heads, q->seqlen_q, q->seqlen_k,
                                             p.block_m, p.block_n))
        fail_msg("num_splits disagrees with fmsa_plan_num_splits: %s", ctx);
}

static void sweep_devices(fmsa_device_info *devs, int ndev, sweep_stats *st) {
    static const unsigned feats[] = {
        0, FMSA_FEAT_CAUSAL, FMSA_FEAT_SOFTCAP | FMSA_FEAT_ALIBI, FMSA_FEAT_MASK | FMSA_FEAT_VARLEN,
        FMSA_FEAT_PAGED, FMSA_FEAT_CAUSAL | FMSA_FEAT_PAGED, 0x3f,
    };
    static const fmsa_dtype dts[] = {FMSA_DTYPE_F32, FMSA_DTYPE_F16, FMSA_DTYPE_BF16};
    for (int i = 0; i < ndev; i++)
        for (int64_t D = 8; D <= 256; D += 8)
            for (int k = 0; k < 3; k++)
                for (int pass = 0; pass < 2; pass++)
                    for (size_t f = 0; f < sizeof feats / sizeof feats[0]; f++)
                        for (unsigned caps = 0; caps <= (FMSA_PLAN_CAP_BF16_MMA | FMSA_PLAN_CAP_WGMMA); caps++) {
                            fmsa_plan_request q = {D, dts[k], (fmsa_pass)pass, feats[f], 1, 8192, 32, caps};
                            check_one(&devs[i], &q, st);
                        }
}

static void sweep_every_arch(void **state) {
    const size_t tiny = 16 * KIB, huge = (size_t)1 << 30;
    fmsa_device_info devs[96];
    int n = 0, ntab = 0;
    const fmsa_arch_table *const *tp = fmsa_plan_arch_tables(&ntab);
    sweep_stats st = {0, 0};
    (void)state;
    for (int i = 0; i < ntab; i++) {
        fmsa_device_info f = flagship(expected_family(tp[i]));
        fmsa_device_info d = f;
        snprintf(d.arch, sizeof d.arch, "%s", tp[i]->arch);
        d.backend = tp[i]->backend;
        if (tp[i]->backend == FMSA_BACKEND_CPU) d.warp_size = tp[i]->simd_width;
        devs[n++] = d;                                    /* the real limits */
        devs[n] = d; devs[n].sram_per_block = tiny; devs[n].sram_per_block_optin = 0; n++;
        devs[n] = d; devs[n].sram_per_block = tiny; devs[n].sram_per_block_optin = huge; n++;
        devs[n] = d; devs[n].sram_per_block = 0; devs[n].sram_per_block_optin = 0; n++;
        devs[n] = d; devs[n].sram_per_block = 32 * KIB; devs[n].sram_per_block_optin = 0; n++;
    }
    /* mid-size parts: sm86/89 (99 KiB opt-in), a 32 KiB OpenCL iGPU, an
     * RDNA-like unknown HIP arch, odd CPU SIMD widths and arches */
    devs[n++] = mkdev(FMSA_BACKEND_CUDA, "sm86", 48 * KIB, 99 * KIB, 84, 32);
    devs[n++] = mkdev(FMSA_BACKEND_CUDA, "sm100", 48 * KIB, 227 * KIB, 148, 32);
    devs[n++] = mkdev(FMSA_BACKEND_CUDA, "", 48 * KIB, 0, 1, 32);
    devs[n++] = mkdev(FMSA_BACKEND_HIP, "gfx1100", 64 * KIB, 0, 48, 32);
    devs[n++] = mkdev(FMSA_BACKEND_OPENCL, "opencl", 32 * KIB, 0, 24, 16);
    devs[n++] = mkdev(FMSA_BACKEND_OPENCL, "intel-gen12", 64 * KIB, 0, 96, 16);
    devs[n++] = mkdev(FMSA_BACKEND_CPU, "riscv64", 32 * KIB, 512 * KIB, 4, 0);
    devs[n++] = mkdev(FMSA_BACKEND_CPU, "x86-avx2", 48 * KIB, 1280 * KIB, 8, 12);
    devs[n++] = mkdev(FMSA_BACKEND_CPU, "x86-avx512", 48 * KIB, 2048 * KIB, 64, 32);
    devs[n++] = mkdev(FMSA_BACKEND_CPU, "aarch64", 128 * KIB, 16 * KIB, 10, 4);
    assert_true(n <= (int)(sizeof devs / sizeof devs[0]));
    sweep_devices(devs, n, &st);
    print_message("planner sweep: %ld plans, %ld NOT_SUPPORTED over %d devices\n", st.plans,
                  st.unsupported, n);
    /* both outcomes must occur, or the sweep is not testing the boundary */
    assert_true(st.plans > 1000);
    assert_true(st.unsupported > 100);
}

/* The CPU planner reads caches, never the core count; the CPU is never
 * NOT_SUPPORTED at sane SIMD widths because a cache is a soft limit. */
static void cpu_plan_ignores_threads(void **state) {
    (void)state;
    for (int64_t D = 8; D <= 256; D += 8)
        for (int pass = 0; pass < 2; pass++) {
            fmsa_plan_request q = {D, FMSA_DTYPE_BF16, (fmsa_pass)pass, 0, 1, 100000, 4};
            fmsa_tile_plan ref, p;
            fmsa_device_info d = mkdev(FMSA_BACKEND_CPU, "x86-avx512", 48 * KIB, 2048 * KIB, 1, 16);
            assert_int_equal(fmsa_plan_tiles(&d, &q, &ref), FMSA_SUCCESS);
            for (int mp = 2; mp <= 512; mp = mp * 3 + 1) {
                d.multiprocessors = mp;
                d.registers_per_block = mp * 1000;
                d.sram_per_multiprocessor = (size_t)mp * KIB;
                assert_int_equal(fmsa_plan_tiles(&d, &q, &p), FMSA_SUCCESS);
                assert_memory_equal(&p, &ref, sizeof p);
            }
            /* 16 KiB of reported cache still plans, against the 256 KiB floor */
            d = mkdev(FMSA_BACKEND_CPU, "x86-avx512", 16 * KIB, 16 * KIB, 1, 16);
            assert_int_equal(fmsa_plan_tiles(&d, &q, &p), FMSA_SUCCESS);
            assert_true(p.sram_bytes <= FMSA_PLAN_CPU_MIN_L2);
            assert_int_equal(fmsa_plan_sram_limit(&d), FMSA_PLAN_CPU_MIN_L2);
        }
}

static void unknown_archs_fall_back(void **state) {
    struct { fmsa_backend b; const char *arch, *table; } cases[] = {
        {FMSA_BACKEND_CPU, "riscv64", "cpu"},   {FMSA_BACKEND_CPU, "", "cpu"},
        {FMSA_BACKEND_CPU, "sm90", "cpu"},      {FMSA_BACKEND_CUDA, "sm75", "sm80"},
        {FMSA_BACKEND_CUDA, "sm100", "sm80"},   {FMSA_BACKEND_CUDA, "x86-avx2", "sm80"},
        {FMSA_BACKEND_HIP, "gfx1100", "gfx90a"}, {FMSA_BACKEND_HIP, "gfx950", "gfx90a"},
        {FMSA_BACKEND_OPENCL, "pocl", "opencl"}, {FMSA_BACKEND_CUDA, "sm90", "sm90"},
        {FMSA_BACKEND_HIP, "gfx942", "gfx942"}, {FMSA_BACKEND_CPU, "x86-avx2", "x86-avx2"},
        {FMSA_BACKEND_OPENCL, "opencl-cpu", "opencl-cpu"}, {FMSA_BACKEND_CPU, "opencl-cpu", "cpu"},
    };
    fmsa_device_info d;
    fmsa_plan_request q = {64, FMSA_DTYPE_F16, FMSA_PASS_FORWARD, 0, 1, 1, 1};
    fmsa_tile_plan p;
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const fmsa_arch_table *t;
        d = mkdev(cases[i].b, cases[i].arch, 64 * KIB, 0, 8, 0);
        t = fmsa_plan_find_table(&d);
        assert_non_null(t);
        assert_string_equal(t->arch, cases[i].table);
        assert_int_equal(t->backend, cases[i].b);
    }
    /* unknown CPU arch without a SIMD width plans at granularity 1 */
    d = mkdev(FMSA_BACKEND_CPU, "riscv64", 32 * KIB, 512 * KIB, 8, 0);
    assert_int_equal(fmsa_plan_tiles(&d, &q, &p), FMSA_SUCCESS);
    assert_int_equal(strncmp(p.table_row, "cpu-", 4), 0);
    /* AUTO is no device: invalid, with a message */
    d = mkdev(FMSA_BACKEND_AUTO, "sm90", 64 * KIB, 0, 8, 0);
    assert_null(fmsa_plan_find_table(&d));
    assert_int_equal(fmsa_plan_tiles(&d, &q, &p), FMSA_ERR_INVALID_ARGUMENT);
    assert_true(strlen(fmsa_last_error()) > 0);
}

static void bad_requests_are_rejected(void **state) {
    fmsa_device_info d = flagship("sm90");
    fmsa_tile_plan p, sentinel;
    const fmsa_plan_request good = {128, FMSA_DTYPE_BF16, FMSA_PASS_FORWARD, 0, 1, 1, 1};
    fmsa_plan_request q;
    int64_t bad_d[] = {0, -8, 4, 12, 580, 584, 1 << 20};
    (void)state;
    memset(&sentinel, 0x5a, sizeof sentinel);
    assert_int_equal(fmsa_plan_tiles(&d, &good, &p), FMSA_SUCCESS);
    assert_int_equal(fmsa_plan_tiles(NULL, &good, &p), FMSA_ERR_INVALID_ARGUMENT);
    assert_int_equal(fmsa_plan_tiles(&d, NULL, &p), FMSA_ERR_INVALID_ARGUMENT);
    assert_int_equal(fmsa_plan_tiles(&d, &good, NULL), FMSA_ERR_INVALID_ARGUMENT);
    for (size_t i = 0; i < sizeof bad_d / sizeof bad_d[0]; i++) {
        q = good;
        q.head_dim = bad_d[i];
        p = sentinel;
        assert_int_equal(fmsa_plan_tiles(&d, &q, &p), FMSA_ERR_INVALID_ARGUMENT);
        assert_non_null(strstr(fmsa_last_error(), "head_dim"));
        assert_memory_equal(&p, &sentinel, sizeof p);
    }
    q = good;
    q.dtype = FMSA_DTYPE_I32;
    assert_int_equal(fmsa_plan_tiles(&d, &q, &p), FMSA_ERR_INVALID_ARGUMENT);
    q.dtype = FMSA_DTYPE_INVALID;
    assert_int_equal(fmsa_plan_tiles(&d, &q, &p), FMSA_ERR_INVALID_ARGUMENT);
    q = good;
    q.pass = (fmsa_pass)7;
    assert_int_equal(fmsa_plan_tiles(&d, &q, &p), FMSA_ERR_INVALID_ARGUMENT);
    d = mkdev(FMSA_BACKEND_CPU, "x86", 32 * KIB, 256 * KIB, 4, 1 << 20);
    assert_int_equal(fmsa_plan_tiles(&d, &good, &p), FMSA_ERR_INVALID_ARGUMENT);
}

/* More SRAM never loses a plan (rows are tried in a fixed order). */
static void more_sram_never_hurts(void **state) {
    int ntab = 0;
    const fmsa_arch_table *const *tp = fmsa_plan_arch_tables(&ntab);
    (void)state;
    for (int i = 0; i < ntab; i++)
        for (size_t lim = 8 * KIB; lim <= 512 * KIB; lim += 8 * KIB)
            for (int64_t D = 8; D <= 256; D += 24)
                for (int pass = 0; pass < 2; pass++) {
                    fmsa_device_info a = mkdev(tp[i]->backend, tp[i]->arch, lim, 0, 8, tp[i]->simd_width);
                    fmsa_device_info b = mkdev(tp[i]->backend, tp[i]->arch, lim + 8 * KIB, 0, 8, tp[i]->simd_width);
                    fmsa_plan_request q = {D, FMSA_DTYPE_F32, (fmsa_pass)pass, 0, 1, 1, 1};
                    fmsa_tile_plan p;
                    if (fmsa_plan_tiles(&a, &q, &p) == FMSA_SUCCESS &&
                        fmsa_plan_tiles(&b, &q, &p) != FMSA_SUCCESS)
                        fail_msg("%s d=%lld: fits %zu but not %zu", tp[i]->arch, (long long)D, lim,
                                 lim + 8 * KIB);
                }
}

/* ------------------------------------------------------------------------ */
/* The request from a problem, and the OpenCL CPU-device family             */
/* ------------------------------------------------------------------------ */

/* Every field of the request comes from the problem (features as
 * fmsa_plan_features maps them, one switch at a time), caps as given. */
static void request_from_problem(void **state) {
    fmsa_problem p;
    fmsa_plan_request q;
    (void)state;
    memset(&p, 0, sizeof p);
    p.pass = FMSA_PASS_BACKWARD;
    p.dtype = FMSA_DTYPE_BF16;
    p.batch = 3;
    p.heads_q = 8;
    p.heads_kv = 2;
    p.head_dim = 96;
    p.seqlen_q = 333;
    p.seqlen_k = 4444;
    p.window_left = -1;
    p.window_right = -1;
    memset(&q, 0x5a, sizeof q);
    fmsa_plan_request_from_problem(&p, FMSA_PLAN_CAP_BF16_MMA, &q);
    assert_int_equal(q.head_dim, 96);
    assert_int_equal(q.dtype, FMSA_DTYPE_BF16);
    assert_int_equal(q.pass, FMSA_PASS_BACKWARD);
    assert_int_equal(q.features, 0);
    assert_int_equal(q.seqlen_q, 333);
    assert_int_equal(q.seqlen_k, 4444);
    assert_int_equal(q.batch_heads, 24);
    assert_int_equal(q.batch_heads_kv, 6);
    /* no split kernel described: the backend fills split where it has one */
    assert_int_equal(q.split.block_m, 0), assert_int_equal(q.split.block_n, 0);
    assert_int_equal(q.split.blocks_per_sm, 0), assert_int_equal(q.split.reserved, 0);
    assert_int_equal(q.caps, FMSA_PLAN_CAP_BF16_MMA);
    fmsa_plan_request_from_problem(&p, 0, &q);
    assert_int_equal(q.caps, 0);
    /* one feature switch at a time (causal is folded into window_right = 0) */
    {
        static const unsigned want[7] = {FMSA_FEAT_CAUSAL, FMSA_FEAT_CAUSAL, FMSA_FEAT_SOFTCAP,
                                         FMSA_FEAT_ALIBI,  FMSA_FEAT_MASK,   FMSA_FEAT_VARLEN,
                                         FMSA_FEAT_PAGED};
        fmsa_problem f[7];
        for (int k = 0; k < 7; k++) f[k] = p;
        f[0].window_right = 0;
        f[1].window_left = 7;
        f[2].softcap = 30.0f;
        f[3].has_alibi = 1;
        f[4].has_mask = 1;
        f[5].is_varlen = 1;
        f[6].is_paged = 1;
        for (int k = 0; k < 7; k++) {
            fmsa_plan_request_from_problem(&f[k], 0, &q);
            assert_int_equal(q.features, want[k]);
        }
    }
}

/* The OpenCL CPU-device kernels: one row per pass serves every head dim,
 * dtype and feature set, costs no local memory (so even a device reporting
 * none plans), and is never what the generic "opencl" key gets. */
static void opencl_cpu_family(void **state) {
    fmsa_device_info pocl = mkdev(FMSA_BACKEND_OPENCL, "opencl-cpu", 0, 0, 2, 1);
    fmsa_device_info generic = mkdev(FMSA_BACKEND_OPENCL, "opencl", 4096 * KIB, 0, 2, 1);
    (void)state;
    for (int64_t D = 8; D <= 256; D += 8)
        for (int dt = FMSA_DTYPE_F32; dt <= FMSA_DTYPE_BF16; dt++)
            for (int pass = 0; pass < 2; pass++) {
                fmsa_plan_request q = {D, (fmsa_dtype)dt, (fmsa_pass)pass, 0x3f, 100, 100, 4, 0};
                fmsa_tile_plan p;
                const char *want = pass == FMSA_PASS_FORWARD ? "opencl-cpu-fwd-d256-16x32"
                                                             : "opencl-cpu-bwd-d256-32x16";
                assert_int_equal(fmsa_plan_tiles(&pocl, &q, &p), FMSA_SUCCESS);
                assert_string_equal(p.table_row, want);
                assert_int_equal(p.sram_bytes, 0);
                assert_int_equal(p.verified, 1);
                assert_int_equal(fmsa_plan_tiles(&generic, &q, &p), FMSA_SUCCESS);
                assert_null(strstr(p.table_row, "opencl-cpu"));
            }
}

/* ------------------------------------------------------------------------ */
/* Split-KV                                                                 */
/* ------------------------------------------------------------------------ */

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

static void num_splits_invariants(void **state) {
    static const int64_t bhs[] = {1, 2, 3, 8, 16, 32, 40, 64, 128, 1024, 1 << 20};
    static const int64_t sqs[] = {1, 2, 8, 64, 127, 128, 1000, 4096};
    static const int64_t sks[] = {0, 1, 63, 64, 65, 1000, 4096, 32768, 1 << 20, (int64_t)1 << 31};
    static const int blocks[][2] = {{64, 64}, {128, 176}, {16, 16}, {256, 64}, {128, 80}};
    fmsa_device_info devs[] = {
        mkdev(FMSA_BACKEND_CPU, "x86-avx512", 48 * KIB, 2048 * KIB, 16, 16),
        mkdev(FMSA_BACKEND_CUDA, "sm80", 48 * KIB, 163 * KIB, 108, 32),
        mkdev(FMSA_BACKEND_CUDA, "sm90", 48 * KIB, 227 * KIB, 132, 32),
        mkdev(FMSA_BACKEND_HIP, "gfx942", 64 * KIB, 0, 304, 64),
        mkdev(FMSA_BACKEND_OPENCL, "opencl", 48 * KIB, 0, 1, 32),
        mkdev(FMSA_BACKEND_OPENCL, "opencl", 48 * KIB, 0, 0, 32),
    };
    long decode_split = 0;
    (void)state;
    for (size_t di = 0; di < sizeof devs / sizeof devs[0]; di++)
        for (size_t a = 0; a < sizeof bhs / sizeof bhs[0]; a++)
            for (size_t b = 0; b < sizeof sqs / sizeof sqs[0]; b++)
                for (size_t c = 0; c < sizeof sks / sizeof sks[0]; c++)
                    for (size_t k = 0; k < sizeof blocks / sizeof blocks[0]; k++) {
                        const fmsa_device_info *d = &devs[di];
                        int bm = blocks[k][0], bn = blocks[k][1];
                        int64_t kt = cdiv(sks[c], bn), work = bhs[a] * cdiv(sqs[b], bm);
                        int s = fmsa_plan_num_splits(d, bhs[a], sqs[b], sks[c], bm, bn);
                        if (s < 1 || s > FMSA_PLAN_MAX_SPLITS || (kt >= 1 && s > kt) ||
                            (kt == 0 && s != 1))
                            fail_msg("%s bh %lld sq %lld sk %lld %dx%d: %d splits of %lld tiles",
                                     d->arch, (long long)bhs[a], (long long)sqs[b],
                                     (long long)sks[c], bm, bn, s, (long long)kt);
                        /* no split is left empty */
                        if (s > 1 && (s - 1) * cdiv(kt, s) >= kt)
                            fail_msg("empty split: %d of %lld tiles", s, (long long)kt);
                        /* prefill (the machine is already full) is never split */
                        if (d->backend == FMSA_BACKEND_CPU ? work >= 64
                                                           : work >= d->multiprocessors)
                            assert_int_equal(s, 1);
                        if (d->backend == FMSA_BACKEND_CPU) {
                            fmsa_device_info e = *d;
                            for (int mp = 1; mp <= 1024; mp *= 2) {
                                e.multiprocessors = mp;
                                e.warp_size = mp % 3 ? 16 : 8;
                                e.sram_per_block_optin = (size_t)mp * 64 * KIB;
                                if (fmsa_plan_num_splits(&e, bhs[a], sqs[b], sks[c], bm, bn) != s)
                                    fail_msg("CPU splits depend on the device at mp %d", mp);
                            }
                        } else if (s > 1) {
                            /* the GPU choice is within 85% of the best wave efficiency */
                            int64_t sms = d->multiprocessors;
                            double best = 0, mine = (double)(work * s) / (double)(sms * cdiv(work * s, sms));
                            for (int64_t x = 1; x <= FMSA_PLAN_MAX_SPLITS && x <= kt && x <= sms; x++) {
                                double ef = (double)(work * x) / (double)(sms * cdiv(work * x, sms));
                                if (x > 1 && cdiv(kt, x) == cdiv(kt, x - 1)) continue;
                                if (ef > best) best = ef;
                            }
                            if (mine < 0.85 * best - 1e-12)
                                fail_msg("%s: %d splits at efficiency %.3f, best %.3f", d->arch, s, mine, best);
                        }
                        if (sqs[b] == 1 && sks[c] >= 32768 && bhs[a] <= 8 && s > 1) decode_split++;
                    }
    /* long decodes with few heads do get split on every backend with cores */
    assert_true(decode_split > 50);
    assert_true(fmsa_plan_num_splits(&devs[0], 1, 1, 65536, 64, 64) > 1);
    assert_true(fmsa_plan_num_splits(&devs[2], 8, 1, 32768, 128, 176) > 1);
    assert_true(fmsa_plan_num_splits(&devs[3], 4, 1, 8192, 256, 64) > 1);
    /* degenerate arguments */
    assert_int_equal(fmsa_plan_num_splits(NULL, 1, 1, 65536, 64, 64), 1);
    assert_int_equal(fmsa_plan_num_splits(&devs[2], 0, 1, 65536, 64, 64), 1);
    assert_int_equal(fmsa_plan_num_splits(&devs[2], 1, 0, 65536, 64, 64), 1);
    assert_int_equal(fmsa_plan_num_splits(&devs[2], 1, 1, 65536, 0, 64), 1);
    assert_int_equal(fmsa_plan_num_splits(&devs[2], 1, 1, 65536, 64, 0), 1);
    assert_int_equal(fmsa_plan_num_splits(&devs[2], INT64_MAX, 1 << 20, 65536, 1, 64), 1);
    /* the plan carries the same decision, and 1 for the backward */
    {
        fmsa_plan_request q = {128, FMSA_DTYPE_BF16, FMSA_PASS_FORWARD, 0, 1, 65536, 2};
        fmsa_tile_plan p;
        assert_int_equal(fmsa_plan_tiles(&devs[2], &q, &p), FMSA_SUCCESS);
        assert_true(p.num_splits > 1);
        q.pass = FMSA_PASS_BACKWARD;
        assert_int_equal(fmsa_plan_tiles(&devs[2], &q, &p), FMSA_SUCCESS);
        assert_int_equal(p.num_splits, 1);
        q.pass = FMSA_PASS_FORWARD;
        q.seqlen_q = 8192;
        q.batch_heads = 64;
        assert_int_equal(fmsa_plan_tiles(&devs[2], &q, &p), FMSA_SUCCESS);
        assert_int_equal(p.num_splits, 1);
    }
}

/*
 * The split counts of every request that does not describe a decode kernel
 * (fmsa_plan_request.split all 0: the CPU and OpenCL backends, the HIP
 * table, and raw requests on CUDA devices) are the ones the planner gave at
 * commit 2fa5910, before the CUDA decode's rule moved into the planner: an
 * FNV-1a hash of fmsa_plan_num_splits over a wide grid and of
 * fmsa_plan_tiles' num_splits over forward requests, recorded at that commit.
 * A changed hash names no case; the invariants above then say which rule
 * moved.
 */
static uint64_t fnv1a(uint64_t h, int64_t v) {
    for (int i = 0; i < 8; i++) {
        h ^= (uint64_t)(v >> (8 * i)) & 0xffu;
        h *= 0x100000001b3ull;
    }
    return h;
}

static void splits_of_other_requests_unchanged(void **state) {
    static const int64_t bhs[] = {1, 2, 3, 8, 16, 32, 40, 64, 128, 1024, 1 << 20};
    static const int64_t sqs[] = {1, 2, 8, 64, 127, 128, 1000, 4096};
    static const int64_t sks[] = {0, 1, 63, 64, 65, 1000, 4096, 32768, 131072, 1 << 20, (int64_t)1 << 31};
    static const int blocks[][2] = {{64, 64}, {128, 176}, {16, 16}, {256, 64}, {128, 80}, {16, 64}, {128, 128}};
    static const int64_t dims[] = {64, 128, 256};
    fmsa_device_info devs[] = {
        mkdev(FMSA_BACKEND_CPU, "x86-avx512", 48 * KIB, 2048 * KIB, 16, 16),
        mkdev(FMSA_BACKEND_CPU, "cpu", 32 * KIB, 256 * KIB, 2, 0),
        mkdev(FMSA_BACKEND_OPENCL, "opencl", 48 * KIB, 0, 1, 32),
        mkdev(FMSA_BACKEND_OPENCL, "opencl", 48 * KIB, 0, 0, 32),
        mkdev(FMSA_BACKEND_OPENCL, "opencl", 64 * KIB, 0, 28, 32),
        mkdev(FMSA_BACKEND_HIP, "gfx942", 64 * KIB, 0, 304, 64),
        mkdev(FMSA_BACKEND_HIP, "gfx90a", 64 * KIB, 0, 110, 64),
        mkdev(FMSA_BACKEND_CUDA, "sm80", 48 * KIB, 163 * KIB, 108, 32),
        mkdev(FMSA_BACKEND_CUDA, "sm90", 48 * KIB, 227 * KIB, 132, 32),
    };
    uint64_t h_num = 0xcbf29ce484222325ull, h_tiles = 0xcbf29ce484222325ull;
    (void)state;
    for (size_t di = 0; di < sizeof devs / sizeof devs[0]; di++)
        for (size_t a = 0; a < sizeof bhs / sizeof bhs[0]; a++)
            for (size_t b = 0; b < sizeof sqs / sizeof sqs[0]; b++)
                for (size_t c = 0; c < sizeof sks / sizeof sks[0]; c++) {
                    for (size_t k = 0; k < sizeof blocks / sizeof blocks[0]; k++)
                        h_num = fnv1a(h_num, fmsa_plan_num_splits(&devs[di], bhs[a], sqs[b], sks[c],
                                                                  blocks[k][0], blocks[k][1]));
                    for (size_t e = 0; e < sizeof dims / sizeof dims[0]; e++)
                        for (int dt = FMSA_DTYPE_F32; dt <= FMSA_DTYPE_BF16; dt++)
                            for (int f = 0; f < 2; f++) {
                                fmsa_plan_request q;
                                fmsa_tile_plan p;
                                memset(&q, 0, sizeof q);
                                q.head_dim = dims[e], q.dtype = (fmsa_dtype)dt;
                                q.pass = FMSA_PASS_FORWARD, q.features = f ? FMSA_FEAT_CAUSAL : 0;
                                q.seqlen_q = sqs[b], q.seqlen_k = sks[c], q.batch_heads = bhs[a];
                                h_tiles = fnv1a(h_tiles, fmsa_plan_tiles(&devs[di], &q, &p) ==
                                                                 FMSA_SUCCESS ? p.num_splits : -1);
                            }
                }
    if (h_num != 0xb75bcb6e0c485ec4ull || h_tiles != 0x29344ba1f4ad02e5ull)
        fail_msg("split counts changed: fmsa_plan_num_splits hash 0x%016llx, fmsa_plan_tiles "
                 "hash 0x%016llx", (unsigned long long)h_num, (unsigned long long)h_tiles);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(tables_are_well_formed),
        cmocka_unit_test(every_row_fits_its_flagship),
        cmocka_unit_test(flagship_shapes),
        cmocka_unit_test(sweep_every_arch),
        cmocka_unit_test(cpu_plan_ignores_threads),
        cmocka_unit_test(unknown_archs_fall_back),
        cmocka_unit_test(bad_requests_are_rejected),
        cmocka_unit_test(more_sram_never_hurts),
        cmocka_unit_test(num_splits_invariants),
        cmocka_unit_test(splits_of_other_requests_unchanged),
        cmocka_unit_test(request_from_problem),
        cmocka_unit_test(opencl_cpu_family),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
