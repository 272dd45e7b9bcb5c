/*
 * The online-softmax state machine of common/fmsa_softmax.h against a direct
 * fp64 softmax.
 *
 * Tolerance (derived, u = 2^-24, fp32 throughout; S2 = max |s2| over the
 * row's visible base-2 scores, n keys, T tiles, M merges):
 *   p_j = exp2(s2_j - m): s2_j = s * log2(e) carries 1.25 u |s2_j| (product
 *   rounding + the fp32 constant), the subtraction u |s2_j - m| <= 2 u S2,
 *   exp2f <= 2 u of its own: eps_p = u (ln2 * 3.25 * S2 + 2), relative.
 *   l sums n non-negative terms and is rescaled at most T + M times (each
 *   factor exp2 of an exact difference of two stored maxima, <= 3 u):
 *   eps_l = eps_p + u (n + 4 (T + M) + 2).  acc gets the same rescales, so
 *   O = acc / l sees eps_p on each weight and the summation/rescale errors
 *   of both: |O - O_ref| <= 2 (eps_p + u (n + 4 (T + M) + 4)) * max|v|.
 *   lse = ln2 (m + log2 l): |lse - lse_ref| <= eps_l + 4 u (|lse_ref| + |m| + 1).
 * A negative control (a state machine that forgets to rescale acc) must
 * exceed this tolerance, so the bound is not vacuous.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/fmsa_softmax.h"

enum { NMAX = 1024, DV = 8 };

static uint64_t rng_state;

static uint64_t rng_next(void) {
    /* splitmix64: tiny, seedable, good enough for test data */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double rng_unit(void) { return (double)(rng_next() >> 11) * (1.0 / 9007199254740992.0); }

static int rng_int(int lo, int hi) { return lo + (int)(rng_next() % (uint64_t)(hi - lo + 1)); }

/* One score row: natural-log scores s (float inputs, -inf = masked) and V. */
typedef struct row {
    int n;
    float s[NMAX];
    float s2[NMAX];
    float v[NMAX][DV];
} row;

/* Partial state over a key range. */
typedef struct sm_state {
    float m, l, acc[DV];
} sm_state;

static const double U = 1.0 / 16777216.0;

static void make_row(row *r, int n, double amp, double masked_frac) {
    r->n = n;
    for (int j = 0; j < n; j++) {
        r->s[j] = rng_unit() < masked_frac ? -INFINITY : (float)((2 * rng_unit() - 1) * amp);
        r->s2[j] = r->s[j] * FMSA_LOG2E; /* the caller folds log2(e) into the scale */
        for (int c = 0; c < DV; c++) r->v[j][c] = (float)(2 * rng_unit() - 1);
    }
}

/* Direct fp64 softmax over keys [0, n). */
static void reference(const row *r, double *o, double *lse) {
    double m = -INFINITY, l = 0;
    for (int c = 0; c < DV; c++) o[c] = 0;
    for (int j = 0; j < r->n; j++)
        if (r->s[j] > m) m = r->s[j];
    if (m == -INFINITY) {
        *lse = -INFINITY;
        return;
    }
    for (int j = 0; j < r->n; j++) {
        double p = exp((double)r->s[j] - m);
        l += p;
        for (int c = 0; c < DV; c++) o[c] += p * r->v[j][c];
    }
    for (int c = 0; c < DV; c++) o[c] /= l;
    *lse = m + log(l);
}

static void state_init(sm_state *st) {
    fmsa_softmax_init(&st->m, &st->l);
    for (int c = 0; c < DV; c++) st->acc[c] = 0;
}

/* Feeds keys [j0, j1) as one tile, exactly as a kernel would.  broken != 0
 * forgets to rescale acc (the negative control). */
static int lazy_mode; /* 1: tiles use the lazy rescaling (fmsa_softmax_keeps) */

static void state_tile(sm_state *st, const row *r, int j0, int j1, int broken) {
    float tile_max = -INFINITY, c = 1.0f;
    for (int j = j0; j < j1; j++) tile_max = fmaxf(tile_max, r->s2[j]);
    if (!(lazy_mode && fmsa_softmax_keeps(st->m, tile_max)))
        c = fmsa_softmax_update(&st->m, tile_max);
    st->l *= c;
    if (!broken)
        for (int k = 0; k < DV; k++) st->acc[k] *= c;
    for (int j = j0; j < j1; j++) {
        float p = fmsa_softmax_p(r->s2[j], st->m);
        st->l += p;
        for (int k = 0; k < DV; k++) st->acc[k] += p * r->v[j][k];
    }
}

static void state_merge(sm_state *a, const sm_state *b) {
    float ca, cb;
    fmsa_softmax_merge(&a->m, &a->l, b->m, b->l, &ca, &cb);
    for (int k = 0; k < DV; k++) a->acc[k] = ca * a->acc[k] + cb * b->acc[k];
}

static void state_finish(const sm_state *st, float *o, float *lse) {
    float scale = fmsa_softmax_finalize(st->m, st->l, lse);
    for (int k = 0; k < DV; k++) o[k] = st->acc[k] * scale;
}

static void assert_no_nan(const sm_state *st) {
    assert_false(isnan(st->m) || isnan(st->l));
    for (int k = 0; k < DV; k++) assert_false(isnan(st->acc[k]) || isinf(st->acc[k]));
}

typedef struct tol {
    double o, lse;
} tol;

static tol derive_tol(const row *r, int tiles, int merges, double lse_ref) {
    double s2max = 0, vmax = 0, eps_p, eps_l;
    tol t;
    for (int j = 0; j < r->n; j++) {
        if (r->s2[j] != -INFINITY && fabs(r->s2[j]) > s2max) s2max = fabs(r->s2[j]);
        for (int c = 0; c < DV; c++) vmax = fmax(vmax, fabs(r->v[j][c]));
    }
    eps_p = U * (log(2.0) * 3.25 * s2max + 2);
    eps_l = eps_p + U * (r->n + 4.0 * (tiles + merges) + 2);
    t.o = 2 * (eps_p + U * (r->n + 4.0 * (tiles + merges) + 4)) * vmax;
    t.lse = eps_l + 4 * U * (fabs(lse_ref) + s2max + 1);
    return t;
}

/* Max |O - O_ref| and |lse - lse_ref| of one finished state, or +inf on a
 * NaN or a masked/unmasked mismatch. */
static void errors(const sm_state *st, const double *o_ref, double lse_ref, double *eo, double *el) {
    float o[DV], lse;
    state_finish(st, o, &lse);
    *eo = 0;
    for (int k = 0; k < DV; k++) {
        if (isnan(o[k])) *eo = INFINITY;
        else *eo = fmax(*eo, fabs(o[k] - o_ref[k]));
    }
    if (isnan(lse)) *el = INFINITY;
    else if (lse_ref == -INFINITY || lse == -INFINITY) *el = lse == lse_ref ? 0 : INFINITY;
    else *el = fabs(lse - lse_ref);
}

/* Processes the row with the given tile size (<= 0: random sizes 1..64);
 * returns the number of tiles used. */
static int run_tiled(sm_state *st, const row *r, int tile, int broken) {
    int tiles = 0;
    state_init(st);
    for (int j0 = 0; j0 < r->n; tiles++) {
        int len = tile > 0 ? tile : rng_int(1, 64);
        int j1 = j0 + len > r->n ? r->n : j0 + len;
        state_tile(st, r, j0, j1, broken);
        assert_no_nan(st);
        j0 = j1;
    }
    return tiles;
}

static row R;

static void tiled_matches_fp64(void **state) {
    static const int sizes[] = {1, 3, 7, 16, 64, 128, NMAX, 0, 0};
    static const double amps[] = {0.5, 4, 30, 1000};
    double worst_ratio = 0;
    (void)state;
    rng_state = 1;
    for (int rep = 0; rep < 60; rep++) {
        int n = rep % 3 == 0 ? rng_int(1, 40) : rng_int(100, NMAX);
        double amp = amps[rep % 4], o_ref[DV], lse_ref;
        make_row(&R, n, amp, rep % 5 == 0 ? 0.6 : 0.1);
        reference(&R, o_ref, &lse_ref);
        for (size_t t = 0; t < sizeof sizes / sizeof sizes[0]; t++) {
            sm_state st;
            double eo, el;
            int tiles = run_tiled(&st, &R, sizes[t], 0);
            tol tl = derive_tol(&R, tiles, 0, lse_ref);
            errors(&st, o_ref, lse_ref, &eo, &el);
            if (eo > tl.o || el > tl.lse)
                fail_msg("seed 1 rep %d n %d amp %g tile %d: |dO| %.3g (tol %.3g) |dlse| %.3g (tol %.3g)",
                         rep, n, amp, sizes[t], eo, tl.o, el, tl.lse);
            if (tl.o > 0) worst_ratio = fmax(worst_ratio, eo / tl.o);
        }
    }
    print_message("tiled softmax: worst |dO| / tolerance = %.3g\n", worst_ratio);
}

/* Lazy rescaling keeps the result inside the same derived bound as the
 * eager update (rows with amplitudes up to 1000 climb by far more than 8 bits,
 * so both the kept and the updated branch run), and its predicate has the
 * documented edges. */
static void lazy_rescaling(void **state) {
    (void)state;
    assert_true(fmsa_softmax_keeps(3.0f, 3.0f + FMSA_SOFTMAX_STALE_MAX));
    assert_false(fmsa_softmax_keeps(3.0f, 3.0f + FMSA_SOFTMAX_STALE_MAX + 0.01f));
    assert_true(fmsa_softmax_keeps(3.0f, -INFINITY)); /* a fully masked tile */
    assert_true(fmsa_softmax_keeps(3.0f, NAN));       /* NaN must reach the sum */
    assert_false(fmsa_softmax_keeps(-INFINITY, 1.0f)); /* first visible tile */
    assert_false(fmsa_softmax_keeps(-INFINITY, -INFINITY));
    lazy_mode = 1;
    tiled_matches_fp64(state);
    lazy_mode = 0;
}

/* The bound must be able to fail: forgetting to rescale acc by c is caught. */
static void negative_control_fails(void **state) {
    int caught = 0, tried = 0;
    (void)state;
    rng_state = 2;
    for (int rep = 0; rep < 20; rep++) {
        double o_ref[DV], lse_ref, eo, el;
        sm_state st;
        int tiles;
        tol tl;
        make_row(&R, 512, 4, 0.0);
        /* the row maximum (by 2) sits in the last tile, so a rescale must happen */
        R.s[511] = 6.0f;
        R.s2[511] = R.s[511] * FMSA_LOG2E;
        reference(&R, o_ref, &lse_ref);
        tiles = run_tiled(&st, &R, 16, 1);
        tl = derive_tol(&R, tiles, 0, lse_ref);
        errors(&st, o_ref, lse_ref, &eo, &el);
        tried++;
        caught += eo > tl.o;
    }
    assert_int_equal(caught, tried);
}

/* Random contiguous partition of [0, n) into k chunks (empty chunks allowed). */
static int partition(int n, int k, int *cut) {
    cut[0] = 0;
    cut[k] = n;
    for (int i = 1; i < k; i++) cut[i] = rng_int(0, n);
    for (int i = 1; i < k; i++) /* insertion sort of the inner cuts */
        for (int j = i; j > 1 && cut[j - 1] > cut[j]; j--) {
            int t = cut[j];
            cut[j] = cut[j - 1];
            cut[j - 1] = t;
        }
    return k;
}

static sm_state merge_tree(const sm_state *parts, int lo, int hi) {
    sm_state a, b;
    if (hi - lo == 1) return parts[lo];
    a = merge_tree(parts, lo, (lo + hi) / 2);
    b = merge_tree(parts, (lo + hi) / 2, hi);
    state_merge(&a, &b);
    return a;
}

static void merge_any_order(void **state) {
    enum { KMAX = 16 };
    (void)state;
    rng_state = 3;
    for (int rep = 0; rep < 200; rep++) {
        int n = rng_int(1, NMAX), k = rng_int(2, KMAX), cut[KMAX + 1], perm[KMAX], tiles = 0;
        sm_state parts[KMAX], res[5];
        double o_ref[DV], lse_ref;
        tol tl;
        make_row(&R, n, rep % 2 ? 5 : 40, rep % 7 == 0 ? 0.95 : 0.2);
        reference(&R, o_ref, &lse_ref);
        partition(n, k, cut);
        for (int i = 0; i < k; i++) {
            state_init(&parts[i]);
            for (int j0 = cut[i]; j0 < cut[i + 1]; j0 += 32, tiles++)
                state_tile(&parts[i], &R, j0, j0 + 32 < cut[i + 1] ? j0 + 32 : cut[i + 1], 0);
            perm[i] = i;
        }
        for (int i = k - 1; i > 0; i--) { /* Fisher-Yates */
            int j = rng_int(0, i), t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
        res[0] = parts[0]; /* left fold */
        for (int i = 1; i < k; i++) state_merge(&res[0], &parts[i]);
        res[1] = parts[k - 1]; /* right fold: p0 + (p1 + (... + pk-1)) */
        for (int i = k - 2; i >= 0; i--) {
            sm_state a = parts[i];
            state_merge(&a, &res[1]);
            res[1] = a;
        }
        res[2] = parts[k - 1]; /* reversed */
        for (int i = k - 2; i >= 0; i--) state_merge(&res[2], &parts[i]);
        res[3] = parts[perm[0]]; /* random order */
        for (int i = 1; i < k; i++) state_merge(&res[3], &parts[perm[i]]);
        res[4] = merge_tree(parts, 0, k);
        tl = derive_tol(&R, tiles, k, lse_ref);
        for (int v = 0; v < 5; v++) {
            double eo, el;
            assert_no_nan(&res[v]);
            errors(&res[v], o_ref, lse_ref, &eo, &el);
            if (eo > tl.o || el > tl.lse)
                fail_msg("seed 3 rep %d n %d k %d order %d: |dO| %.3g (tol %.3g) |dlse| %.3g (tol %.3g)",
                         rep, n, k, v, eo, tl.o, el, tl.lse);
        }
    }
}

static void fully_masked(void **state) {
    static const int sizes[] = {1, 5, 64, 0};
    (void)state;
    rng_state = 4;
    for (size_t t = 0; t < sizeof sizes / sizeof sizes[0]; t++) {
        sm_state st, empty, e2;
        float o[DV], lse;
        make_row(&R, 300, 10, 1.0); /* every key masked */
        run_tiled(&st, &R, sizes[t], 0);
        assert_true(st.m == -INFINITY);
        assert_true(st.l == 0.0f);
        state_finish(&st, o, &lse);
        assert_true(lse == -INFINITY);
        for (int k = 0; k < DV; k++) assert_true(o[k] == 0.0f);
        /* two empty states merge to an empty sm_state */
        state_init(&empty);
        e2 = st;
        state_merge(&e2, &empty);
        assert_no_nan(&e2);
        state_finish(&e2, o, &lse);
        assert_true(lse == -INFINITY);
        for (int k = 0; k < DV; k++) assert_true(o[k] == 0.0f);
    }
    /* the backward's recomputed P is 0 for a masked row or key, never NaN */
    assert_true(fmsa_softmax_p_from_lse(3.0f, -INFINITY) == 0.0f);
    assert_true(fmsa_softmax_p_from_lse(-INFINITY, 2.0f) == 0.0f);
    assert_true(fmsa_softmax_p_from_lse(-INFINITY, -INFINITY) == 0.0f);
    assert_true(fmsa_softmax_p(-INFINITY, -INFINITY) == 0.0f);
}

/* A fully masked tile anywhere changes nothing, bit for bit; masked tiles
 * before the first visible key still give the right answer. */
static void masked_tiles_are_no_ops(void **state) {
    (void)state;
    rng_state = 5;
    for (int rep = 0; rep < 50; rep++) {
        sm_state a, b;
        double o_ref[DV], lse_ref, eo, el;
        tol tl;
        int n = 256, tiles = 0;
        make_row(&R, n, 8, 0.1);
        for (int j = 0; j < 32; j++) R.s[j] = R.s2[j] = -INFINITY;      /* masked head */
        for (int j = 128; j < 160; j++) R.s[j] = R.s2[j] = -INFINITY;   /* masked middle */
        reference(&R, o_ref, &lse_ref);
        state_init(&a);
        state_init(&b);
        for (int j0 = 0; j0 < n; j0 += 32, tiles++) {
            state_tile(&a, &R, j0, j0 + 32, 0);
            if (j0 != 128) state_tile(&b, &R, j0, j0 + 32, 0); /* b skips the masked middle tile */
            if (j0 == 0) {
                assert_true(a.m == -INFINITY && a.l == 0.0f);
                for (int k = 0; k < DV; k++) assert_true(a.acc[k] == 0.0f);
            }
        }
        assert_memory_equal(&a, &b, sizeof a);
        tl = derive_tol(&R, tiles, 0, lse_ref);
        errors(&a, o_ref, lse_ref, &eo, &el);
        if (eo > tl.o || el > tl.lse) fail_msg("masked tiles rep %d: %.3g %.3g", rep, eo, el);
    }
}

/* Merging with an empty sm_state is the identity, bit for bit, on either side. */
static void empty_merge_is_identity(void **state) {
    (void)state;
    rng_state = 6;
    for (int rep = 0; rep < 50; rep++) {
        sm_state a, empty, x;
        make_row(&R, rng_int(1, 200), 20, 0.3);
        run_tiled(&a, &R, 0, 0);
        state_init(&empty);
        x = a;
        state_merge(&x, &empty);
        assert_memory_equal(&x, &a, sizeof a);
        x = empty;
        state_merge(&x, &a);
        assert_true(x.m == a.m && x.l == a.l);
        for (int k = 0; k < DV; k++) assert_true(x.acc[k] == a.acc[k]);
    }
}

/* The update's exponent (kernels with their own exp2 take it): 0 while
 * nothing is visible and whenever m stays (so c = 1 exactly, whatever the
 * exp2), -inf on the first visible tile, m_old - m_new otherwise; NaN tile
 * maxima keep m; and fmsa_softmax_update is exp2 of it. */
static void update_exponent(void **state) {
    const float nan_ = NAN;
    struct { float m, tile_max, e, m_after; } cases[] = {
        {-INFINITY, -INFINITY, 0.0f, -INFINITY}, /* nothing visible yet */
        {-INFINITY, 3.0f, -INFINITY, 3.0f},      /* first visible tile */
        {3.0f, 1.0f, 0.0f, 3.0f},                /* m stays */
        {3.0f, 3.0f, 0.0f, 3.0f},
        {3.0f, 5.5f, -2.5f, 5.5f},               /* m climbs */
        {3.0f, -INFINITY, 0.0f, 3.0f},           /* a masked tile */
        {3.0f, nan_, 0.0f, 3.0f},                /* NaN keeps m (fmax) */
    };
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        float m = cases[i].m, m2 = cases[i].m;
        const float e = fmsa_softmax_update_exponent(&m, cases[i].tile_max);
        const float c = fmsa_softmax_update(&m2, cases[i].tile_max);
        if (!(e == cases[i].e) || !(m == cases[i].m_after) || !(m2 == m))
            fail_msg("case %zu: e %g m %g (want %g, %g)", i, e, m, cases[i].e, cases[i].m_after);
        if (!(c == (e == 0.0f ? 1.0f : exp2f(e)))) fail_msg("case %zu: c %g for e %g", i, c, e);
    }
}

/* LSE in natural log, and the backward's P = exp(s - lse) sums to 1 over the
 * row and matches the fp64 probabilities.  P = exp2(s2 - lse2) has, besides
 * the lse error (relative error of P = |dlse|), the rounding of s2 (1.25 u
 * ln2 |s2|), of lse2 = lse * log2(e) (1.25 u |lse|), of the subtraction
 * (u ln2 |s2 - lse2| <= u (ln2 |s2| + |lse|)) and exp2f's 2 u. */
static void lse_and_p_from_lse(void **state) {
    (void)state;
    rng_state = 7;
    for (int rep = 0; rep < 50; rep++) {
        sm_state st;
        float o[DV], lse;
        double o_ref[DV], lse_ref, sum = 0, bound_max = 0;
        int n = rng_int(1, NMAX), tiles;
        tol tl;
        make_row(&R, n, rep % 2 ? 3 : 25, 0.3);
        R.s[0] = R.s2[0] = 0.0f; /* at least one visible key */
        reference(&R, o_ref, &lse_ref);
        tiles = run_tiled(&st, &R, 64, 0);
        state_finish(&st, o, &lse);
        tl = derive_tol(&R, tiles, 0, lse_ref);
        if (fabs(lse - lse_ref) > tl.lse) fail_msg("rep %d: lse %.9g vs %.9g", rep, lse, lse_ref);
        for (int j = 0; j < n; j++) {
            float p = fmsa_softmax_p_from_lse(R.s2[j], lse * FMSA_LOG2E);
            double pr = R.s[j] == -INFINITY ? 0.0 : exp((double)R.s[j] - lse_ref);
            double bound = tl.lse + U * (2.25 * log(2.0) * fabs(R.s2[j]) + 2.25 * fabs(lse_ref) + 2);
            assert_false(isnan(p));
            if (R.s[j] == -INFINITY) assert_true(p == 0.0f);
            if (fabs(p - pr) > bound * pr + 1e-45)
                fail_msg("rep %d key %d: P %.9g vs %.9g (rel bound %.3g)", rep, j, p, pr, bound);
            sum += p;
            bound_max = fmax(bound_max, bound);
        }
        if (fabs(sum - 1.0) > bound_max + n * 1e-45)
            fail_msg("rep %d: sum P = %.12g", rep, sum);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(tiled_matches_fp64),
        cmocka_unit_test(lazy_rescaling),
        cmocka_unit_test(negative_control_fails),
        cmocka_unit_test(merge_any_order),
        cmocka_unit_test(fully_masked),
        cmocka_unit_test(masked_tiles_are_no_ops),
        cmocka_unit_test(empty_merge_is_identity),
        cmocka_unit_test(lse_and_p_from_lse),
        cmocka_unit_test(update_exponent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
