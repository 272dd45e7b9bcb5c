/*
 * The oracle pair checked against itself for one case, with no backend: the
 * fp64 reference and the naive implementation are written independently, so
 * on the case's shape and features in f32 they must agree to within fp32
 * rounding.  A semantic slip in either (a sink term missing from one, dlse
 * with the wrong sign, values read with D instead of Dv) moves a result by
 * a sizeable fraction of its magnitude and fails here, on every backend, even
 * where the backend under test refuses the case.
 */
#ifndef FMSA_TEST_ORACLE_H
#define FMSA_TEST_ORACLE_H

#include <stddef.h>

#include "support/fmsa_test_spec.h"

/// Runs reference and naive on spec's problem with dtype f32 and compares
/// every output the pass has (o, lse; dq, dk, dv, dsink).  0 when they agree;
/// -1 with the reason in msg.  *worst_ratio (may be NULL) gets the largest
/// error / bound seen.
int fmsa_test_oracle_check(const fmsa_test_spec *spec, char *msg, size_t len,
                           double *worst_ratio);

#endif /* FMSA_TEST_ORACLE_H */
