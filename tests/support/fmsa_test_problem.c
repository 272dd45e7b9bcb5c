#include "support/fmsa_test_problem.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/fmsa_half.h"
#include "support/fmsa_test_rng.h"

/*
 * Input distribution.  With the default scale 1/sqrt(D) and q, k ~ N(0, s^2)
 * the scores are ~N(0, s^4): s = 1.7 gives a score spread of ~2.9, so each
 * row has a few dominant keys and a long tail many orders of magnitude
 * smaller -- the regime where a wrong running max, a missed rescale or a
 * sloppy exp shows, unlike the nearly uniform softmax of N(0, 1) inputs.
 */
#define FMSA_TEST_QK_SIGMA 1.7

/// Extra elements added to rows and batches of non-contiguous layouts.
#define FMSA_TEST_PAD 8

/// Strides of a [B, S, H, D] tensor: contiguous, or heads-major with padded
/// rows and a padded batch (q.transpose(1, 2) of a padded buffer, the layout
/// frameworks produce when they split heads from a fused projection).
static void prob_strides4(const int64_t *shape, int strided, int64_t pad, int64_t *st) {
    int64_t S = shape[1] > 0 ? shape[1] : 1, H = shape[2] > 0 ? shape[2] : 1;
    st[3] = 1;
    if (!strided) {
        st[2] = shape[3];
        st[1] = H * shape[3];
        st[0] = S * st[1];
        return;
    }
    st[1] = shape[3] + pad;     /* padded rows */
    st[2] = S * st[1];          /* heads outermost inside a batch */
    st[0] = H * st[2] + pad;    /* padded batches */
}

static int prob_buf4(fmsa_test_buf *b, const char *name, fmsa_dtype dt, fmsa_test_role role,
                     int64_t n0, int64_t n1, int64_t n2, int64_t n3, int strided, int64_t pad) {
    int64_t shape[4] = {n0, n1, n2, n3}, st[4];
    prob_strides4(shape, strided, pad, st);
    return fmsa_test_buf_init(b, name, dt, role, 4, shape, st);
}

/// Fills a float buffer with sigma * N(0, 1), rounded to its dtype.
static int prob_fill_normal(fmsa_test_buf *b, fmsa_test_rng *r, double sigma) {
    double *dense = (double *)malloc(((size_t)b->count + 1) * sizeof(double));
    if (!dense) return -1;
    for (int64_t n = 0; n < b->count; ++n) dense[n] = sigma * fmsa_test_rng_normal(r);
    fmsa_test_buf_store(b, dense);
    free(dense);
    return 0;
}

static fmsa_view4 prob_view4(const fmsa_test_buf *b) {
    fmsa_view4 v;
    v.data = b->host;
    v.byte_offset = FMSA_TEST_GUARD_BYTES;
    v.sb = b->strides[0];
    v.ss = b->strides[1];
    v.sh = b->strides[2];
    return v;
}

/// Small-tensor view; extent-1 dimensions broadcast (stride 0), as flashmsa.h says.
static fmsa_viewn prob_viewn(const fmsa_test_buf *b) {
    fmsa_viewn v;
    int64_t s[3] = {0, 0, 0};
    for (int32_t i = 0; i < b->ndim && i < 3; ++i) s[i] = b->shape[i] == 1 ? 0 : b->strides[i];
    v.data = b->host;
    v.byte_offset = FMSA_TEST_GUARD_BYTES;
    v.s0 = s[0];
    v.s1 = s[1];
    v.s2 = s[2];
    return v;
}

/*
 * Varlen lengths: sequence 0 has the full (sq, sk) so the maxima are the
 * spec's; sequence 1 has no queries, sequence 2 no keys (its rows are fully
 * masked); the rest are random, empty ones included.
 */
static void prob_varlen_lengths(const fmsa_test_spec *s, fmsa_test_rng *r, int32_t *cq,
                                int32_t *ck) {
    cq[0] = ck[0] = 0;
    for (int64_t b = 0; b < s->batch; ++b) {
        int64_t lq = fmsa_test_rng_range(r, 0, s->sq), lk = fmsa_test_rng_range(r, 0, s->sk);
        if (b == 0) lq = s->sq, lk = s->sk;
        if (b == 1) lq = 0;
        if (b == 2) lk = 0, lq = s->sq > 0 ? fmsa_test_rng_range(r, 1, s->sq) : 0;
        cq[b + 1] = (int32_t)(cq[b] + lq);
        ck[b + 1] = (int32_t)(ck[b] + lk);
    }
}

/// Standard ALiBi slopes 2^(-8 (h+1) / H), varied per sequence for [B, Hq].
static int prob_alibi(fmsa_test_problem *tp) {
    const fmsa_test_spec *s = &tp->spec;
    int64_t shape[2] = {s->batch, s->hq};
    int nd = s->alibi == FMSA_TEST_ALIBI_BATCH ? 2 : 1;
    double *dense;
    if (fmsa_test_buf_init(&tp->alibi, "alibi", FMSA_DTYPE_F32, FMSA_TEST_INPUT, nd,
                           nd == 2 ? shape : shape + 1, NULL))
        return -1;
    dense = (double *)malloc(((size_t)tp->alibi.count + 1) * sizeof(double));
    if (!dense) return -1;
    for (int64_t n = 0; n < tp->alibi.count; ++n) {
        int64_t h = n % s->hq, b = n / s->hq;
        dense[n] = pow(2.0, -8.0 * (double)(h + 1) / (double)s->hq) * (1.0 + 0.25 * (double)b);
    }
    fmsa_test_buf_store(&tp->alibi, dense);
    free(dense);
    tp->has_alibi = 1;
    return 0;
}

/*
 * Bit-packed mask: each bit kept with probability 3/4 (the OR of two random
 * bytes), every row with (7 i + h) % 11 == 3 fully masked, and the unused
 * bits past the last key random (they must be ignored).
 */
static int prob_mask(fmsa_test_problem *tp, fmsa_test_rng *r) {
    const fmsa_test_spec *s = &tp->spec;
    int64_t rows = tp->host.seqlen_q, width = (tp->host.seqlen_k + 7) / 8 + (s->strided ? 2 : 0);
    int64_t shape[4] = {s->mask == FMSA_TEST_MASK_BATCH1 ? 1 : s->batch, s->hq, rows, width};
    int64_t st[4] = {s->hq * rows * width, rows * width, width, 1};
    unsigned char *dense;
    if (s->mask == FMSA_TEST_MASK_HEADSTRIDE0) {
        st[1] = 0;
        st[0] = rows * width;
    }
    if (fmsa_test_buf_init(&tp->mask, "mask", FMSA_DTYPE_U8, FMSA_TEST_INPUT, 4, shape, st))
        return -1;
    dense = (unsigned char *)malloc((size_t)tp->mask.count + 1);
    if (!dense) return -1;
    for (int64_t n = 0; n < tp->mask.count; ++n) {
        int64_t i = (n / width) % rows, h = (n / (width * rows)) % s->hq;
        /* with head stride 0 every head reads head 0's bytes: keep heads alike */
        if (s->mask == FMSA_TEST_MASK_HEADSTRIDE0) h = 0;
        dense[n] = (unsigned char)(fmsa_test_rng_next(r) | fmsa_test_rng_next(r));
        if ((7 * i + h) % 11 == 3) dense[n] = 0;
        /* spec.nan: keys 8k + 2 and the whole byte of keys 16..23 hidden from
         * every row of every head, so that some keys are seen by no row */
        if (s->nan) dense[n] &= (unsigned char)((n % width) == 2 ? 0x00 : 0xFB);
    }
    fmsa_test_buf_store_u8(&tp->mask, dense);
    free(dense);
    tp->has_mask = 1;
    return 0;
}

/// cu_seqlens (varlen) into buffers; returns the totals.
static int prob_varlen(fmsa_test_problem *tp, fmsa_test_rng *r, int64_t *tq, int64_t *tk) {
    const fmsa_test_spec *s = &tp->spec;
    int64_t n = s->batch + 1;
    int32_t *cq = (int32_t *)malloc((size_t)n * sizeof(int32_t));
    int32_t *ck = (int32_t *)malloc((size_t)n * sizeof(int32_t));
    int rc = -1;
    if (cq && ck) {
        prob_varlen_lengths(s, r, cq, ck);
        *tq = cq[s->batch];
        *tk = ck[s->batch];
        if (!fmsa_test_buf_init(&tp->cu_q, "cu_seqlens_q", FMSA_DTYPE_I32, FMSA_TEST_INPUT, 1, &n,
                                NULL) &&
            !fmsa_test_buf_init(&tp->cu_k, "cu_seqlens_k", FMSA_DTYPE_I32, FMSA_TEST_INPUT, 1, &n,
                                NULL)) {
            fmsa_test_buf_store_i32(&tp->cu_q, cq);
            fmsa_test_buf_store_i32(&tp->cu_k, ck);
            rc = 0;
        }
    }
    free(cq);
    free(ck);
    tp->has_varlen = 1;
    /* Half the seeds let the library compute the maxima (max_seqlen = 0). */
    tp->max_seqlen_q = s->seed % 2 ? 0 : s->sq;
    tp->max_seqlen_k = s->seed % 2 ? 0 : s->sk;
    return rc;
}

/*
 * Paged KV: max_pages = ceil(sk / page) pages per sequence drawn without
 * replacement from a shuffled pool with 3 spare pages, so pages are neither
 * contiguous nor in order.  With seqused_k, sequence 0 uses sk keys and the
 * others a random count; without it every sequence has max_pages * page keys.
 */
static int prob_paged(fmsa_test_problem *tp, fmsa_test_rng *r, int64_t *num_pages,
                      int64_t *keys) {
    const fmsa_test_spec *s = &tp->spec;
    int64_t max_pages = (s->sk + s->page - 1) / s->page, cap = max_pages * s->page;
    int64_t np = s->batch * max_pages + 3;
    int64_t shape[2] = {s->batch, max_pages}, st[2] = {max_pages + (s->strided ? 2 : 0), 1};
    int32_t *perm = (int32_t *)malloc((size_t)np * sizeof(int32_t));
    int32_t *used = (int32_t *)malloc(((size_t)s->batch + 1) * sizeof(int32_t));
    int rc = -1;
    *num_pages = np;
    *keys = s->seqused ? 0 : cap;
    if (perm && used &&
        !fmsa_test_buf_init(&tp->block_table, "block_table", FMSA_DTYPE_I32, FMSA_TEST_INPUT, 2,
                            shape, st)) {
        for (int64_t n = 0; n < np; ++n) perm[n] = (int32_t)n;
        for (int64_t n = np - 1; n > 0; --n) {
            int64_t m = fmsa_test_rng_range(r, 0, n);
            int32_t t = perm[n];
            perm[n] = perm[m];
            perm[m] = t;
        }
        fmsa_test_buf_store_i32(&tp->block_table, perm);
        rc = 0;
        if (s->seqused) {
            for (int64_t b = 0; b < s->batch; ++b) {
                used[b] = (int32_t)(b == 0 ? s->sk : fmsa_test_rng_range(r, 0, cap));
                if (used[b] > *keys) *keys = used[b];
            }
            rc = fmsa_test_buf_init(&tp->seqused, "seqused_k", FMSA_DTYPE_I32, FMSA_TEST_INPUT, 1,
                                    &s->batch, NULL);
            if (!rc) fmsa_test_buf_store_i32(&tp->seqused, used);
            tp->has_seqused = 1;
        }
    }
    free(perm);
    free(used);
    tp->has_paged = 1;
    tp->host.page_size = s->page;
    tp->host.max_pages = max_pages;
    tp->host.num_pages = np;
    return rc;
}

/*
 * Sink logits [Hq] (strided layouts: element stride 3), drawn uniformly in
 * [-2, 4]: the row LSEs of these inputs are mostly 1..6, so the sink's share
 * ranges from negligible to most of the row.  EXTREME adds -inf (no sink)
 * and +12 (nearly all weight on the sink, O small and mostly cancellation).
 */
static int prob_sinks(fmsa_test_problem *tp, fmsa_test_rng *r) {
    const fmsa_test_spec *s = &tp->spec;
    int64_t shape[1] = {s->hq}, st[1] = {s->strided ? 3 : 1};
    double *dense;
    if (fmsa_test_buf_init(&tp->sinks, "sinks", FMSA_DTYPE_F32, FMSA_TEST_INPUT, 1, shape, st))
        return -1;
    dense = (double *)malloc(((size_t)s->hq + 1) * sizeof(double));
    if (!dense) return -1;
    for (int64_t h = 0; h < s->hq; ++h) {
        dense[h] = -2.0 + 6.0 * fmsa_test_rng_uniform(r);
        if (s->sinks == FMSA_TEST_SINKS_EXTREME && h == 0) dense[h] = -INFINITY;
        if (s->sinks == FMSA_TEST_SINKS_EXTREME && h == 1) dense[h] = 12.0;
    }
    fmsa_test_buf_store(&tp->sinks, dense);
    free(dense);
    tp->has_sinks = 1;
    return 0;
}

/// The host fmsa_problem's scalar fields, as flashmsa.h defines them.
static void prob_host_scalars(fmsa_test_problem *tp) {
    const fmsa_test_spec *s = &tp->spec;
    fmsa_problem *p = &tp->host;
    p->pass = s->pass;
    p->dtype = s->dtype;
    p->batch = s->batch;
    p->heads_q = s->hq;
    p->heads_kv = s->hkv;
    p->head_dim = s->d;
    p->head_dim_v = fmsa_test_spec_dv(s);
    p->softmax_scale = s->scale != 0.0f ? s->scale : 1.0f / sqrtf((float)s->d);
    p->softcap = s->softcap;
    p->window_left = s->wl;
    p->window_right = s->causal ? 0 : s->wr;
    p->causal = s->causal;
    p->deterministic = s->det;
    p->has_lse = s->pass == FMSA_PASS_BACKWARD || s->lse;
}

/* spec.nan: writes NaN into the K row and +-Inf / NaN into the V row of
 * every key that no query row of any head of its kv head's group sees
 * (window, mask, sequence bounds as the reference reads them), which must
 * change no output: their P and dS are 0, and 0 * NaN must never be formed. */
static void prob_poison_dead_keys(fmsa_test_problem *tp) {
    const fmsa_problem *p = &tp->host;
    const int64_t group = p->heads_q / p->heads_kv;
    const size_t es = fmsa_dtype_size(p->dtype);
    /* NaN, +Inf, -Inf per dtype (f32 / f16 / bf16 bit patterns) */
    const uint32_t f32[3] = {0x7fc00000u, 0x7f800000u, 0xff800000u};
    const uint16_t f16[3] = {0x7e00u, 0x7c00u, 0xfc00u}, bf16[3] = {0x7fc0u, 0x7f80u, 0xff80u};
    for (int64_t b = 0; b < p->batch; ++b) {
        const fmsa_seq seq = fmsa_problem_seq(p, b);
        for (int64_t hk = 0; hk < p->heads_kv; ++hk)
            for (int64_t j = 0; j < seq.sk; ++j) {
                int seen = 0;
                for (int64_t g = 0; g < group && !seen; ++g)
                    for (int64_t i = 0; i < seq.sq && !seen; ++i) {
                        const int64_t h = hk * group + g;
                        seen = fmsa_window_visible(i, j, seq.sq, seq.sk, p->window_left,
                                                   p->window_right);
                        if (seen && p->has_mask) {
                            const unsigned char *row =
                                (const unsigned char *)fmsa_viewn_host(&p->mask) +
                                b * p->mask.s0 + h * p->mask.s1 + i * p->mask.s2;
                            seen = (row[j >> 3] >> (j & 7)) & 1;
                        }
                    }
                if (seen) continue;
                for (int which = 0; which < 2; ++which) {
                    const fmsa_view4 *view = which ? &p->v : &p->k;
                    char *base = fmsa_view4_host(view) +
                                 fmsa_problem_k_offset(p, view, &seq, b, j, hk) * (int64_t)es;
                    const int64_t D = which ? p->head_dim_v : p->head_dim;
                    for (int64_t d = 0; d < D; ++d) {
                        /* K: NaN; V: NaN, +Inf, -Inf in turn */
                        const int kind = which ? (int)((j + d) % 3) : 0;
                        if (es == 4) memcpy(base + d * 4, &f32[kind], 4);
                        else memcpy(base + d * 2, p->dtype == FMSA_DTYPE_F16 ? &f16[kind]
                                                                             : &bf16[kind], 2);
                    }
                }
                tp->nan_keys++;
            }
    }
}

/* spec.climb: q[.., 0] = 1 and k[.., j, .., 0] = c (L / 2 - j / 64) / (scale log2 e),
 * L + 1 the 64-key tiles: every score of tile t (keys 64 t ..) sits c (base 2) above
 * those of tile t + 1 (to the k rounding), centred on 0 so |LSE| stays ~ c L / 2.  A
 * kernel that walks the keys from the last tile down meets, on every interior tile,
 * scores far above its running max (c >= 128: 2^(s - m) overflows fp32). */
static int prob_climb(fmsa_test_problem *tp) {
    const fmsa_test_spec *s = &tp->spec;
    const double sc = s->scale > 0.0f ? s->scale : 1.0 / sqrt((double)s->d);
    const double half = (double)((s->sk + 63) / 64 - 1) / 2.0;
    if (s->varlen || s->page > 0 || s->scale < 0.0f) return -1;
    for (int64_t b = 0; b < s->batch; ++b)
        for (int64_t j = 0; j < s->sq; ++j)
            for (int64_t h = 0; h < s->hq; ++h)
                fmsa_store_f32(fmsa_test_buf_origin(&tp->q, tp->q.host), (int)tp->q.dtype,
                               fmsa_test_buf_offset(&tp->q, ((b * s->sq + j) * s->hq + h) * s->d),
                               1.0f);
    for (int64_t b = 0; b < s->batch; ++b)
        for (int64_t j = 0; j < s->sk; ++j)
            for (int64_t h = 0; h < s->hkv; ++h)
                fmsa_store_f32(fmsa_test_buf_origin(&tp->k, tp->k.host), (int)tp->k.dtype,
                               fmsa_test_buf_offset(&tp->k, ((b * s->sk + j) * s->hkv + h) * s->d),
                               (float)(s->climb * (half - (double)(j / 64)) / (sc * 1.4426950408889634)));
    return 0;
}

int fmsa_test_problem_create(fmsa_test_problem *tp, const fmsa_test_spec *spec) {
    const fmsa_test_spec *s;
    fmsa_test_rng r;
    fmsa_problem *p = &tp->host;
    int64_t bq, rows_q, bk, rows_k, keys, dv = fmsa_test_spec_dv(spec);
    fmsa_dtype dt = spec->dtype;
    int bwd = spec->pass == FMSA_PASS_BACKWARD;
    fmsa_test_role out = FMSA_TEST_OUTPUT, in = FMSA_TEST_INPUT;
    int rc = 0;

    memset(tp, 0, sizeof *tp);
    tp->spec = *spec;
    s = &tp->spec;
    fmsa_test_rng_seed(&r, s->seed);
    prob_host_scalars(tp);

    bq = s->batch, rows_q = s->sq, bk = s->batch, rows_k = s->sk, keys = s->sk;
    if (s->varlen) {
        rc |= prob_varlen(tp, &r, &rows_q, &rows_k);
        bq = bk = 1;
    } else if (s->page > 0) {
        rc |= prob_paged(tp, &r, &bk, &keys);
        rows_k = s->page;
    }
    p->seqlen_q = s->sq;
    p->seqlen_k = keys;
    p->total_q = rows_q;
    p->total_k = rows_k;
    p->is_varlen = tp->has_varlen;
    p->is_paged = tp->has_paged;
    p->has_seqused_k = tp->has_seqused;

    rc |= prob_buf4(&tp->q, "q", dt, in, bq, rows_q, s->hq, s->d, s->strided, FMSA_TEST_PAD);
    rc |= prob_buf4(&tp->k, "k", dt, in, bk, rows_k, s->hkv, s->d, s->strided, FMSA_TEST_PAD);
    rc |= prob_buf4(&tp->v, "v", dt, in, bk, rows_k, s->hkv, dv, s->strided, 2 * FMSA_TEST_PAD);
    rc |= prob_buf4(&tp->o, "o", dt, bwd ? in : out, bq, rows_q, s->hq, dv, s->strided,
                    2 * FMSA_TEST_PAD);
    {
        /* lse [Bq, Hq, rows]; non-contiguous: stored row-major as [Bq, rows, Hq+1]
         * (transposed, padded heads) plus a padded batch.  dlse is laid out alike. */
        int64_t shape[3] = {bq, s->hq, rows_q};
        int64_t st[3] = {(rows_q > 0 ? rows_q : 1) * (s->hq + 1) + 2, 1, s->hq + 1};
        rc |= fmsa_test_buf_init(&tp->lse, "lse", FMSA_DTYPE_F32, bwd ? in : out, 3, shape,
                                 s->strided ? st : NULL);
        if (bwd && s->dlse) {
            rc |= fmsa_test_buf_init(&tp->dlse, "dlse", FMSA_DTYPE_F32, in, 3, shape,
                                     s->strided ? st : NULL);
            tp->has_dlse = 1;
        }
    }
    if (bwd) {
        rc |= prob_buf4(&tp->dout, "dout", dt, in, bq, rows_q, s->hq, dv, s->strided,
                        3 * FMSA_TEST_PAD);
        rc |= prob_buf4(&tp->dq, "dq", dt, out, bq, rows_q, s->hq, s->d, s->strided,
                        FMSA_TEST_PAD);
        rc |= prob_buf4(&tp->dk, "dk", dt, out, bk, rows_k, s->hkv, s->d, s->strided,
                        3 * FMSA_TEST_PAD);
        rc |= prob_buf4(&tp->dv, "dv", dt, out, bk, rows_k, s->hkv, dv, s->strided,
                        FMSA_TEST_PAD);
    }
    if (bwd && s->sinks && s->dsink) {
        /* an output: poisoned like every other; strided: element stride 2 (holes checked) */
        int64_t shape[1] = {s->hq}, st[1] = {s->strided ? 2 : 1};
        rc |= fmsa_test_buf_init(&tp->dsink, "dsink", FMSA_DTYPE_F32, out, 1, shape, st);
        tp->has_dsink = 1;
    }
    if (rc) return -1;

    rc |= prob_fill_normal(&tp->q, &r, s->amp > 0.0f ? s->amp : FMSA_TEST_QK_SIGMA);
    rc |= prob_fill_normal(&tp->k, &r, s->amp > 0.0f ? s->amp : FMSA_TEST_QK_SIGMA);
    rc |= prob_fill_normal(&tp->v, &r, 1.0);
    if (bwd) rc |= prob_fill_normal(&tp->dout, &r, 1.0);
    if (s->alibi) rc |= prob_alibi(tp);
    if (s->mask) rc |= prob_mask(tp, &r);
    /* drawn after every older input so that old specs keep their data */
    if (s->sinks) rc |= prob_sinks(tp, &r);
    if (s->climb > 0.0f) rc |= prob_climb(tp);
    if (tp->has_dlse) rc |= prob_fill_normal(&tp->dlse, &r, 1.0);
    if (rc) return -1;

    p->has_alibi = tp->has_alibi;
    p->has_mask = tp->has_mask;
    p->q = prob_view4(&tp->q);
    p->k = prob_view4(&tp->k);
    p->v = prob_view4(&tp->v);
    p->o = prob_view4(&tp->o);
    p->lse = prob_viewn(&tp->lse);
    p->lse.s0 = tp->lse.strides[0]; /* lse never broadcasts */
    p->lse.s1 = tp->lse.strides[1];
    p->lse.s2 = tp->lse.strides[2];
    if (bwd) {
        p->dout = prob_view4(&tp->dout);
        p->dq = prob_view4(&tp->dq);
        p->dk = prob_view4(&tp->dk);
        p->dv = prob_view4(&tp->dv);
    }
    if (tp->has_alibi) {
        p->alibi = prob_viewn(&tp->alibi);
        p->alibi.s0 = tp->alibi.ndim == 2 ? tp->alibi.strides[0] : 0;
        p->alibi.s1 = tp->alibi.strides[tp->alibi.ndim - 1];
    }
    if (tp->has_mask) p->mask = prob_viewn(&tp->mask);
    if (tp->has_sinks) {
        p->has_sinks = 1;
        p->sinks = prob_viewn(&tp->sinks);
        p->sinks.s0 = tp->sinks.strides[0];
    }
    if (tp->has_dlse) {
        p->has_dlse = 1;
        p->dlse = prob_viewn(&tp->dlse);
        p->dlse.s0 = tp->dlse.strides[0];
        p->dlse.s1 = tp->dlse.strides[1];
        p->dlse.s2 = tp->dlse.strides[2];
    }
    if (tp->has_dsink) {
        p->has_dsink = 1;
        p->dsink = prob_viewn(&tp->dsink);
        p->dsink.s0 = tp->dsink.strides[0];
    }
    if (tp->has_varlen) {
        p->cu_seqlens_q = prob_viewn(&tp->cu_q);
        p->cu_seqlens_k = prob_viewn(&tp->cu_k);
        p->cu_seqlens_q.s0 = p->cu_seqlens_k.s0 = 1;
    }
    if (tp->has_paged) {
        p->block_table = prob_viewn(&tp->block_table);
        p->block_table.s0 = tp->block_table.strides[0];
        p->block_table.s1 = 1;
        if (tp->has_seqused) {
            p->seqused_k = prob_viewn(&tp->seqused);
            p->seqused_k.s0 = 1;
        }
    }
    tp->n_q = bq * rows_q * s->hq * s->d;
    tp->n_k = bk * rows_k * s->hkv * s->d;
    tp->n_o = bq * rows_q * s->hq * dv;
    tp->n_v = bk * rows_k * s->hkv * dv;
    tp->n_lse = bq * s->hq * rows_q;
    if (s->nan) prob_poison_dead_keys(tp);
    return 0;
}

void fmsa_test_problem_each(fmsa_test_problem *tp, void (*fn)(fmsa_test_buf *, void *),
                            void *user) {
    int bwd = tp->spec.pass == FMSA_PASS_BACKWARD;
    fn(&tp->q, user);
    fn(&tp->k, user);
    fn(&tp->v, user);
    fn(&tp->o, user);
    if (bwd || tp->spec.lse) fn(&tp->lse, user);
    if (bwd) {
        fn(&tp->dout, user);
        fn(&tp->dq, user);
        fn(&tp->dk, user);
        fn(&tp->dv, user);
    }
    if (tp->has_alibi) fn(&tp->alibi, user);
    if (tp->has_mask) fn(&tp->mask, user);
    if (tp->has_varlen) {
        fn(&tp->cu_q, user);
        fn(&tp->cu_k, user);
    }
    if (tp->has_paged) fn(&tp->block_table, user);
    if (tp->has_seqused) fn(&tp->seqused, user);
    if (tp->has_sinks) fn(&tp->sinks, user);
    if (tp->has_dlse) fn(&tp->dlse, user);
    if (tp->has_dsink) fn(&tp->dsink, user);
}

typedef struct prob_upload_state {
    fmsa_context *ctx;
    fmsa_status st;
} prob_upload_state;

static void prob_upload_one(fmsa_test_buf *b, void *user) {
    prob_upload_state *u = (prob_upload_state *)user;
    if (u->st == FMSA_SUCCESS) u->st = fmsa_test_buf_upload(u->ctx, b);
}

fmsa_status fmsa_test_problem_upload(fmsa_context *ctx, fmsa_test_problem *tp) {
    prob_upload_state u = {ctx, FMSA_SUCCESS};
    fmsa_test_problem_each(tp, prob_upload_one, &u);
    return u.st;
}

fmsa_attention_desc fmsa_test_problem_desc(const fmsa_test_problem *tp) {
    const fmsa_test_spec *s = &tp->spec;
    fmsa_attention_desc d = fmsa_attention_desc_init(s->d);
    d.softmax_scale = tp->host.softmax_scale;
    d.causal = s->causal;
    d.window_left = s->wl;
    d.window_right = s->wr;
    d.softcap = s->softcap;
    d.deterministic = s->det;
    if (tp->has_alibi) d.alibi_slopes = fmsa_test_buf_tensor(&tp->alibi);
    if (tp->has_mask) d.mask = fmsa_test_buf_tensor(&tp->mask);
    if (tp->has_sinks) d.sinks = fmsa_test_buf_tensor(&tp->sinks);
    if (tp->has_varlen) {
        d.cu_seqlens_q = fmsa_test_buf_tensor(&tp->cu_q);
        d.cu_seqlens_k = fmsa_test_buf_tensor(&tp->cu_k);
        d.max_seqlen_q = tp->max_seqlen_q;
        d.max_seqlen_k = tp->max_seqlen_k;
    }
    if (tp->has_paged) {
        d.block_table = fmsa_test_buf_tensor(&tp->block_table);
        d.page_size = s->page;
        if (tp->has_seqused) d.seqused_k = fmsa_test_buf_tensor(&tp->seqused);
    }
    return d;
}

void fmsa_test_problem_destroy(fmsa_context *ctx, fmsa_test_problem *tp) {
    /* every buffer, including ones the pass did not use (freeing those is a no-op) */
    fmsa_test_buf *all[] = {&tp->q,     &tp->k,    &tp->v,    &tp->o,           &tp->lse,
                            &tp->dout,  &tp->dq,   &tp->dk,   &tp->dv,          &tp->alibi,
                            &tp->mask,  &tp->cu_q, &tp->cu_k, &tp->block_table, &tp->seqused,
                            &tp->sinks, &tp->dlse, &tp->dsink};
    for (size_t n = 0; n < sizeof all / sizeof all[0]; ++n) fmsa_test_buf_free(ctx, all[n]);
}
