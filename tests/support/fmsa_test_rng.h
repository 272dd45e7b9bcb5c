/*
 * Seeded pseudo-random numbers for test inputs.  splitmix64 is tiny, has no
 * global state and gives the same stream on every platform, so a case's seed
 * alone reproduces its inputs bit for bit.
 */
#ifndef FMSA_TEST_RNG_H
#define FMSA_TEST_RNG_H

#include <stdint.h>

typedef struct fmsa_test_rng {
    uint64_t state; ///< splitmix64 state
} fmsa_test_rng;

/// Starts a stream; different seeds give unrelated streams.
void fmsa_test_rng_seed(fmsa_test_rng *r, uint64_t seed);
/// Next 64 random bits.
uint64_t fmsa_test_rng_next(fmsa_test_rng *r);
/// Uniform double in [0, 1).
double fmsa_test_rng_uniform(fmsa_test_rng *r);
/// Uniform integer in [lo, hi] (inclusive); lo when hi < lo.
int64_t fmsa_test_rng_range(fmsa_test_rng *r, int64_t lo, int64_t hi);
/// Standard normal N(0, 1) (Box-Muller).
double fmsa_test_rng_normal(fmsa_test_rng *r);

#endif /* FMSA_TEST_RNG_H */
