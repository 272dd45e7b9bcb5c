/*
 * Development check of the CUDA forward's FAST rows on a machine without a
 * GPU (not part of the library or of CMake), on shadow/'s intrinsics and
 * fmsa_cuda_emu_sched.h's scheduler (cooperative ucontext threads; warp
 * collectives resolved once all 32 lanes reach them; __syncthreads_or ORs
 * over the block), as fmsa_cuda_emu_bwd.cpp.  Runs
 * one FAST kernel on one contiguous bf16/f16 problem and compares O and the
 * LSE with an fp64 forward of the same inputs.  CLIMB > 0 gives the scores of
 * tests/test_grid_climb.c (each 64-key tile CLIMB base-2 units above the next
 * one), so the d128 row's stale pass must give tiles back.  Usage: run_fwd.sh, or
 *   fmsa_cuda_emu_fwd BF16 B SQ SK HQ HKV D CAUSAL CLIMB
 * A pass is max|err| / max|ref| < 2e-2 for O, max|err| < 1e-3 (1 + max |LSE|) for
 * the LSE, no NaN; a smoke test of the code paths, not the project's rule.
 * Build with -DFMSA_CUDA_FWD_STALE=0 for main's kernels.
 */
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "backends/cuda/kernels/fmsa_cuda_mma.cuh"

#include "backends/cuda/kernels/fmsa_cuda_fwd.cuh"
#ifdef EMU_WGMMA
/* the Hopper forward in development (kernels/fmsa_cuda_fwd_wg.cu): run_wg.sh */
#define FMSA_CUDA_FWD_WG_WS 1 /* the warp-specialised schedule too */
#include "backends/cuda/kernels/fmsa_cuda_fwd_wg.cu"
#endif /* EMU_WGMMA */
/* the fp32 P V (PTX loads) is instantiated by the 16-bit rows' P V dispatch but never runs there */
#define EMU_NO_PV_F32(DA, BN, ROWV)                                                               \
    template <> inline void fmsa_cuda_fwd_pv_f32<DA, BN, 2, ROWV>(float (*)[DA / 8][4], const float (*)[BN / 8][4], \
                                                                 unsigned, int, unsigned) { abort(); }
EMU_NO_PV_F32(128, 64, 256)
EMU_NO_PV_F32(64, 128, 128)
#define EMU_PARAMS fmsa_cuda_fwd_params
#include "fmsa_cuda_emu_sched.h"

#define EMU_ROW(name, dt, d, dv, variant, threads, bm, bn, stages, qreg, sync, minb, cs)        \
    static void name(const fmsa_cuda_fwd_params p) {                                          \
        fmsa_cuda_fwd_block<dt, d, dv, bm, bn, (threads) / 32, stages, qreg, variant, sync, cs>(p); \
    }
EMU_ROW(emu_bf16_d128, FMSA_CUDA_DT_BF16, 128, 128, FMSA_CUDA_FWD_FAST, 128, 128, 64, 2, 0, FMSA_CUDA_FWD_SYNC_U(FMSA_CUDA_FWD_FAST, 0), 2, 1)
EMU_ROW(emu_f16_d128, FMSA_CUDA_DT_F16, 128, 128, FMSA_CUDA_FWD_FAST, 128, 128, 64, 2, 0, FMSA_CUDA_FWD_SYNC_U(FMSA_CUDA_FWD_FAST, 0), 2, 1)
EMU_ROW(emu_bf16_d64, FMSA_CUDA_DT_BF16, 64, 64, FMSA_CUDA_FWD_FAST, 128, 128, 128, 2, 1, FMSA_CUDA_FWD_SYNC_U(FMSA_CUDA_FWD_FAST, 0), 2, 1)
EMU_ROW(emu_f16_d64, FMSA_CUDA_DT_F16, 64, 64, FMSA_CUDA_FWD_FAST, 128, 128, 128, 2, 1, FMSA_CUDA_FWD_SYNC_U(FMSA_CUDA_FWD_FAST, 0), 2, 1)

static double rnd(unsigned long long *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return ((*s >> 11) * (1.0 / 9007199254740992.0)) * 2 - 1;
}
int main(int argc, char **argv) {
    if (argc < 10) { fprintf(stderr, "usage: emu bf16 B sq sk hq hkv D causal climb [wl wr]\n"); return 2; }
    const int bf = atoi(argv[1]), B = atoi(argv[2]), sq = atoi(argv[3]), sk = atoi(argv[4]), hq = atoi(argv[5]),
              hkv = atoi(argv[6]), D = atoi(argv[7]), causal = atoi(argv[8]);
    const double climb = atof(argv[9]);
    /* a window (wl, wr; -1 unlimited) in place of causal's (-1, 0) */
    const int wl = argc > 11 ? atoi(argv[10]) : -1, wr = argc > 11 ? atoi(argv[11]) : causal ? 0 : -1;
    const float scale = 1.0f / sqrtf((float)D);
#ifdef EMU_WGMMA
    /* EMU_OVL=1: the overlapped schedule, 2: the warp-specialised one */
    const int ovl = getenv("EMU_OVL") ? atoi(getenv("EMU_OVL")) : 0;
    if (D != 128 && D != 256) { fprintf(stderr, "the Hopper forward has d128 and d256\n"); return 2; }
    const kfn kerns[2][2][3] = {
        {{fmsa_cuda_fwd_wg_f16_d128, fmsa_cuda_fwd_wg_f16_d128_ovl, fmsa_cuda_fwd_wg_f16_d128_ws},
         {fmsa_cuda_fwd_wg_bf16_d128, fmsa_cuda_fwd_wg_bf16_d128_ovl, fmsa_cuda_fwd_wg_bf16_d128_ws}},
        {{fmsa_cuda_fwd_wg_f16_d256, fmsa_cuda_fwd_wg_f16_d256_ovl, fmsa_cuda_fwd_wg_f16_d256_ws},
         {fmsa_cuda_fwd_wg_bf16_d256, fmsa_cuda_fwd_wg_bf16_d256_ovl, fmsa_cuda_fwd_wg_bf16_d256_ws}}};
    if (ovl < 0 || ovl > 2) { fprintf(stderr, "EMU_OVL %d: 0, 1 or 2\n", ovl); return 2; }
    kfn fn = kerns[D == 256][bf != 0][ovl];
    const int BM = FMSA_FWD_WG_BM, threads = ovl == 2 ? 384 : 256;
#else
    kfn fn = D == 128 ? (bf ? emu_bf16_d128 : emu_f16_d128) : (bf ? emu_bf16_d64 : emu_f16_d64);
    const int BM = 128, threads = 128;
#endif /* EMU_WGMMA */
    auto r16 = [&](double x) { return bf ? fmsa_half_to_float<1>(emu_bf16((float)x)) : fmsa_half_to_float<0>(emu_f16((float)x)); };
    auto to16 = [&](double x) { return bf ? emu_bf16((float)x) : emu_f16((float)x); };
    const size_t nq = (size_t)B * sq * hq * D, nk = (size_t)B * sk * hkv * D, no = (size_t)B * sq * hq * D;
    std::vector<double> q(nq), k(nk), v(nk), O(no, 0), lse((size_t)B * hq * sq);
    unsigned long long seed = 12345;
    for (auto &x : q) x = r16(2.0 * rnd(&seed)); for (auto &x : k) x = r16(2.0 * rnd(&seed));
    for (auto &x : v) x = r16(rnd(&seed));
    if (climb > 0) {
        const double half = (double)((sk + 63) / 64 - 1) / 2.0;
        for (size_t i = 0; i < nq; i += D) q[i] = 1.0;
        for (int b = 0; b < B; ++b) for (int j = 0; j < sk; ++j) for (int h = 0; h < hkv; ++h)
            k[(((size_t)b * sk + j) * hkv + h) * D] = r16(climb * (half - (double)(j / 64)) / (scale * 1.4426950408889634));
    }
    const int grp = hq / hkv, off = sk - sq;
    for (int b = 0; b < B; ++b) for (int h = 0; h < hq; ++h) for (int i = 0; i < sq; ++i) {
        double mx = -INFINITY, sum = 0; std::vector<double> s(sk, -INFINITY);
        for (int j = 0; j < sk; ++j) {
            if ((wr >= 0 && j > i + off + wr) || (wl >= 0 && j < i + off - wl)) continue;
            double a = 0; for (int d = 0; d < D; ++d) a += q[(((size_t)b * sq + i) * hq + h) * D + d] * k[(((size_t)b * sk + j) * hkv + h / grp) * D + d];
            s[j] = a * scale; mx = fmax(mx, s[j]);
        }
        for (int j = 0; j < sk; ++j) if (s[j] > -INFINITY) sum += exp(s[j] - mx);
        lse[((size_t)b * hq + h) * sq + i] = sum > 0 ? mx + log(sum) : -INFINITY;
        for (int d = 0; d < D; ++d) {
            double a = 0;
            for (int j = 0; j < sk; ++j) if (s[j] > -INFINITY) a += exp(s[j] - mx) / sum * v[(((size_t)b * sk + j) * hkv + h / grp) * D + d];
            O[(((size_t)b * sq + i) * hq + h) * D + d] = a;
        }
    }
    auto img = [&](const std::vector<double> &x) { std::vector<unsigned short> r(x.size()); for (size_t i = 0; i < x.size(); ++i) r[i] = to16(x[i]); return r; };
    std::vector<unsigned short> hq_ = img(q), hk = img(k), hv = img(v), go(no, 0xffff);
    std::vector<float> gl((size_t)B * hq * sq, NAN);
    fmsa_cuda_fwd_params f; memset(&f, 0, sizeof f);
    f.q = hq_.data(), f.k = hk.data(), f.v = hv.data(), f.o = go.data(), f.lse = gl.data();
    f.q_sb = (long long)sq * hq * D, f.q_ss = hq * D, f.q_sh = D;
    f.k_sb = (long long)sk * hkv * D, f.k_ss = hkv * D, f.k_sh = D;
    f.v_sb = f.k_sb, f.v_ss = f.k_ss, f.v_sh = f.k_sh;
    f.o_sb = (long long)sq * hq * D, f.o_ss = hq * D, f.o_sh = D;
    f.lse_sb = (long long)hq * sq, f.lse_sh = sq, f.lse_ss = 1;
    f.batch = B, f.seqlen_q = sq, f.seqlen_k = sk, f.heads_q = hq, f.heads_kv = hkv, f.head_dim = D, f.head_dim_v = D;
    f.total_q = sq, f.total_k = sk, f.num_splits = 1, f.window_left = wl, f.window_right = wr;
    f.softmax_scale = scale, f.scale_log2 = (float)(scale * 1.4426950408889634);
    const unsigned grid[3] = {(unsigned)((sq + BM - 1) / BM), (unsigned)hq, (unsigned)B};
    emu_launch(fn, grid, (unsigned)threads, &f);
    double emax = 0, rmax = 0, lmax = 0, lref = 0; long long nan = 0;
    for (size_t i = 0; i < no; ++i) {
        const double x = bf ? fmsa_half_to_float<1>(go[i]) : fmsa_half_to_float<0>(go[i]);
        if (!(x == x)) { ++nan; continue; }
        emax = fmax(emax, fabs(x - O[i])); rmax = fmax(rmax, fabs(O[i]));
    }
    for (size_t i = 0; i < lse.size(); ++i) {
        if (!(gl[i] == gl[i])) { ++nan; continue; }
        lmax = fmax(lmax, fabs(gl[i] - lse[i])); lref = fmax(lref, fabs(lse[i]));
    }
    const int ok = nan == 0 && emax / rmax < 2e-2 && lmax < 1e-3 * (1 + lref);
#if defined(EMU_WGMMA)
    const char *build = ovl == 2 ? "wgmma-ws" : ovl ? "wgmma-ovl" : "wgmma";
#elif defined(FMSA_CUDA_FWD_STALE_UNSAFE)
    const char *build = "unsafe";
#else
    const char *build = FMSA_CUDA_FWD_STALE ? "stale" : "main";
#endif
    printf("%s d%d B%d sq%d sk%d h%d:%d window %d,%d climb%g %s: o err %.3g / %.3g, lse err %.3g (|lse| %.3g), nan %lld, barriers %lld (%lld voted a repeat)  %s\n",
           bf ? "bf16" : "f16", D, B, sq, sk, hq, hkv, wl, wr, climb, build, emax, rmax, lmax, lref, nan,
           g_barriers, g_or_barriers, ok ? "OK" : "FAIL");
    return ok ? 0 : 1;
}
