/*
 * The CUDA forward's API v0.2 features against the fp64 reference with the
 * project's rule (common/check_rule.h: error <= 2x the naive same-precision
 * implementation's, plus the derived floor; any NaN fails): sinks (main and
 * split-KV kernels, one split and several, rows with no visible key), value
 * head dims of their own ((192, 128), (576, 512), (64, 256), padded pairs),
 * head dims 512 and 576 and the multiples of 8 between, fp32 inputs (3xTF32,
 * main and split-KV kernels), and fmsa_merge_states
 * (mixed dtypes, -inf sides, in place).  Outputs are poisoned (NaN bytes)
 * before each call; the reference reads the same host images.  The shared
 * feature grid (tests/test_grid_features.c) covers the combinations; this
 * suite is the CUDA kernels' own, runnable on its own on the device.
 * Exit 77 without a CUDA device.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/check_rule.h"
#include "common/fmsa_half.h"
#include "common/fmsa_softmax.h"
#include "common/naive.h"
#include "common/reference.h"
#include "common/validate.h"
#include "flashmsa/flashmsa.h"
#include "support/fmsa_test_check.h"
#include "support/fmsa_test_rng.h"

typedef struct fcase {
    const char *name;
    fmsa_dtype dt;
    int B, sq, sk, hq, hkv, D, Dv;
    int causal, sinks, window_left;
    float softcap;
    int force_splits; /* 0: the planner's choice (FLASHMSA_CUDA_SPLITS is not read) */
} fcase;

static const fcase CASES[] = {
    /* sinks on the main kernel: FAST, causal (rows whose keys are all after them
     * see only the sink when sq > sk), FULL (softcap), window */
    {"sinks d64 causal", FMSA_DTYPE_BF16, 2, 77, 50, 4, 2, 64, 64, 1, 1, -1, 0.0f, 0},
    {"sinks d128 f16", FMSA_DTYPE_F16, 1, 130, 200, 4, 4, 128, 128, 0, 1, -1, 0.0f, 0},
    {"sinks d256 softcap", FMSA_DTYPE_BF16, 1, 64, 100, 2, 1, 256, 256, 0, 1, -1, 20.0f, 0},
    {"sinks d128 window", FMSA_DTYPE_BF16, 1, 100, 100, 2, 2, 128, 128, 1, 1, 7, 0.0f, 0},
    {"sinks no keys", FMSA_DTYPE_BF16, 1, 20, 0, 2, 2, 64, 64, 0, 1, -1, 0.0f, 0},
    /* sinks on split-KV decode: one query row, GQA 4, long keys (several splits) */
    {"sinks decode d128", FMSA_DTYPE_BF16, 2, 1, 3000, 8, 2, 128, 128, 0, 1, -1, 0.0f, 0},
    {"sinks decode d64 f16 sq4", FMSA_DTYPE_F16, 1, 4, 700, 4, 1, 64, 64, 1, 1, -1, 0.0f, 0},
    {"decode (192,128)", FMSA_DTYPE_BF16, 1, 1, 1000, 4, 1, 192, 128, 0, 0, -1, 0.0f, 0},
    /* value head dims of their own */
    {"(192,128)", FMSA_DTYPE_BF16, 1, 150, 190, 4, 2, 192, 128, 1, 0, -1, 0.0f, 0},
    {"(192,128) sinks f16", FMSA_DTYPE_F16, 1, 90, 130, 2, 2, 192, 128, 0, 1, -1, 0.0f, 0},
    {"(64,256)", FMSA_DTYPE_BF16, 1, 100, 120, 2, 2, 64, 256, 0, 0, -1, 0.0f, 0},
    {"(8,8)", FMSA_DTYPE_BF16, 1, 33, 47, 2, 1, 8, 8, 1, 0, -1, 0.0f, 0},
    {"(136,120)", FMSA_DTYPE_BF16, 1, 70, 90, 2, 2, 136, 120, 0, 1, -1, 0.0f, 0},
    /* head dims above 256 */
    {"d512", FMSA_DTYPE_BF16, 1, 130, 170, 2, 1, 512, 512, 0, 0, -1, 0.0f, 0},
    {"d512 causal sinks", FMSA_DTYPE_BF16, 1, 100, 100, 2, 2, 512, 512, 1, 1, -1, 0.0f, 0},
    {"(576,512)", FMSA_DTYPE_BF16, 1, 70, 150, 2, 1, 576, 512, 1, 0, -1, 0.0f, 0},
    {"(576,512) f16 sinks softcap", FMSA_DTYPE_F16, 1, 40, 60, 2, 2, 576, 512, 0, 1, -1, 10.0f, 0},
    {"d576", FMSA_DTYPE_BF16, 1, 65, 33, 1, 1, 576, 576, 0, 1, -1, 0.0f, 0},
    {"(264,264)", FMSA_DTYPE_BF16, 1, 50, 80, 2, 2, 264, 264, 0, 0, -1, 0.0f, 0},
    {"(520,264)", FMSA_DTYPE_BF16, 1, 50, 80, 2, 2, 520, 264, 1, 0, -1, 0.0f, 0},
    {"decode d512", FMSA_DTYPE_BF16, 1, 1, 900, 4, 1, 512, 512, 0, 1, -1, 0.0f, 0},
    /* fp32 by 3xTF32: every instance (64, 128, 256), pairs, the FULL variant, long key
     * runs (the truncating tensor-core accumulation is what these would expose), and
     * split-KV decode at 64 / 128 / 256 */
    {"f32 d64 causal", FMSA_DTYPE_F32, 2, 77, 150, 4, 2, 64, 64, 1, 0, -1, 0.0f, 0},
    {"f32 d128 sinks", FMSA_DTYPE_F32, 1, 130, 200, 4, 4, 128, 128, 0, 1, -1, 0.0f, 0},
    {"f32 d128 4000 keys", FMSA_DTYPE_F32, 1, 64, 4000, 2, 1, 128, 128, 0, 0, -1, 0.0f, 0},
    {"f32 d256 softcap", FMSA_DTYPE_F32, 1, 64, 100, 2, 1, 256, 256, 0, 1, -1, 20.0f, 0},
    {"f32 (192,128) window", FMSA_DTYPE_F32, 1, 150, 190, 4, 2, 192, 128, 1, 0, 7, 0.0f, 0},
    {"f32 (8,8)", FMSA_DTYPE_F32, 1, 33, 47, 2, 1, 8, 8, 1, 0, -1, 0.0f, 0},
    {"f32 (136,120)", FMSA_DTYPE_F32, 1, 70, 90, 2, 2, 136, 120, 0, 1, -1, 0.0f, 0},
    {"f32 decode d128 sinks", FMSA_DTYPE_F32, 2, 1, 3000, 8, 2, 128, 128, 0, 1, -1, 0.0f, 0},
    {"f32 decode d64 sq4 causal", FMSA_DTYPE_F32, 1, 4, 700, 4, 1, 64, 64, 1, 1, -1, 0.0f, 0},
    {"f32 decode d256 8000 keys", FMSA_DTYPE_F32, 1, 1, 8000, 4, 1, 256, 256, 0, 0, -1, 0.0f, 0},
};

static int failures;

static double *dalloc(int64_t n) { return (double *)calloc((size_t)(n > 0 ? n : 1), sizeof(double)); }

/* Uploads n elements of dtype dt from the host image (or poison when host is NULL). */
static void *upload(fmsa_context *ctx, const void *host, size_t bytes) {
    void *d = NULL;
    unsigned char *poison = NULL;
    if (fmsa_malloc(ctx, bytes ? bytes : 16, &d) != FMSA_SUCCESS) return NULL;
    if (!host) {
        poison = (unsigned char *)malloc(bytes ? bytes : 16);
        memset(poison, 0xFF, bytes ? bytes : 16); /* NaN in every float format */
        host = poison;
    }
    if (bytes) fmsa_copy_to_device(ctx, d, 0, host, bytes);
    free(poison);
    return d;
}

static void random_fill(fmsa_test_rng *r, void *h, fmsa_dtype dt, int64_t n, double scale) {
    for (int64_t i = 0; i < n; ++i)
        fmsa_store_f32(h, (int)dt, i, (float)(scale * (2.0 * fmsa_test_rng_uniform(r) - 1.0)));
}

/* Applies the rule to one output; returns 1 when it holds. */
static int judge(const char *name, const char *what, const double *got, const double *nv,
                 const double *ref, int64_t n, fmsa_dtype store, int is_lse, double lse_max) {
    fmsa_rule_floor_spec f;
    fmsa_test_error e;
    char line[320];
    f.store_dtype = store;
    f.softmax_units = FMSA_RULE_SOFTMAX_UNITS_FWD;
    f.lse_max = lse_max;
    f.is_lse = is_lse;
    fmsa_test_compare(got, nv, ref, NULL, n, FMSA_RULE_FACTOR_FWD, &f, &e); /* forward: no single-key term */
    fmsa_test_error_format(what, &e, FMSA_RULE_FACTOR_FWD, line, sizeof line);
    printf("  %s %-28s %s\n", e.ok ? "ok  " : "FAIL", name, line);
    return e.ok;
}

static void run_case(fmsa_context *ctx, const fcase *c, uint64_t seed) {
    const int64_t nq = (int64_t)c->B * c->sq * c->hq * c->D, nk = (int64_t)c->B * c->sk * c->hkv * c->D;
    const int64_t nv = (int64_t)c->B * c->sk * c->hkv * c->Dv, no = (int64_t)c->B * c->sq * c->hq * c->Dv;
    const int64_t nl = (int64_t)c->B * c->hq * c->sq;
    const size_t e = fmsa_dtype_size(c->dt);
    int64_t qs[4] = {c->B, c->sq, c->hq, c->D}, ks[4] = {c->B, c->sk, c->hkv, c->D};
    int64_t vs[4] = {c->B, c->sk, c->hkv, c->Dv}, os[4] = {c->B, c->sq, c->hq, c->Dv};
    int64_t ls[3] = {c->B, c->hq, c->sq}, hs = c->hq;
    void *hq_ = malloc((size_t)nq * e + 16), *hk = malloc((size_t)nk * e + 16);
    void *hv = malloc((size_t)nv * e + 16), *ho = malloc((size_t)no * e + 16);
    float *hl = (float *)malloc((size_t)nl * 4 + 16), *hsink = (float *)malloc((size_t)c->hq * 4);
    double *got_o = dalloc(no), *got_l = dalloc(nl), *ref_o = dalloc(no), *ref_l = dalloc(nl);
    double *nv_o = dalloc(no), *nv_l = dalloc(nl);
    fmsa_test_rng r;
    fmsa_attention_desc desc, hdesc;
    fmsa_tensor q, k, v, o, lse, sinks;
    fmsa_call_tensors ht;
    fmsa_tensor tq, tk, tv, to, tl;
    fmsa_problem p;
    void *dq, *dk, *dv, *dout, *dl, *ds = NULL, *ws = NULL;
    size_t wsb = 0;
    fmsa_status st;
    int ok = 1;
    fmsa_test_rng_seed(&r, seed);
    random_fill(&r, hq_, c->dt, nq, 1.0);
    random_fill(&r, hk, c->dt, nk, 1.0);
    random_fill(&r, hv, c->dt, nv, 1.0);
    /* sink logits around the scores' range, one far above it (the sink dominates) */
    for (int h = 0; h < c->hq; ++h) hsink[h] = h == 1 ? 6.0f : (float)(3.0 * fmsa_test_rng_uniform(&r) - 1.0);
    dq = upload(ctx, hq_, (size_t)nq * e);
    dk = upload(ctx, hk, (size_t)nk * e);
    dv = upload(ctx, hv, (size_t)nv * e);
    dout = upload(ctx, NULL, (size_t)no * e);
    dl = upload(ctx, NULL, (size_t)nl * 4);
    if (c->sinks) ds = upload(ctx, hsink, (size_t)c->hq * 4);

    desc = fmsa_attention_desc_init(c->D);
    desc.causal = c->causal;
    desc.window_left = c->window_left;
    desc.softcap = c->softcap;
    q = fmsa_tensor_contiguous(dq, c->dt, 4, qs);
    k = fmsa_tensor_contiguous(dk, c->dt, 4, ks);
    v = fmsa_tensor_contiguous(dv, c->dt, 4, vs);
    o = fmsa_tensor_contiguous(dout, c->dt, 4, os);
    lse = fmsa_tensor_contiguous(dl, FMSA_DTYPE_F32, 3, ls);
    if (c->sinks) desc.sinks = sinks = fmsa_tensor_contiguous(ds, FMSA_DTYPE_F32, 1, &hs);
    st = fmsa_workspace_size(ctx, FMSA_PASS_FORWARD, &desc, &q, &k, &v, &wsb);
    if (st == FMSA_SUCCESS && wsb) st = fmsa_malloc(ctx, wsb, &ws);
    if (st == FMSA_SUCCESS) st = fmsa_forward(ctx, &desc, &q, &k, &v, &o, &lse, ws, wsb, NULL);
    if (st == FMSA_SUCCESS) st = fmsa_synchronize(ctx, NULL);
    if (st != FMSA_SUCCESS) {
        printf("  FAIL %-28s forward: status %d: %s\n", c->name, (int)st, fmsa_last_error());
        ++failures;
        goto done;
    }
    fmsa_copy_to_host(ctx, ho, dout, 0, (size_t)no * e);
    fmsa_copy_to_host(ctx, hl, dl, 0, (size_t)nl * 4);
    for (int64_t i = 0; i < no; ++i) got_o[i] = fmsa_load_f32(ho, (int)c->dt, i);
    for (int64_t i = 0; i < nl; ++i) got_l[i] = hl[i];

    /* the same problem over the host images, for the reference and the naive */
    hdesc = desc;
    if (c->sinks) hdesc.sinks = fmsa_tensor_contiguous(hsink, FMSA_DTYPE_F32, 1, &hs);
    tq = fmsa_tensor_contiguous(hq_, c->dt, 4, qs);
    tk = fmsa_tensor_contiguous(hk, c->dt, 4, ks);
    tv = fmsa_tensor_contiguous(hv, c->dt, 4, vs);
    to = fmsa_tensor_contiguous(ho, c->dt, 4, os);
    tl = fmsa_tensor_contiguous(hl, FMSA_DTYPE_F32, 3, ls);
    memset(&ht, 0, sizeof ht);
    ht.q = &tq, ht.k = &tk, ht.v = &tv, ht.o = &to, ht.lse = &tl;
    if (fmsa_problem_build(&p, FMSA_PASS_FORWARD, &hdesc, &ht, 0, NULL, NULL) != FMSA_SUCCESS ||
        fmsa_reference_forward(&p, ref_o, ref_l) != FMSA_SUCCESS || fmsa_naive_forward(&p, nv_o, nv_l) != 0) {
        printf("  FAIL %-28s oracle: %s\n", c->name, fmsa_last_error());
        ++failures;
        goto done;
    }
    {
        const double amax = fmsa_rule_lse_max(ref_l, nl);
        ok &= judge(c->name, "o", got_o, nv_o, ref_o, no, c->dt, 0, amax);
        ok &= judge(c->name, "lse", got_l, nv_l, ref_l, nl, FMSA_DTYPE_F32, 1, amax);
    }
    if (!ok) ++failures;
done:
    fmsa_free(ctx, dq), fmsa_free(ctx, dk), fmsa_free(ctx, dv), fmsa_free(ctx, dout);
    fmsa_free(ctx, dl), fmsa_free(ctx, ds), fmsa_free(ctx, ws);
    free(hq_), free(hk), free(hv), free(ho), free(hl), free(hsink);
    free(got_o), free(got_l), free(ref_o), free(ref_l), free(nv_o), free(nv_l);
}

/* fmsa_merge_states: dtypes (a, b, o), rows with -inf on one or both sides, in place. */
static void run_merge(fmsa_context *ctx, const char *name, fmsa_dtype da, fmsa_dtype db,
                      fmsa_dtype dout, int in_place, uint64_t seed) {
    enum { B = 2, S = 37, H = 3, DV = 72 };
    const int64_t n = (int64_t)B * S * H * DV, nl = (int64_t)B * H * S;
    int64_t os[4] = {B, S, H, DV}, ls[3] = {B, H, S};
    fmsa_dtype dts[3] = {da, db, dout};
    void *h[3], *d[3];
    float *hl[3];
    void *dlse[3];
    double *got = dalloc(n), *gl = dalloc(nl), *ref = dalloc(n), *rl = dalloc(nl), *nvo = dalloc(n),
           *nvl = dalloc(nl);
    fmsa_test_rng r;
    fmsa_tensor t[3], tl[3], ht[3], htl[3];
    fmsa_merge_problem mp;
    fmsa_status st;
    int ok = 1;
    fmsa_test_rng_seed(&r, seed);
    for (int i = 0; i < 3; ++i) {
        h[i] = malloc((size_t)n * 4);
        hl[i] = (float *)malloc((size_t)nl * 4);
        random_fill(&r, h[i], dts[i], n, 1.0);
        for (int64_t j = 0; j < nl; ++j) hl[i][j] = (float)(8.0 * fmsa_test_rng_uniform(&r) - 4.0);
    }
    /* empty sides: row 0 of a, row 1 of b, row 2 of both; their o holds NaN */
    for (int side = 0; side < 2; ++side)
        for (int row = 0; row < 3; ++row)
            if ((row == 0 && side == 0) || (row == 1 && side == 1) || row == 2) {
                hl[side][row] = -INFINITY; /* (b 0, h 0, s row) */
                for (int c = 0; c < DV; ++c) fmsa_store_f32(h[side], (int)dts[side], (int64_t)row * H * DV + c, NAN);
            }
    for (int i = 0; i < 3; ++i) {
        d[i] = upload(ctx, i == 2 ? NULL : h[i], (size_t)n * fmsa_dtype_size(dts[i]));
        dlse[i] = upload(ctx, i == 2 ? NULL : hl[i], (size_t)nl * 4);
        t[i] = fmsa_tensor_contiguous(d[i], dts[i], 4, os);
        tl[i] = fmsa_tensor_contiguous(dlse[i], FMSA_DTYPE_F32, 3, ls);
        ht[i] = fmsa_tensor_contiguous(h[i], dts[i], 4, os);
        htl[i] = fmsa_tensor_contiguous(hl[i], FMSA_DTYPE_F32, 3, ls);
    }
    if (in_place) t[2] = t[0], tl[2] = tl[0];
    st = fmsa_merge_states(ctx, &t[0], &tl[0], &t[1], &tl[1], &t[2], &tl[2], NULL);
    if (st == FMSA_SUCCESS) st = fmsa_synchronize(ctx, NULL);
    if (st != FMSA_SUCCESS) {
        printf("  FAIL merge %-22s status %d: %s\n", name, (int)st, fmsa_last_error());
        ++failures;
        goto done;
    }
    {
        const int out = in_place ? 0 : 2;
        void *img = malloc((size_t)n * 4);
        float *limg = (float *)malloc((size_t)nl * 4);
        fmsa_copy_to_host(ctx, img, d[out], 0, (size_t)n * fmsa_dtype_size(dts[out]));
        fmsa_copy_to_host(ctx, limg, dlse[out], 0, (size_t)nl * 4);
        for (int64_t j = 0; j < n; ++j) got[j] = fmsa_load_f32(img, (int)dts[out], j);
        for (int64_t j = 0; j < nl; ++j) gl[j] = limg[j];
        free(img);
        free(limg);
    }
    /* reference (fp64) and the naive: the same formula in fp32, output rounded to its dtype */
    ht[2] = fmsa_tensor_contiguous(h[2], dts[in_place ? 0 : 2], 4, os);
    if (fmsa_merge_problem_build(&mp, &ht[0], &htl[0], &ht[1], &htl[1], &ht[2], &htl[2]) != FMSA_SUCCESS ||
        fmsa_reference_merge(&mp, ref, rl) != FMSA_SUCCESS) {
        printf("  FAIL merge %-22s oracle: %s\n", name, fmsa_last_error());
        ++failures;
        goto done;
    }
    for (int64_t row = 0; row < nl; ++row) {
        const int64_t b = row / (H * S), hh = (row / S) % H, s = row % S;
        const int64_t li = b * H * S + hh * S + s, oi = ((b * S + s) * H + hh) * DV;
        float wa, wb;
        const float l = fmsa_softmax_merge_lse(hl[0][li], hl[1][li], &wa, &wb);
        nvl[li] = l;
        for (int c = 0; c < DV; ++c) {
            const float a = wa != 0.0f ? wa * fmsa_load_f32(h[0], (int)da, oi + c) : 0.0f;
            const float bb = wb != 0.0f ? wb * fmsa_load_f32(h[1], (int)db, oi + c) : 0.0f;
            float x = a + bb;
            fmsa_store_f32(h[2], (int)dts[in_place ? 0 : 2], 0, x);
            nvo[oi + c] = fmsa_load_f32(h[2], (int)dts[in_place ? 0 : 2], 0);
        }
    }
    {
        const double amax = fmsa_rule_lse_max(rl, nl);
        char nm[64];
        snprintf(nm, sizeof nm, "merge %s", name);
        ok &= judge(nm, "o", got, nvo, ref, n, dts[in_place ? 0 : 2], 0, amax);
        ok &= judge(nm, "lse", gl, nvl, rl, nl, FMSA_DTYPE_F32, 1, amax);
    }
    if (!ok) ++failures;
done:
    for (int i = 0; i < 3; ++i) {
        fmsa_free(ctx, d[i]), fmsa_free(ctx, dlse[i]);
        free(h[i]), free(hl[i]);
    }
    free(got), free(gl), free(ref), free(rl), free(nvo), free(nvl);
}

int main(void) {
    fmsa_context *ctx = NULL;
    int n = (int)(sizeof CASES / sizeof CASES[0]);
    if (fmsa_context_create(FMSA_BACKEND_CUDA, 0, &ctx) != FMSA_SUCCESS) {
        printf("no CUDA device: %s\n", fmsa_last_error());
        return 77;
    }
    for (int i = 0; i < n; ++i) run_case(ctx, &CASES[i], 1000u + (uint64_t)i);
    run_merge(ctx, "bf16", FMSA_DTYPE_BF16, FMSA_DTYPE_BF16, FMSA_DTYPE_BF16, 0, 7);
    run_merge(ctx, "f32+f16->bf16", FMSA_DTYPE_F32, FMSA_DTYPE_F16, FMSA_DTYPE_BF16, 0, 8);
    run_merge(ctx, "f32 in place", FMSA_DTYPE_F32, FMSA_DTYPE_F32, FMSA_DTYPE_F32, 1, 9);
    run_merge(ctx, "f16 in place", FMSA_DTYPE_F16, FMSA_DTYPE_BF16, FMSA_DTYPE_F16, 1, 10);
    fmsa_context_destroy(ctx);
    printf("%d case(s) failed\n", failures);
    return failures ? 1 : 0;
}
