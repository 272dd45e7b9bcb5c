/*
 * Development check of the CUDA backward on a machine without a GPU (not part
 * of the library or of CMake; C++ because the kernels are): the kernel files
 * compile as host C++ against shadow/'s fmsa_cuda_mma.cuh, whose intrinsics
 * (ldmatrix, mma.sync m16n8k16, shuffles, cp.async, __syncthreads) run on
 * cooperative ucontext threads (fmsa_cuda_emu_sched.h, the three emulators'
 * one scheduler), each warp collective resolved once all 32 lanes have
 * reached it (a divergent warp or a deadlock stops the run).  It
 * runs the sm_80 code paths (no __CUDA_ARCH__; -D__CUDA_ARCH__=900 for sm_90's
 * dQ reductions) of the rows listed below on one
 * contiguous problem and compares dQ, dK, dV with an fp64 backward of the same
 * bf16/f16 inputs; shared memory starts as garbage, so padded columns must be
 * zero-filled by the kernel.  Usage: run.sh, or
 *   fmsa_cuda_emu_bwd BF16 B SQ SK HQ HKV D DV CAUSAL [DET]
 * A pass is max|err| / max|ref| < 2e-2 with no NaN (an indexing bug gives
 * O(1)); it is a smoke test of the index math, not the project's rule.
 */
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "backends/cuda/kernels/fmsa_cuda_mma.cuh"

#define FMSA_CUDA_BWD_ONLY(X) \
    X(bf16, 1, 256, 64, 64, 2, 1, 3) \
    X(bf16, 1, 192, 64, 64, 2, 2, 3) \
    X(bf16, 1, 128, 64, 128, 4, 2, 106499) \
    X(bf16, 1, 64, 128, 128, 4, 2, 106499) \
    X(bf16, 1, 256, 64, 64, 2, 2, 106499) \
    X(f16, 0, 64, 128, 128, 4, 2, 106499) \
    X(f16, 0, 128, 64, 128, 4, 2, 106499) \
    X(f16, 0, 256, 64, 64, 2, 2, 106499) \
    X(bf16, 1, 128, 64, 128, 4, 2, 237571) \
    X(f16, 0, 128, 64, 128, 4, 2, 237571) \
    X(bf16, 1, 64, 128, 128, 4, 2, 237571) \
    X(bf16, 1, 64, 128, 128, 4, 2, 139267) \
    X(bf16, 1, 256, 64, 64, 2, 2, 237571) \
    X(f16, 0, 256, 64, 64, 2, 2, 237571)
#define FMSA_CUDA_BWD_ONLY_V(X) \
    X(bf16, 1, 192, 128, 64, 64, 2, 2, 3) \
    X(bf16, 1, 64, 256, 64, 64, 2, 2, 3) \
    X(bf16, 1, 256, 256, 64, 64, 2, 1, 3) \
    X(f16, 0, 192, 128, 64, 64, 2, 2, 3) \
    X(bf16, 1, 576, 512, 64, 32, 2, 1, 3) \
    X(f16, 0, 576, 512, 64, 32, 2, 1, 3) \
    X(bf16, 1, 512, 512, 64, 32, 2, 1, 3) \
    X(f16, 0, 512, 512, 64, 32, 2, 1, 3)
#include "backends/cuda/kernels/fmsa_cuda_bwd.cu"
#include "backends/cuda/kernels/fmsa_cuda_bwd_pre_post.cu"
#ifdef EMU_WGMMA
/* the Hopper backward (run_wg.sh): its instance of D runs in place of the mma.sync one */
#include "backends/cuda/kernels/fmsa_cuda_bwd_wg.cu"
#include "backends/cuda/kernels/fmsa_cuda_bwd_wg256.cu"
#define KW(name, BF16, OPT, D, BM, BN, SMEM) {#name, name},
#define EMU_WG_KENTS FMSA_CUDA_BWD_WG_INSTANCES(KW) FMSA_CUDA_BWD_WG256_INSTANCES(KW)
#else
#define EMU_WG_KENTS
#endif /* EMU_WGMMA */
#define EMU_PARAMS fmsa_cuda_bwd_params
#include "fmsa_cuda_emu_sched.h"

#define KE(dt, BF16, D, BM, BN, WK, ST, OPT) {FMSA_CUDA_BWD_STR(FMSA_CUDA_BWD_MAIN_SYM(dt, D, BM, BN, WK, ST, OPT)), FMSA_CUDA_BWD_MAIN_SYM(dt, D, BM, BN, WK, ST, OPT)},
#define KEV(dt, BF16, D, DV, BM, BN, WK, ST, OPT) {FMSA_CUDA_BWD_STR(FMSA_CUDA_BWD_MAIN_SYM_V(dt, D, DV, BM, BN, WK, ST, OPT)), FMSA_CUDA_BWD_MAIN_SYM_V(dt, D, DV, BM, BN, WK, ST, OPT)},
static const kent kents[] = {FMSA_CUDA_BWD_ONLY(KE) FMSA_CUDA_BWD_ONLY_V(KEV) EMU_WG_KENTS
    {"fmsa_cuda_bwd_pre_bf16", fmsa_cuda_bwd_pre_bf16}, {"fmsa_cuda_bwd_pre_dv_bf16", fmsa_cuda_bwd_pre_dv_bf16},
    {"fmsa_cuda_bwd_post_bf16", fmsa_cuda_bwd_post_bf16}, {"fmsa_cuda_bwd_pre_f16", fmsa_cuda_bwd_pre_f16},
    {"fmsa_cuda_bwd_pre_dv_f16", fmsa_cuda_bwd_pre_dv_f16}, {"fmsa_cuda_bwd_post_f16", fmsa_cuda_bwd_post_f16},
    {"fmsa_cuda_bwd_post_t_bf16", fmsa_cuda_bwd_post_t_bf16}, {"fmsa_cuda_bwd_post_t_f16", fmsa_cuda_bwd_post_t_f16}};
static kfn find(const char *n) { return emu_find(kents, sizeof kents / sizeof kents[0], n); }
static void launch(const char *name, const unsigned grid[3], unsigned threads, const fmsa_cuda_bwd_params *p) {
    emu_launch(find(name), grid, threads, p);
}

/* ---- the problem and its fp64 reference ---- */
static double rnd(unsigned long long *s) { *s = *s * 6364136223846793005ull + 1442695040888963407ull; return ((*s >> 11) * (1.0 / 9007199254740992.0)) * 2 - 1; }
int main(int argc, char **argv) {
    if (argc < 10) { fprintf(stderr, "usage: emu bf16 B sq sk hq hkv D Dv causal [det]\n"); return 2; }
    const int bf = atoi(argv[1]), B = atoi(argv[2]), sq = atoi(argv[3]), sk = atoi(argv[4]), hq = atoi(argv[5]),
              hkv = atoi(argv[6]), D = atoi(argv[7]), Dv = atoi(argv[8]), causal = atoi(argv[9]);
    const int det = argc > 10 ? atoi(argv[10]) : 0;
    const float scale = 1.0f / sqrtf((float)D);
    auto r16 = [&](double x) { return bf ? fmsa_half_to_float<1>(emu_bf16((float)x)) : fmsa_half_to_float<0>(emu_f16((float)x)); };
    auto to16 = [&](double x) { return bf ? emu_bf16((float)x) : emu_f16((float)x); };
    const size_t nq = (size_t)B * sq * hq * D, nk = (size_t)B * sk * hkv * D, nv = (size_t)B * sk * hkv * Dv, no = (size_t)B * sq * hq * Dv;
    std::vector<double> q(nq), k(nk), v(nv), dO(no), O(no, 0), lse((size_t)B * hq * sq);
    unsigned long long seed = 12345;
    for (auto &x : q) x = r16(rnd(&seed)); for (auto &x : k) x = r16(rnd(&seed));
    for (auto &x : v) x = r16(rnd(&seed)); for (auto &x : dO) x = r16(rnd(&seed));
    const int grp = hq / hkv, off = sk - sq;
    auto Q = [&](int b, int i, int h, int d) { return q[(((size_t)b * sq + i) * hq + h) * D + d]; };
    auto K = [&](int b, int j, int h, int d) { return k[(((size_t)b * sk + j) * hkv + h) * D + d]; };
    auto V = [&](int b, int j, int h, int d) { return v[(((size_t)b * sk + j) * hkv + h) * Dv + d]; };
    std::vector<double> P((size_t)B * hq * sq * sk, 0);
    for (int b = 0; b < B; ++b) for (int h = 0; h < hq; ++h) for (int i = 0; i < sq; ++i) {
        double mx = -INFINITY, sum = 0; std::vector<double> s(sk, -INFINITY);
        for (int j = 0; j < sk; ++j) { if (causal && j > i + off) continue; double a = 0; for (int d = 0; d < D; ++d) a += Q(b, i, h, d) * K(b, j, h / grp, d); s[j] = a * scale; mx = fmax(mx, s[j]); }
        for (int j = 0; j < sk; ++j) if (s[j] > -INFINITY) sum += exp(s[j] - mx);
        const double l = sum > 0 ? mx + log(sum) : -INFINITY;
        lse[((size_t)b * hq + h) * sq + i] = (float)l;
        for (int j = 0; j < sk; ++j) P[(((size_t)b * hq + h) * sq + i) * sk + j] = s[j] > -INFINITY ? exp(s[j] - l) : 0;
        for (int d = 0; d < Dv; ++d) { double a = 0; for (int j = 0; j < sk; ++j) a += P[(((size_t)b * hq + h) * sq + i) * sk + j] * V(b, j, h / grp, d); O[(((size_t)b * sq + i) * hq + h) * Dv + d] = r16(a); }
    }
    std::vector<double> rdq(nq, 0), rdk(nk, 0), rdv(nv, 0);
    for (int b = 0; b < B; ++b) for (int h = 0; h < hq; ++h) for (int i = 0; i < sq; ++i) {
        double Di = 0; for (int d = 0; d < Dv; ++d) Di += dO[(((size_t)b * sq + i) * hq + h) * Dv + d] * O[(((size_t)b * sq + i) * hq + h) * Dv + d];
        for (int j = 0; j < sk; ++j) {
            const double p = P[(((size_t)b * hq + h) * sq + i) * sk + j]; if (p == 0) continue;
            double dp = 0; for (int d = 0; d < Dv; ++d) dp += dO[(((size_t)b * sq + i) * hq + h) * Dv + d] * V(b, j, h / grp, d);
            const double ds = p * (dp - Di);
            for (int d = 0; d < D; ++d) { rdq[(((size_t)b * sq + i) * hq + h) * D + d] += ds * K(b, j, h / grp, d) * scale; rdk[(((size_t)b * sk + j) * hkv + h / grp) * D + d] += ds * Q(b, i, h, d) * scale; }
            for (int d = 0; d < Dv; ++d) rdv[(((size_t)b * sk + j) * hkv + h / grp) * Dv + d] += p * dO[(((size_t)b * sq + i) * hq + h) * Dv + d];
        }
    }
    /* device images */
    auto img = [&](const std::vector<double> &x) { std::vector<unsigned short> r(x.size()); for (size_t i = 0; i < x.size(); ++i) r[i] = to16(x[i]); return r; };
    std::vector<unsigned short> hq_ = img(q), hk = img(k), hv = img(v), hdo = img(dO), ho = img(O);
    std::vector<unsigned short> gdq(nq, 0xffff), gdk(nk, 0xffff), gdv(nv, 0xffff);
    std::vector<float> hl(lse.begin(), lse.end());
    fmsa_cuda_bwd_params p; memset(&p, 0, sizeof p);
    fmsa_cuda_fwd_params &f = p.fwd;
    f.q = hq_.data(), f.k = hk.data(), f.v = hv.data(), f.o = ho.data(), f.lse = hl.data();
    f.q_sb = (long long)sq * hq * D, f.q_ss = hq * D, f.q_sh = D;
    f.k_sb = (long long)sk * hkv * D, f.k_ss = hkv * D, f.k_sh = D;
    f.v_sb = (long long)sk * hkv * Dv, f.v_ss = hkv * Dv, f.v_sh = Dv;
    f.o_sb = (long long)sq * hq * Dv, f.o_ss = hq * Dv, f.o_sh = Dv;
    f.lse_sb = (long long)hq * sq, f.lse_sh = sq, f.lse_ss = 1;
    f.batch = B, f.seqlen_q = sq, f.seqlen_k = sk, f.heads_q = hq, f.heads_kv = hkv, f.head_dim = D, f.head_dim_v = Dv;
    f.total_q = sq, f.total_k = sk, f.num_splits = 1, f.window_left = -1, f.window_right = causal ? 0 : -1;
    f.softmax_scale = scale, f.scale_log2 = (float)(scale * 1.4426950408889634);
    p.dout = hdo.data(), p.dq = gdq.data(), p.dk = gdk.data(), p.dv = gdv.data();
    p.do_sb = f.o_sb, p.do_ss = f.o_ss, p.do_sh = f.o_sh;
    p.dq_sb = f.q_sb, p.dq_ss = f.q_ss, p.dq_sh = f.q_sh;
    p.dk_sb = f.k_sb, p.dk_ss = f.k_ss, p.dk_sh = f.k_sh;
    p.dv_sb = f.v_sb, p.dv_ss = f.v_ss, p.dv_sh = f.v_sh;
    p.deterministic = det;
#ifdef EMU_WGMMA
    const fmsa_cuda_bwd_instance *inst = NULL;
    for (int i = 0; i < FMSA_CUDA_BWD_WG_NUM; ++i)
        if (fmsa_cuda_bwd_wg_list[i].bf16 == bf && fmsa_cuda_bwd_wg_list[i].head_dim == D) inst = &fmsa_cuda_bwd_wg_list[i];
    if (inst && !fmsa_cuda_bwd_wg_serves(&p, 1)) inst = NULL; /* Dv != D, a ragged query group, det */
#else
    const fmsa_cuda_bwd_instance *inst = fmsa_cuda_bwd_select(bf ? FMSA_DTYPE_BF16 : FMSA_DTYPE_F16, D, Dv, 232448u, 9);
#endif /* EMU_WGMMA */
    fmsa_cuda_bwd_plan plan;
    if (!inst || fmsa_cuda_bwd_plan_make(&p, inst, &plan)) { fprintf(stderr, "no instance\n"); return 2; }
    std::vector<unsigned char> ws(plan.workspace_bytes + 256, 0xff);
    void *wsp = (void *)(((uintptr_t)ws.data() + 255) & ~(uintptr_t)255);
    fmsa_cuda_bwd_plan_bind(&plan, &p, wsp);
    launch(inst->pre, plan.grid_pre, inst->threads_aux, &p);
    /* EMU_MAIN: another main kernel of the same tiles as the row (a variant's bits) */
    const char *mname = getenv("EMU_MAIN") ? getenv("EMU_MAIN") : inst->main;
    launch(mname, plan.grid_main, inst->threads_main, &p);
    launch(inst->post, plan.grid_post, inst->threads_aux, &p);
    auto cmp = [&](const char *nm, const std::vector<unsigned short> &g, const std::vector<double> &r) {
        double emax = 0, rmax = 0; int nan = 0;
        for (size_t i = 0; i < r.size(); ++i) {
            const double x = bf ? fmsa_half_to_float<1>(g[i]) : fmsa_half_to_float<0>(g[i]);
            if (!(x == x)) { ++nan; continue; }
            emax = fmax(emax, fabs(x - r[i])); rmax = fmax(rmax, fabs(r[i]));
        }
        printf("  %s max|err| %.3g  max|ref| %.3g  rel %.3g  nan %d\n", nm, emax, rmax, emax / rmax, nan);
        return nan == 0 && emax / rmax < 2e-2;
    };
    printf("%s  B%d sq%d sk%d h%d:%d D%d Dv%d causal%d det%d\n", mname, B, sq, sk, hq, hkv, D, Dv, causal, det);
    int ok = cmp("dq", gdq, rdq) & cmp("dk", gdk, rdk) & cmp("dv", gdv, rdv);
    printf("  %s\n", ok ? "OK" : "FAIL");
    return ok ? 0 : 1;
}
