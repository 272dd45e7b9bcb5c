/*
 * Development check of the CUDA fp32 backward (kernels/fmsa_cuda_bwd_f32.cu)
 * on a machine without a GPU, as fmsa_cuda_emu_bwd.cpp does for the 16-bit
 * one: the kernel file compiles as host C++ against shadow/'s
 * fmsa_cuda_mma.cuh (here its tf32 rounding and m16n8k8 tf32 mma, whose
 * accumulation is rounded toward zero: the pessimistic model of a truncating
 * tensor core), on cooperative threads.  It compares dQ, dK, dV with an fp64
 * backward of the same fp32 inputs and with an fp32 naive (recursive fp32
 * sums, the library's common/naive.c order), and prints the kernel's error
 * over the naive's.  Usage: run_f32.sh, or
 *   fmsa_cuda_emu_bwd_f32 B SQ SK HQ HKV D DV CAUSAL [DET [WL WR [SOFTCAP]]]
 * (EMU_AMP=a multiplies q: scores a times larger.)  A pass is max|err| / max|ref| < 1e-4 with no NaN (an indexing bug gives
 * O(1)); the error over the naive's is printed, not judged: the project's
 * rule is the device grids'.
 */
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "backends/cuda/kernels/fmsa_cuda_mma.cuh"

#define FMSA_CUDA_BWD_F32_ONLY(X) FMSA_CUDA_BWD_F32_INSTANCES(X)
#include "backends/cuda/kernels/fmsa_cuda_bwd_f32.cu"
#include "backends/cuda/kernels/fmsa_cuda_bwd_pre_post.cu"
#include "backends/cuda/cuda_bwd_f32_instances.h"
#define EMU_PARAMS fmsa_cuda_bwd_params
#include "fmsa_cuda_emu_sched.h"

#define KE(D, DV, BM, BN, ST) {FMSA_CUDA_BWD_STR(FMSA_CUDA_BWD_F32_SYM(D, DV, BM, BN, ST)), FMSA_CUDA_BWD_F32_SYM(D, DV, BM, BN, ST)},
static const kent kents[] = {FMSA_CUDA_BWD_F32_INSTANCES(KE)
    {"fmsa_cuda_bwd_pre_f32", fmsa_cuda_bwd_pre_f32}, {"fmsa_cuda_bwd_post_f32", fmsa_cuda_bwd_post_f32}};
static kfn find(const char *n) { return emu_find(kents, sizeof kents / sizeof kents[0], n); }
static void launch(const char *name, const unsigned grid[3], unsigned threads, const fmsa_cuda_bwd_params *p) {
    emu_launch(find(name), grid, threads, p);
}

/* ---- the problem, its fp64 reference and an fp32 naive ---- */
static double rnd(unsigned long long *s) { *s = *s * 6364136223846793005ull + 1442695040888963407ull; return ((*s >> 11) * (1.0 / 9007199254740992.0)) * 2 - 1; }
template <typename T> struct grads { std::vector<T> dq, dk, dv; };
/* the backward of one precision T (double: the reference; float: the naive), lse from its own forward */
template <typename T>
static void backward(int B, int sq, int sk, int hq, int hkv, int D, int Dv, long long wl, long long wr, float cap,
                     float scale, const std::vector<float> &q, const std::vector<float> &k, const std::vector<float> &v,
                     const std::vector<float> &dO, const std::vector<float> &O, grads<T> &r) {
    const int grp = hq / hkv, off = sk - sq;
    r.dq.assign(q.size(), 0), r.dk.assign(k.size(), 0), r.dv.assign(v.size(), 0);
    std::vector<T> s(sk), p(sk), c(sk);
    for (int b = 0; b < B; ++b) for (int h = 0; h < hq; ++h) for (int i = 0; i < sq; ++i) {
        const int hk = h / grp;
        const float *qi = &q[(((size_t)b * sq + i) * hq + h) * D], *gi = &dO[(((size_t)b * sq + i) * hq + h) * Dv];
        const float *oi = &O[(((size_t)b * sq + i) * hq + h) * Dv];
        T mx = -INFINITY, l = 0;
        for (int j = 0; j < sk; ++j) {
            const long long dg = (long long)i + off;
            s[j] = -INFINITY;
            if ((wl >= 0 && j < dg - wl) || (wr >= 0 && j > dg + wr)) continue;
            T a = 0; for (int d = 0; d < D; ++d) a += (T)qi[d] * (T)k[(((size_t)b * sk + j) * hkv + hk) * D + d];
            T x = a * (T)scale;
            c[j] = cap > 0 ? (T)cap * std::tanh(x / (T)cap) : x;
            s[j] = c[j];
            mx = std::fmax(mx, s[j]);
        }
        if (mx == -INFINITY) continue;
        for (int j = 0; j < sk; ++j) { p[j] = s[j] > -INFINITY ? std::exp(s[j] - mx) : 0; l += p[j]; }
        for (int j = 0; j < sk; ++j) p[j] /= l;
        T di = 0;
        for (int d = 0; d < Dv; ++d) di += (T)gi[d] * (T)oi[d]; /* D from the stored O, as the library's backward */
        for (int j = 0; j < sk; ++j) {
            if (p[j] == 0) continue;
            T dp = 0; for (int d = 0; d < Dv; ++d) dp += (T)gi[d] * (T)v[(((size_t)b * sk + j) * hkv + hk) * Dv + d];
            T ds = p[j] * (dp - di);
            if (cap > 0) ds *= 1 - (c[j] / (T)cap) * (c[j] / (T)cap);
            for (int d = 0; d < D; ++d) {
                r.dq[(((size_t)b * sq + i) * hq + h) * D + d] += ds * (T)k[(((size_t)b * sk + j) * hkv + hk) * D + d] * (T)scale;
                r.dk[(((size_t)b * sk + j) * hkv + hk) * D + d] += ds * (T)qi[d] * (T)scale;
            }
            for (int d = 0; d < Dv; ++d) r.dv[(((size_t)b * sk + j) * hkv + hk) * Dv + d] += p[j] * (T)gi[d];
        }
    }
}
int main(int argc, char **argv) {
    if (argc < 9) { fprintf(stderr, "usage: emu B sq sk hq hkv D Dv causal [det [wl wr [softcap]]]\n"); return 2; }
    const int B = atoi(argv[1]), sq = atoi(argv[2]), sk = atoi(argv[3]), hq = atoi(argv[4]), hkv = atoi(argv[5]),
              D = atoi(argv[6]), Dv = atoi(argv[7]), causal = atoi(argv[8]);
    const int det = argc > 9 ? atoi(argv[9]) : 0;
    long long wl = argc > 11 ? atoll(argv[10]) : -1, wr = argc > 11 ? atoll(argv[11]) : -1;
    const float cap = argc > 12 ? (float)atof(argv[12]) : 0.0f;
    if (causal) wr = 0;
    const float scale = 1.0f / sqrtf((float)D);
    const size_t nq = (size_t)B * sq * hq * D, nk = (size_t)B * sk * hkv * D, nv = (size_t)B * sk * hkv * Dv, no = (size_t)B * sq * hq * Dv;
    std::vector<float> q(nq), k(nk), v(nv), dO(no), O(no, 0), lse((size_t)B * hq * sq, -INFINITY);
    unsigned long long seed = 12345;
    const double amp = getenv("EMU_AMP") ? atof(getenv("EMU_AMP")) : 1.0; /* score amplitude */
    for (auto &x : q) x = (float)(2 * amp * rnd(&seed)); for (auto &x : k) x = (float)(2 * rnd(&seed));
    for (auto &x : v) x = (float)rnd(&seed); for (auto &x : dO) x = (float)rnd(&seed);
    /* O and lse: an fp64 forward rounded to fp32 (what a correct forward hands over) */
    {
        const int grp = hq / hkv, off = sk - sq;
        std::vector<double> s(sk);
        for (int b = 0; b < B; ++b) for (int h = 0; h < hq; ++h) for (int i = 0; i < sq; ++i) {
            double mx = -INFINITY, l = 0;
            for (int j = 0; j < sk; ++j) {
                const long long dg = (long long)i + off;
                s[j] = -INFINITY;
                if ((wl >= 0 && j < dg - wl) || (wr >= 0 && j > dg + wr)) continue;
                double a = 0; for (int d = 0; d < D; ++d) a += (double)q[(((size_t)b * sq + i) * hq + h) * D + d] * k[(((size_t)b * sk + j) * hkv + h / grp) * D + d];
                a *= scale;
                s[j] = cap > 0 ? cap * std::tanh(a / cap) : a;
                mx = std::fmax(mx, s[j]);
            }
            if (mx == -INFINITY) continue;
            for (int j = 0; j < sk; ++j) if (s[j] > -INFINITY) l += std::exp(s[j] - mx);
            lse[((size_t)b * hq + h) * sq + i] = (float)(mx + std::log(l));
            for (int d = 0; d < Dv; ++d) {
                double a = 0;
                for (int j = 0; j < sk; ++j) if (s[j] > -INFINITY) a += std::exp(s[j] - mx) / l * v[(((size_t)b * sk + j) * hkv + h / grp) * Dv + d];
                O[(((size_t)b * sq + i) * hq + h) * Dv + d] = (float)a;
            }
        }
    }
    grads<double> ref; grads<float> nai;
    backward<double>(B, sq, sk, hq, hkv, D, Dv, wl, wr, cap, scale, q, k, v, dO, O, ref);
    backward<float>(B, sq, sk, hq, hkv, D, Dv, wl, wr, cap, scale, q, k, v, dO, O, nai);

    std::vector<float> gdq(nq, NAN), gdk(nk, NAN), gdv(nv, NAN);
    fmsa_cuda_bwd_params p; memset(&p, 0, sizeof p);
    fmsa_cuda_fwd_params &f = p.fwd;
    f.q = q.data(), f.k = k.data(), f.v = v.data(), f.o = O.data(), f.lse = lse.data();
    f.q_sb = (long long)sq * hq * D, f.q_ss = hq * D, f.q_sh = D;
    f.k_sb = (long long)sk * hkv * D, f.k_ss = hkv * D, f.k_sh = D;
    f.v_sb = (long long)sk * hkv * Dv, f.v_ss = hkv * Dv, f.v_sh = Dv;
    f.o_sb = (long long)sq * hq * Dv, f.o_ss = hq * Dv, f.o_sh = Dv;
    f.lse_sb = (long long)hq * sq, f.lse_sh = sq, f.lse_ss = 1;
    f.batch = B, f.seqlen_q = sq, f.seqlen_k = sk, f.heads_q = hq, f.heads_kv = hkv, f.head_dim = D, f.head_dim_v = Dv;
    f.total_q = sq, f.total_k = sk, f.num_splits = 1, f.window_left = wl, f.window_right = wr;
    f.softmax_scale = scale, f.scale_log2 = (float)(scale * 1.4426950408889634), f.softcap = cap;
    p.dout = dO.data(), p.dq = gdq.data(), p.dk = gdk.data(), p.dv = gdv.data();
    p.do_sb = f.o_sb, p.do_ss = f.o_ss, p.do_sh = f.o_sh;
    p.dq_sb = f.q_sb, p.dq_ss = f.q_ss, p.dq_sh = f.q_sh;
    p.dk_sb = f.k_sb, p.dk_ss = f.k_ss, p.dk_sh = f.k_sh;
    p.dv_sb = f.v_sb, p.dv_ss = f.v_ss, p.dv_sh = f.v_sh;
    p.deterministic = det;
    const size_t smem = getenv("EMU_SMEM") ? (size_t)atoll(getenv("EMU_SMEM")) : 232448u;
    const fmsa_cuda_bwd_instance *inst = fmsa_cuda_bwd_f32_select(D, Dv, smem);
    fmsa_cuda_bwd_plan plan;
    if (!inst || fmsa_cuda_bwd_plan_make(&p, inst, &plan)) { fprintf(stderr, "no instance\n"); return 2; }
    std::vector<unsigned char> ws(plan.workspace_bytes + 256, 0xff);
    void *wsp = (void *)(((uintptr_t)ws.data() + 255) & ~(uintptr_t)255);
    fmsa_cuda_bwd_plan_bind(&plan, &p, wsp);
    launch(inst->pre, plan.grid_pre, inst->threads_aux, &p);
    launch(inst->main, plan.grid_main, inst->threads_main, &p);
    launch(inst->post, plan.grid_post, inst->threads_aux, &p);
    auto cmp = [&](const char *nm, const std::vector<float> &g, const std::vector<double> &r, const std::vector<float> &n) {
        double emax = 0, rmax = 0, nmax = 0; int nan = 0;
        for (size_t i = 0; i < r.size(); ++i) {
            if (!(g[i] == g[i])) { ++nan; continue; }
            emax = fmax(emax, fabs(g[i] - r[i])); rmax = fmax(rmax, fabs(r[i])); nmax = fmax(nmax, fabs(n[i] - r[i]));
        }
        printf("  %s max|err| %.3g  naive %.3g  (x%.2f)  max|ref| %.3g  rel %.3g  nan %d\n", nm, emax, nmax,
               nmax > 0 ? emax / nmax : 0.0, rmax, rmax > 0 ? emax / rmax : 0.0, nan);
        return nan == 0 && (rmax == 0 ? emax == 0 : emax / rmax < 1e-4);
    };
    printf("%s  B%d sq%d sk%d h%d:%d D%d Dv%d wl%lld wr%lld cap%g det%d\n", inst->main, B, sq, sk, hq, hkv, D, Dv, wl, wr, cap, det);
    int ok = cmp("dq", gdq, ref.dq, nai.dq) & cmp("dk", gdk, ref.dk, nai.dk) & cmp("dv", gdv, ref.dv, nai.dv);
    printf("  %s\n", ok ? "OK" : "FAIL");
    return ok ? 0 : 1;
}
