/*
 * Applying the correctness rule to whole tensors in the suites.  The rule
 * and the derivation of its floor live in common/check_rule.h, shared with
 * the flashmsa program.
 */
#ifndef FMSA_TEST_CHECK_H
#define FMSA_TEST_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "common/check_rule.h"
#include "flashmsa/flashmsa.h"


/// Result of comparing one output tensor.
typedef struct fmsa_test_error {
    double backend;   ///< max |backend - ref| (less part (c)'s allowance) over finite refs
    double naive;     ///< max |naive - ref| over the same elements
    double ref_max;   ///< max |ref| over finite reference values
    double floor;     ///< (a) + (b) of the derivation above
    double tol;       ///< factor * naive + floor
    int64_t worst;    ///< dense index of the largest backend error (-1: none)
    int64_t nan;      ///< elements where the backend output or the reference is NaN
    int64_t inf_bad;  ///< elements where ref is infinite and the backend differs
    int64_t first_bad;///< dense index of the first NaN / infinity mismatch (-1: none)
    int ok;           ///< the rule holds
} fmsa_test_error;

/// Applies the rule to n dense elements; extra (NULL: none) is part (c) of
/// check_rule.h per element, subtracted from that element's error.
void fmsa_test_compare(const double *got, const double *naive, const double *ref,
                       const double *extra, int64_t n, double factor,
                       const fmsa_rule_floor_spec *f, fmsa_test_error *e);

/// One line: "o: err 1.2e-03 <= tol 3.1e-03 (2 x naive 1.5e-03 + floor 7.6e-05), |ref| <= 2.3".
void fmsa_test_error_format(const char *name, const fmsa_test_error *e, double factor, char *buf,
                            size_t len);

#endif /* FMSA_TEST_CHECK_H */
