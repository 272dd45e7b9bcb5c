/*
 * A CPU model of the CUDA fp32 forward's arithmetic (3xTF32, kernels/fmsa_cuda_fwd.cuh),
 * judged by the project's rule against the fp64 reference and the fp32 naive: the
 * evidence behind the chunked accumulation (NOTES_FWD.md, "fp32 inputs").  Dense, one
 * batch, K = V heads, uniform [-1, 1] inputs, key tiles of 32, P by exp2f times a
 * random factor within 2^-22 (ex2.approx's error).  Not built by CMake; from a build tree:
 *   gcc -O2 -std=c11 -fopenmp -I. -Iinclude -Itests -o /tmp/tf32_model \
 *       backends/cuda/dev/fmsa_tf32_model.c build/tests/libfmsa_testsupport.a \
 *       build/libflashmsa_static.a -lm -lpthread -ldl
 *   /tmp/tf32_model sq sk heads D causal  RZ APPROX VALSCALE CHUNK
 * RZ 0: each mma rounds to nearest; 1: truncates; 2: aligns every term to the largest
 * one's exponent with truncation (no guard bits), sums, truncates (the tensor-core
 * behaviour Fasi, Higham, Mikaitis and Pranesh measured, 2021).  CHUNK 1: the kernel's
 * scheme (64 columns of S and one key tile of P V from zero in two accumulators, added
 * in fp32); 0: one accumulator throughout.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/check_rule.h"
#include "common/naive.h"
#include "common/reference.h"
#include "common/validate.h"
#include "flashmsa/flashmsa.h"
#include "support/fmsa_test_check.h"
#include "support/fmsa_test_rng.h"

static int RZ = 0, APPROX = 1;
static float tf32(float x) { uint32_t u; memcpy(&u, &x, 4); u = (u + 0x1000u) & 0xffffe000u; memcpy(&x, &u, 4); return x; }
static float rnd(double x) {
    float f = (float)x;
    if (RZ && fabs((double)f) > fabs(x)) f = nextafterf(f, 0.0f);
    return f;
}

static int CHUNK = 0;
/* one mma: acc + sum of n exact products; RZ 2 aligns every term to the largest one's
 * exponent with truncation (no guard bits) before summing, then truncates */
static float mma1(float acc, const double *t, int n) {
    double s = acc;
    if (RZ == 2) {
        double mx = fabs((double)acc); int e;
        for (int k = 0; k < n; ++k) if (fabs(t[k]) > mx) mx = fabs(t[k]);
        if (mx == 0.0) return acc;
        frexp(mx, &e);
        double q = ldexp(1.0, e - 24);
        s = trunc((double)acc / q) * q;
        for (int k = 0; k < n; ++k) s += trunc(t[k] / q) * q;
        float f = (float)s; if (fabs((double)f) > fabs(s)) f = nextafterf(f, 0.0f);
        return f;
    }
    for (int k = 0; k < n; ++k) s += t[k];
    return rnd(s);
}
/* the kernel's two accumulators of one k8 step: ts += al bh + ah bl, tb += ah bh */
static void mma3s(float *tb, float *ts, const float *a, const float *b, int n) {
    double t[8];
    for (int k = 0; k < n; ++k) { float ah = tf32(a[k]), al = tf32(a[k] - ah), bh = tf32(b[k]); t[k] = (double)al * bh; }
    *ts = mma1(*ts, t, n);
    for (int k = 0; k < n; ++k) { float ah = tf32(a[k]), bh = tf32(b[k]), bl = tf32(b[k] - bh); t[k] = (double)ah * bl; }
    *ts = mma1(*ts, t, n);
    for (int k = 0; k < n; ++k) { float ah = tf32(a[k]), bh = tf32(b[k]); t[k] = (double)ah * bh; }
    *tb = mma1(*tb, t, n);
}
/* acc += sum_{k<n} a_k b_k as the three tf32 mma of one k8 step */
static float mma3(float acc, const float *a, const float *b, int n, int sa, int sb) {
    double t[8];
    (void)sa, (void)sb;
    for (int k = 0; k < n; ++k) { float ah = tf32(a[k]), al = tf32(a[k] - ah), bh = tf32(b[k]); t[k] = (double)al * bh; }
    acc = mma1(acc, t, n);
    for (int k = 0; k < n; ++k) { float ah = tf32(a[k]), bh = tf32(b[k]), bl = tf32(b[k] - bh); t[k] = (double)ah * bl; }
    acc = mma1(acc, t, n);
    for (int k = 0; k < n; ++k) { float ah = tf32(a[k]), bh = tf32(b[k]); t[k] = (double)ah * bh; }
    return mma1(acc, t, n);
}
static uint64_t st = 88172645463325252ull;
static double urand(void) { st ^= st << 13; st ^= st >> 7; st ^= st << 17; return (st >> 11) * (1.0 / 9007199254740992.0); }
static float ex2(float x) { float y = exp2f(x); if (APPROX) y *= (float)(1.0 + (2.0 * urand() - 1.0) * ldexp(1.0, -22)); return y; }

int main(int argc, char **argv) {
    int sq = atoi(argv[1]), sk = atoi(argv[2]), H = atoi(argv[3]), D = atoi(argv[4]), causal = atoi(argv[5]);
    RZ = argc > 6 ? atoi(argv[6]) : 0; APPROX = argc > 7 ? atoi(argv[7]) : 1;
    double valscale = argc > 8 ? atof(argv[8]) : 1.0;
    CHUNK = argc > 9 ? atoi(argv[9]) : 0;
    const int BN = 32;
    int64_t nq = (int64_t)sq * H * D, nk = (int64_t)sk * H * D, nl = (int64_t)H * sq;
    float *q = malloc(nq * 4), *k = malloc(nk * 4), *v = malloc(nk * 4), *o = malloc(nq * 4), *l = malloc(nl * 4);
    double *go = calloc(nq, 8), *gl = calloc(nl, 8), *ro = calloc(nq, 8), *rl = calloc(nl, 8), *no = calloc(nq, 8), *nlse = calloc(nl, 8);
    fmsa_test_rng r; fmsa_test_rng_seed(&r, 1234);
    for (int64_t i = 0; i < nq; ++i) q[i] = (float)(valscale * (2.0 * fmsa_test_rng_uniform(&r) - 1.0));
    for (int64_t i = 0; i < nk; ++i) k[i] = (float)(valscale * (2.0 * fmsa_test_rng_uniform(&r) - 1.0));
    for (int64_t i = 0; i < nk; ++i) v[i] = (float)(2.0 * fmsa_test_rng_uniform(&r) - 1.0);
    float scale = 1.0f / sqrtf((float)D), mult = scale * 1.4426950408889634f;
    float *s = malloc(sk * 4), *acc = malloc(D * 4), *p = malloc(BN * 4);
    for (int h = 0; h < H; ++h) for (int i = 0; i < sq; ++i) {
        const float *qi = q + ((int64_t)i * H + h) * D;
        float m = -INFINITY, lsum = 0.0f;
        for (int c = 0; c < D; ++c) acc[c] = 0.0f;
        int hi = causal ? (i + sk - sq + 1) : sk; if (hi > sk) hi = sk;
        for (int t0 = 0; t0 < sk; t0 += BN) {
            float tmax = -INFINITY;
            for (int j = t0; j < t0 + BN && j < sk; ++j) {
                const float *kj = k + ((int64_t)j * H + h) * D; float a = 0.0f;
                if (!CHUNK) for (int c = 0; c < D; c += 8) a = mma3(a, qi + c, kj + c, 8, 1, 1);
                else for (int c0 = 0; c0 < D; c0 += 64) {
                    float tb = 0.0f, ts = 0.0f;
                    for (int c = c0; c < c0 + 64 && c < D; c += 8) mma3s(&tb, &ts, qi + c, kj + c, 8);
                    a += tb; a += ts;
                }
                s[j] = j < hi ? a : -INFINITY; if (s[j] > tmax) tmax = s[j];
            }
            if (tmax == -INFINITY) continue;
            tmax *= mult;
            if (tmax > m) { float cc = m == -INFINITY ? 0.0f : ex2(m - tmax); m = tmax; lsum *= cc; for (int c = 0; c < D; ++c) acc[c] *= cc; }
            for (int j = t0; j < t0 + BN; ++j) { p[j - t0] = (j < sk && s[j] != -INFINITY) ? ex2(fmaf(s[j], mult, -m)) : 0.0f; lsum += p[j - t0]; }
            for (int c = 0; c < D; ++c) {
                float tb = 0.0f, ts = 0.0f;
                for (int j = 0; j < BN; j += 8) {
                    float vb[8]; for (int e = 0; e < 8; ++e) vb[e] = (t0 + j + e < sk) ? v[((int64_t)(t0 + j + e) * H + h) * D + c] : 0.0f;
                    if (CHUNK) mma3s(&tb, &ts, p + j, vb, 8); else acc[c] = mma3(acc[c], p + j, vb, 8, 1, 1);
                }
                if (CHUNK) { acc[c] += tb; acc[c] += ts; }
            }
        }
        float inv = 1.0f / lsum;
        for (int c = 0; c < D; ++c) o[((int64_t)i * H + h) * D + c] = acc[c] * inv;
        l[(int64_t)h * sq + i] = (m + log2f(lsum)) * 0.6931471805599453f;
    }
    for (int64_t i = 0; i < nq; ++i) go[i] = o[i];
    for (int64_t i = 0; i < nl; ++i) gl[i] = l[i];
    int64_t qs[4] = {1, sq, H, D}, ks[4] = {1, sk, H, D}, ls[3] = {1, H, sq};
    fmsa_attention_desc desc = fmsa_attention_desc_init(D); desc.causal = causal;
    fmsa_tensor tq = fmsa_tensor_contiguous(q, FMSA_DTYPE_F32, 4, qs), tk = fmsa_tensor_contiguous(k, FMSA_DTYPE_F32, 4, ks);
    fmsa_tensor tv = fmsa_tensor_contiguous(v, FMSA_DTYPE_F32, 4, ks), to = fmsa_tensor_contiguous(o, FMSA_DTYPE_F32, 4, qs);
    fmsa_tensor tl = fmsa_tensor_contiguous(l, FMSA_DTYPE_F32, 3, ls);
    fmsa_call_tensors ht; memset(&ht, 0, sizeof ht); ht.q = &tq, ht.k = &tk, ht.v = &tv, ht.o = &to, ht.lse = &tl;
    fmsa_problem pr;
    if (fmsa_problem_build(&pr, FMSA_PASS_FORWARD, &desc, &ht, 0, NULL, NULL) || fmsa_reference_forward(&pr, ro, rl) || fmsa_naive_forward(&pr, no, nlse)) { printf("oracle fail %s\n", fmsa_last_error()); return 1; }
    double amax = fmsa_rule_lse_max(rl, nl);
    const char *w[2] = {"o", "lse"};
    for (int t = 0; t < 2; ++t) {
        fmsa_rule_floor_spec f = {FMSA_DTYPE_F32, FMSA_RULE_SOFTMAX_UNITS_FWD, amax, t};
        fmsa_test_error e; char line[320];
        fmsa_test_compare(t ? gl : go, t ? nlse : no, t ? rl : ro, t ? nl : nq, FMSA_RULE_FACTOR_FWD, &f, &e);
        fmsa_test_error_format(w[t], &e, FMSA_RULE_FACTOR_FWD, line, sizeof line);
        printf("%s %s\n", e.ok ? "ok  " : "FAIL", line);
    }
    return 0;
}
