/*
 * The ring's per-step plan (dist/ring_plan.c) against brute force: for every
 * layout, P = 1..8, shard sizes 2..10, causal or not and a set of windows,
 * each step's calls, read with the local kernels' own masking (bottom-right
 * aligned causal flag and window on the call's rows and keys), must make
 * visible exactly the (query row, key row) pairs whose global positions the
 * whole sequence's mask makes visible, each pair in one call only; and at
 * step 0 the sink term must reach every query row exactly once.  With ALiBi
 * every visible pair's bias as the call forms it, -(scale slope) |local
 * distance + offset| + add slope, must be the global one, -slope |global
 * distance|: contiguous and zigzag with scale 1 and add 0 (the signed distances
 * equal, so a call never spans two chunks), striped with scale P and the
 * constant of the call's side of the diagonal.  With a bit mask (contiguous and
 * zigzag, chunks a multiple of 8) every call's keys start at a global column
 * that is a multiple of 8; striped with a mask has no plan.  Calls that
 * continue one another are joined, so a causal zigzag step runs one.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "dist/ring_plan.h"

enum { MAX_C = 32 };

static int64_t pos_of(fmsa_ring_layout layout, int P, int r, int64_t c, int64_t i) {
    const int64_t half = c / 2;
    if (layout == FMSA_RING_CONTIGUOUS) return (int64_t)r * c + i;
    if (layout == FMSA_RING_ZIGZAG)
        return i < half ? (int64_t)r * half + i : (int64_t)(2 * P - 1 - r) * half + i - half;
    return (int64_t)r + (int64_t)P * i;
}

/* The global rule: key position pk visible to query position pq. */
static int visible(const fmsa_ring_mask *m, int64_t pq, int64_t pk) {
    const int64_t wr = m->causal ? 0 : m->window_right;
    if (m->window_left >= 0 && pk < pq - m->window_left) return 0;
    if (wr >= 0 && pk > pq + wr) return 0;
    return 1;
}

/* A call's local rule (flashmsa.h's score definition) for its row i and key j. */
static int call_visible(const fmsa_ring_call *c, int64_t i, int64_t j) {
    const int64_t off = c->k_rows - c->q_rows, wr = c->causal ? 0 : c->window_right;
    if (c->window_left >= 0 && j < i + off - c->window_left) return 0;
    if (wr >= 0 && j > i + off + wr) return 0;
    return 1;
}

static int check(fmsa_ring_layout layout, int P, int64_t c, const fmsa_ring_mask *m, char *why,
                 size_t len) {
    for (int r = 0; r < P; ++r) {
        int sinks[MAX_C] = {0};
        for (int s = 0; s < P; ++s) {
            const int j = ((r - s) % P + P) % P;
            fmsa_ring_call calls[FMSA_RING_MAX_CALLS];
            int seen[MAX_C][MAX_C];
            const int n = fmsa_ring_plan_step(layout, P, r, s, c, m, calls);
            memset(seen, 0, sizeof seen);
            if (n < 0) {
                snprintf(why, len, "no plan");
                return 1;
            }
            for (int k = 0; k < n; ++k) {
                const fmsa_ring_call *x = &calls[k];
                if (x->q_row0 < 0 || x->q_rows < 1 || x->q_row0 + x->q_rows > c || x->k_row0 < 0 ||
                    x->k_rows < 1 || x->k_row0 + x->k_rows > c ||
                    (x->causal && x->window_right != -1)) {
                    snprintf(why, len, "r %d s %d call %d: bad ranges", r, s, k);
                    return 1;
                }
                if (x->k_pos0 != pos_of(layout, P, j, c, x->k_row0) ||
                    (m->mask && x->k_pos0 % 8)) {
                    snprintf(why, len, "r %d s %d call %d: keys at global %lld (key %lld at %lld)",
                             r, s, k, (long long)x->k_pos0, (long long)x->k_row0,
                             (long long)pos_of(layout, P, j, c, x->k_row0));
                    return 1;
                }
                if (m->alibi && x->alibi_scale != (layout == FMSA_RING_STRIPED ? P : 1)) {
                    snprintf(why, len, "r %d s %d call %d: ALiBi scale %d", r, s, k,
                             x->alibi_scale);
                    return 1;
                }
                for (int64_t i = 0; i < x->q_rows; ++i) {
                    if (x->sinks) sinks[x->q_row0 + i]++;
                    for (int64_t l = 0; l < x->k_rows; ++l) {
                        /* ALiBi's distance as the local pass forms it, with the call's offset */
                        const int64_t dist = i + x->k_rows - x->q_rows - l + x->alibi_offset;
                        const int64_t want = pos_of(layout, P, r, c, x->q_row0 + i) -
                                             pos_of(layout, P, j, c, x->k_row0 + l);
                        const int64_t adist = dist < 0 ? -dist : dist, awant = want < 0 ? -want : want;
                        const int exact = x->alibi_scale == 1 && x->alibi_add == 0;
                        if (!call_visible(x, i, l)) continue;
                        seen[x->q_row0 + i][x->k_row0 + l]++;
                        if (m->alibi && (exact ? dist != want
                                               : x->alibi_scale * adist - x->alibi_add != awant)) {
                            snprintf(why, len, "r %d s %d call %d: row %lld key %lld at ALiBi "
                                     "distance %lld (scale %d, add %lld), globally %lld", r, s, k,
                                     (long long)(x->q_row0 + i), (long long)(x->k_row0 + l),
                                     (long long)dist, x->alibi_scale, (long long)x->alibi_add,
                                     (long long)want);
                            return 1;
                        }
                    }
                }
                if (x->sinks && s != 0) {
                    snprintf(why, len, "r %d s %d: sinks after step 0", r, s);
                    return 1;
                }
            }
            for (int64_t i = 0; i < c; ++i)
                for (int64_t l = 0; l < c; ++l) {
                    const int want = visible(m, pos_of(layout, P, r, c, i), pos_of(layout, P, j, c, l));
                    if (seen[i][l] != want) {
                        snprintf(why, len, "r %d s %d (block of %d): row %lld key %lld seen %d times, "
                                 "visible %d", r, s, j, (long long)i, (long long)l, seen[i][l], want);
                        return 1;
                    }
                }
        }
        for (int64_t i = 0; i < c; ++i)
            if (sinks[i] != 1) {
                snprintf(why, len, "r %d: row %lld carries the sinks %d times", r, (long long)i,
                         sinks[i]);
                return 1;
            }
    }
    return 0;
}

static const int64_t wins[][2] = {{-1, -1}, {0, -1}, {1, -1}, {5, -1}, {7, 3}, {-1, 4},
                                  {0, 0},   {2, 2},  {13, 0}, {3, 11}, {-1, 0}, {0, 6}};

/* Shard sizes of a sweep: 2..10, and with a mask those whose chunks start at a
 * byte (contiguous: any c at P = 1, else 8 and 16; zigzag: 16 and 32). */
static int c_wanted(int mask, int layout, int P, int64_t c) {
    if (layout == FMSA_RING_ZIGZAG && c % 2) return 0;
    if (!mask) return c <= 10;
    if (layout == FMSA_RING_CONTIGUOUS) return P == 1 ? c <= 10 : c == 8 || c == 16;
    return c == 16 || c == 32;
}

/* Every layout, with ALiBi or not; with a mask the contiguous and zigzag ones. */
static void sweep(int alibi, int mask) {
    int cases = 0, bad = 0;
    for (int layout = 0; layout < (mask ? 2 : 3); ++layout)
        for (int P = 1; P <= 8; ++P)
            for (int64_t c = 2; c <= MAX_C; ++c) {
                if (!c_wanted(mask, layout, P, c)) continue;
                for (int causal = 0; causal < 2; ++causal)
                    for (size_t w = 0; w < sizeof wins / sizeof wins[0]; ++w) {
                        fmsa_ring_mask m;
                        char why[200];
                        m.causal = causal;
                        m.window_left = wins[w][0];
                        m.window_right = causal ? -1 : wins[w][1];
                        m.alibi = alibi;
                        m.mask = mask;
                        ++cases;
                        if (check((fmsa_ring_layout)layout, P, c, &m, why, sizeof why)) {
                            if (++bad <= 10)
                                print_message("FAIL layout %d P %d c %lld causal %d window %lld/%lld: "
                                              "%s\n", layout, P, (long long)c, causal,
                                              (long long)m.window_left, (long long)m.window_right,
                                              why);
                        }
                    }
            }
    print_message("ring plan%s%s: %d cases, %d failed\n", alibi ? " with ALiBi" : "",
                  mask ? " with a mask" : "", cases, bad);
    assert_int_equal(bad, 0);
}

static void bands(void **state) {
    (void)state;
    sweep(0, 0);
}

static void alibi(void **state) {
    (void)state;
    sweep(1, 0);
}

static void masks(void **state) {
    fmsa_ring_call calls[FMSA_RING_MAX_CALLS];
    const fmsa_ring_mask m = {0, -1, -1, 0, 1};
    (void)state;
    sweep(0, 1);
    sweep(1, 1);
    /* striped keys are no run of mask columns; contiguous blocks of 12 start off a byte */
    assert_int_equal(fmsa_ring_plan_step(FMSA_RING_STRIPED, 3, 1, 0, 8, &m, calls), -1);
    assert_int_equal(fmsa_ring_plan_step(FMSA_RING_CONTIGUOUS, 3, 1, 0, 12, &m, calls), -1);
    assert_int_equal(fmsa_ring_plan_step(FMSA_RING_ZIGZAG, 2, 0, 0, 8, &m, calls), -1);
}

/* Calls that continue one another are joined (ring_plan.c): a causal zigzag
 * step runs one pass (at the rank's own block one causal pass over the whole
 * shard: the early chunk's diagonal and the late chunk over both chunks), a
 * causal contiguous step one. */
static void joined(void **state) {
    const fmsa_ring_mask causal = {1, -1, -1, 0, 0};
    fmsa_ring_call calls[FMSA_RING_MAX_CALLS];
    (void)state;
    for (int P = 1; P <= 8; ++P)
        for (int r = 0; r < P; ++r)
            for (int s = 0; s < P; ++s) {
                const int j = ((r - s) % P + P) % P;
                const int nz = fmsa_ring_plan_step(FMSA_RING_ZIGZAG, P, r, s, 8, &causal, calls);
                const int nc = fmsa_ring_plan_step(FMSA_RING_CONTIGUOUS, P, r, s, 8, &causal, calls);
                assert_int_equal(nz, 1);
                assert_int_equal(nc, j <= r ? 1 : 0);
            }
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(bands), cmocka_unit_test(alibi),
                                       cmocka_unit_test(masks), cmocka_unit_test(joined)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
