#include "support/fmsa_test_rng.h"

#include <math.h>

void fmsa_test_rng_seed(fmsa_test_rng *r, uint64_t seed) {
    /* Mix the seed once so that small consecutive seeds do not start close. */
    r->state = seed ^ 0x6a09e667f3bcc909ull;
    (void)fmsa_test_rng_next(r);
}

uint64_t fmsa_test_rng_next(fmsa_test_rng *r) {
    uint64_t z = (r->state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

double fmsa_test_rng_uniform(fmsa_test_rng *r) {
    /* 53 random bits -> exactly representable doubles in [0, 1) */
    return (double)(fmsa_test_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

int64_t fmsa_test_rng_range(fmsa_test_rng *r, int64_t lo, int64_t hi) {
    if (hi <= lo) return lo;
    return lo + (int64_t)(fmsa_test_rng_next(r) % (uint64_t)(hi - lo + 1));
}

double fmsa_test_rng_normal(fmsa_test_rng *r) {
    /* 1 - u keeps the logarithm's argument in (0, 1]. */
    double u1 = 1.0 - fmsa_test_rng_uniform(r);
    double u2 = fmsa_test_rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
