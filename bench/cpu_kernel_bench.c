/*
 * cpu_kernel_bench: single-thread throughput of the CPU backend's micro-
 * kernels on the shapes one forward key tile runs (developer tool, not a
 * test).  It separates "the products are slow" from "the loop around them is
 * slow": if S = Q·Kᵀ and acc += P·V reach ~90% of the FMA peak here while the
 * whole forward pass reaches much less, the time goes to softmax, packing or
 * cache traffic, not to the micro-kernel.
 *
 *   cpu_kernel_bench [block_m block_n head_dim [pad [fp32|b16|both]]]
 *                                         (default 64 64 128 0 both)
 *
 * The kernel path is the dispatcher's (FLASHMSA_CPU_KERNEL picks another).
 * pad adds floats to every leading dimension (K panel, V rows, Q, S, acc):
 * a power-of-two stride maps a panel's rows onto few L1 sets.  Operands
 * rotate over 16 key tiles so K/V come from L2, as in the real loop.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backends/cpu/cpu_internal.h"
#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/cpu_peak.h"
#include "common/fmsa_softmax.h"

static double kb_now(void) {
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static float *kb_alloc(size_t n, float fill);

/// The bf16 tile loop of cpu_forward_b16.c (16-bit products: AMX, AVX512-BF16)
/// on its own: S = Q.K^T, the row softmax into bf16 P, acc += P.V.
static void kb_b16(const fmsa_cpu_kernels *kern, int bm, int bn, int d, double peak16) {
    const int dk = (d + 31) / 32 * 32, dn = (d + 15) / 16 * 16, kp = (bn + 31) / 32 * 32;
    /* KB_TILES: key tiles the operands rotate over (1: K/V stay hot);
     * KB_CHUNK: also time S + softmax in key chunks of that many columns */
    const int tiles_env = getenv("KB_TILES") ? atoi(getenv("KB_TILES")) : 16;
    const int tiles = tiles_env > 0 ? tiles_env : 16;
    const int chunk = getenv("KB_CHUNK") ? atoi(getenv("KB_CHUNK")) : 0;
    const int lds = bn + FMSA_CPU_B16_S_PAD; /* S rows as fmsa_cpu_b16_carve lays them out */
    const int64_t ke = fmsa_cpu_b16_panel_elems(d, bn), ve = fmsa_cpu_b16_panel_elems(bn, d);
    uint16_t *q = (uint16_t *)fmsa_cpu_aligned_alloc((size_t)bm * dk * 2);
    uint16_t *pp = (uint16_t *)fmsa_cpu_aligned_alloc((size_t)bm * bn * 2);
    uint16_t *kpan = (uint16_t *)fmsa_cpu_aligned_alloc((size_t)tiles * (size_t)ke * 2);
    uint16_t *vpan = (uint16_t *)fmsa_cpu_aligned_alloc((size_t)tiles * (size_t)ve * 2);
    float *stage = kb_alloc((size_t)bn * d, 1e-2f), *s = kb_alloc((size_t)bm * lds, 0.0f);
    float *acc = kb_alloc((size_t)bm * dn, 0.0f), m[1024], l[1024];
    double t[3] = {0, 0, 0}, t0, flops = 2.0 * bm * bn * d;
    int reps = (int)(2e10 / flops) + 1;
    if (!q || !pp || !kpan || !vpan || !stage || !s || !acc)
        return;
    for (int i = 0; i < bm * dk; ++i)
        q[i] = (uint16_t)(0x3c00 + i % 97); /* bf16 ~ 0.008.. */
    for (int t16 = 0; t16 < tiles; ++t16) {
        fmsa_cpu_pack_b16(d, bn, stage, 1, d, kpan + t16 * ke);
        fmsa_cpu_pack_b16(bn, d, stage, d, 1, vpan + t16 * ve);
    }
    for (int i = 0; i < bm; ++i)
        m[i] = -1e30f, l[i] = 0.0f;
    if (kern->b16_begin)
        kern->b16_begin();
    for (int r = 0; r < reps; ++r) {
        const int tile = r % tiles;
        t0 = kb_now();
        kern->gemm_b16(bm, bn, dk, q, dk, kpan + tile * ke, dk, s, lds, 0);
        t[0] += kb_now() - t0;
        t0 = kb_now();
        for (int i = 0; i < bm; ++i) { /* as fmsa_cpu_b16_rows (after the first tile) */
            const float *row = s + (size_t)i * lds;
            float xmax, c, sum;
            if (m[i] > -1e30f) {
                sum = kern->row_exp2_b16(row, bn, 0.125f, m[i], pp + (size_t)i * bn, kp, &xmax);
                if (fmsa_softmax_keeps(m[i], xmax * 0.125f)) {
                    l[i] += sum;
                    continue;
                }
            } else {
                xmax = kern->row_max(row, bn);
            }
            c = fmsa_softmax_update(&m[i], xmax * 0.125f);
            if (c != 1.0f) {
                l[i] *= c;
                kern->row_scale(acc + (size_t)i * dn, d, c);
            }
            l[i] += kern->row_exp2_b16(row, bn, 0.125f, m[i], pp + (size_t)i * bn, kp, NULL);
        }
        t[1] += kb_now() - t0;
        t0 = kb_now();
        kern->gemm_b16(bm, dn, kp, pp, bn, vpan + tile * ve, kp, acc, dn, 1);
        t[2] += kb_now() - t0;
    }
    printf("b16 S = Q.K^T  %8.1f GFLOP/s  %5.1f%% of the 16-bit peak  %7.3f "
           "us/tile\n",
           flops * reps / t[0] * 1e-9, peak16 > 0.0 ? 100.0 * flops * reps / t[0] * 1e-9 / peak16 : 0.0,
           t[0] / reps * 1e6);
    printf("b16 softmax    %8.3f ns/score  %7.3f us/tile\n", t[1] / reps / (bm * bn) * 1e9,
           t[1] / reps * 1e6);
    printf("b16 acc += P.V %8.1f GFLOP/s  %5.1f%% of the 16-bit peak  %7.3f "
           "us/tile\n",
           flops * reps / t[2] * 1e-9, peak16 > 0.0 ? 100.0 * flops * reps / t[2] * 1e-9 / peak16 : 0.0,
           t[2] / reps * 1e6);
    printf("b16 tile total %8.1f GFLOP/s\n", 2.0 * flops * reps / (t[0] + t[1] + t[2]) * 1e-9);
    if (chunk > 0 && chunk < bn && bn % chunk == 0 && chunk % 32 == 0) {
        /* S and its softmax in key chunks of `chunk` columns through one
         * bm x chunk buffer (L1-resident), as against the whole bm x bn S */
        float *sc = kb_alloc((size_t)bm * chunk, 0.0f);
        double tc = 0.0;
        for (int r = 0; r < reps && sc; ++r) {
            const int tile = r % tiles;
            t0 = kb_now();
            for (int c0 = 0; c0 < bn; c0 += chunk) {
                kern->gemm_b16(bm, chunk, dk, q, dk, kpan + tile * ke + (int64_t)(c0 / 16) * (dk / 2) * 32,
                               dk, sc, chunk, 0);
                for (int i = 0; i < bm; ++i) {
                    float xmax;
                    l[i] += kern->row_exp2_b16(sc + (size_t)i * chunk, chunk, 0.125f, m[i],
                                               pp + (size_t)i * bn + c0, chunk, &xmax);
                }
            }
            tc += kb_now() - t0;
        }
        printf("b16 S+softmax in %d-key chunks %7.3f us/tile (whole: %7.3f)\n", chunk,
               tc / reps * 1e6, (t[0] + t[1]) / reps * 1e6);
        fmsa_cpu_aligned_free(sc);
    }
    fmsa_cpu_aligned_free(q);
    fmsa_cpu_aligned_free(pp);
    fmsa_cpu_aligned_free(kpan);
    fmsa_cpu_aligned_free(vpan);
    fmsa_cpu_aligned_free(stage);
    fmsa_cpu_aligned_free(s);
    fmsa_cpu_aligned_free(acc);
}

static float *kb_alloc(size_t n, float fill) {
    float *x = (float *)fmsa_cpu_aligned_alloc(n * sizeof(float));
    for (size_t i = 0; x && i < n; ++i)
        x[i] = fill * (float)(int)(i % 13) - 0.01f;
    return x;
}

int main(int argc, char **argv) {
    const int bm = argc > 1 ? atoi(argv[1]) : 64, bn = argc > 2 ? atoi(argv[2]) : 64;
    const int d = argc > 3 ? atoi(argv[3]) : 128, pad = argc > 4 ? atoi(argv[4]) : 0;
    /* the 16-bit part runs AMX, which lowers the core's clock for a while:
     * time fp32 and b16 in separate processes when comparing them */
    const char *what = argc > 5 ? argv[5] : "both";
    const int do_fp32 = strcmp(what, "b16") != 0, do_b16 = strcmp(what, "fp32") != 0;
    const int tiles = 16, ldk = bn + pad, lds = bn + pad, ldd = d + pad;
    const fmsa_cpu_kernels *kern;
    double peak = 0.0, t0, t_qk, t_pv, t_sm, flops;
    float *q, *kt, *v, *s, *acc, m[1024], l[1024];
    int reps;
    if (bm < 1 || bn < 1 || d < 8 || bm > 1024 || pad < 0) {
        fprintf(stderr, "usage: cpu_kernel_bench [block_m block_n head_dim [pad "
                        "[fp32|b16|both]]]\n");
        return 2;
    }
    if (fmsa_cpu_kernels_get(&kern) != FMSA_SUCCESS) {
        fprintf(stderr, "cpu_kernel_bench: %s\n", fmsa_last_error());
        return 1;
    }
    fmsa_cpu_peak_measure(kern->isa, FMSA_CPU_PEAK_FP32, 1, 0.2, &peak);
    q = kb_alloc((size_t)bm * ldd, 1e-2f);
    kt = kb_alloc((size_t)tiles * d * ldk, 1e-2f);
    v = kb_alloc((size_t)tiles * bn * ldd, 1e-2f);
    s = kb_alloc((size_t)bm * lds, 0.0f);
    acc = kb_alloc((size_t)bm * ldd, 0.0f);
    if (!q || !kt || !v || !s || !acc)
        return 1;
    flops = 2.0 * bm * bn * d;
    reps = (int)(4e9 / flops) + 1;

    if (do_fp32) {
        t0 = kb_now();
        for (int r = 0; r < reps; ++r)
            kern->gemm(bm, bn, d, q, ldd, 1, kt + (size_t)(r % tiles) * d * ldk, ldk, s, lds, 0);
        t_qk = kb_now() - t0;
        t0 = kb_now();
        for (int r = 0; r < reps; ++r)
            kern->gemm(bm, d, bn, s, lds, 1, v + (size_t)(r % tiles) * bn * ldd, ldd, acc, ldd, 1);
        t_pv = kb_now() - t0;
        for (int i = 0; i < bm; ++i)
            m[i] = -1e30f, l[i] = 0.0f;
        t0 = kb_now();
        for (int r = 0; r < reps; ++r) { /* as cpu_fwd_update */
            kern->tile_softmax(s, bm, bn, lds, m, l, acc, ldd, NULL);
            for (int i = 0; i < bm; ++i)
                s[(size_t)i * lds + i % bn] -= 1.0f; /* keep the max moving a little */
        }
        t_sm = kb_now() - t0;
        printf("# cpu_kernel_bench: path %s, tile %d x %d, d %d, pad %d, 1 thread, "
               "peak %.1f GFLOP/s\n",
               kern->name, bm, bn, d, pad, peak);
        printf("S = Q.K^T   %8.1f GFLOP/s  %5.1f%% of peak  %7.3f us/tile\n",
               flops * reps / t_qk * 1e-9, 100.0 * flops * reps / t_qk * 1e-9 / peak,
               t_qk / reps * 1e6);
        printf("acc += P.V  %8.1f GFLOP/s  %5.1f%% of peak  %7.3f us/tile\n",
               flops * reps / t_pv * 1e-9, 100.0 * flops * reps / t_pv * 1e-9 / peak,
               t_pv / reps * 1e6);
        printf("softmax     %8.3f ns/score  %7.3f us/tile (%.1f%% of the two "
               "products)\n",
               t_sm / reps / (bm * bn) * 1e9, t_sm / reps * 1e6, 100.0 * t_sm / (t_qk + t_pv));
        printf("tile total  %8.1f GFLOP/s  %5.1f%% of peak\n",
               2.0 * flops * reps / (t_qk + t_pv + t_sm) * 1e-9,
               100.0 * 2.0 * flops * reps / (t_qk + t_pv + t_sm) * 1e-9 / peak);
    }
    if (do_b16 && kern->gemm_b16 && kern->row_exp2_b16 && bm % 16 == 0 && bn % 32 == 0) {
        double peak16 = 0.0;
        fmsa_cpu_peak_measure(kern->isa, FMSA_CPU_PEAK_BF16, 1, 0.2, &peak16);
        printf("# bf16 products, 16-bit peak %.1f GFLOP/s\n", peak16);
        kb_b16(kern, bm, bn, d, peak16); /* 0: no probe for this path, no percentages */
    }
    fmsa_cpu_aligned_free(q);
    fmsa_cpu_aligned_free(kt);
    fmsa_cpu_aligned_free(v);
    fmsa_cpu_aligned_free(s);
    fmsa_cpu_aligned_free(acc);
    return 0;
}
