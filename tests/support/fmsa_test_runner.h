/*
 * Runs one correctness case end to end on any backend, and the main() of a
 * table-driven cmocka suite (one cmocka test per case, so the test counts and
 * each case's name show in CTest's output).
 *
 * One case: random inputs -> fp64 reference and naive same-precision results
 * on the host -> upload guarded, poisoned buffers -> fmsa_forward or
 * fmsa_backward through the public API -> download everything -> guards,
 * padding and inputs bit-identical, outputs fully written -> the correctness
 * rule (fmsa_test_check.h) on O and LSE, or on dQ, dK and dV.  Backward cases
 * feed the reference's O (rounded to the dtype) and LSE, so the backward is
 * judged on its own.  A failing case prints a one-line reproducer.
 */
#ifndef FMSA_TEST_RUNNER_H
#define FMSA_TEST_RUNNER_H

#include <stddef.h>

#include "support/fmsa_test_spec.h"

typedef enum fmsa_test_result {
    FMSA_TEST_PASS = 0, ///< every check held
    FMSA_TEST_SKIP = 1, ///< the backend returned FMSA_ERR_NOT_SUPPORTED (outputs untouched)
    FMSA_TEST_FAIL = 2, ///< see the message
} fmsa_test_result;

/// Runs one case; msg receives the reason (one line per problem) on skip/failure
/// and a summary of the errors on success.
fmsa_test_result fmsa_test_case_run(fmsa_context *ctx, const fmsa_test_spec *spec, char *msg,
                                    size_t len);

/// Compact description ("bwd f16 2x113x203 h6:2 d72 causal mask varlen").
void fmsa_test_spec_summary(const fmsa_test_spec *s, char *buf, size_t len);

/// Builds a case table from spec strings (the form fmsa_test_spec_format
/// prints).  Each row starts from pass = default_pass and seed = its index + 1;
/// keys in the row override them.  Returns 0, or -1 after naming the bad row.
int fmsa_test_specs_parse(const char *const *rows, size_t count, fmsa_pass default_pass,
                          fmsa_test_spec *out);

/// main() of a suite over a case table: parses the options, creates the
/// context and runs the selected cases as one cmocka group.  Returns the
/// process exit status (FMSA_TEST_EXIT_SKIP when the backend is unavailable).
int fmsa_test_suite_main(int argc, char **argv, const char *suite, const fmsa_test_spec *cases,
                         size_t count);

/// The same for a suite of features some backends' kernels lack (sinks,
/// dlse, Dv != D, large head dims): each case first checks the oracles
/// against each other (fmsa_test_oracle.h), whatever the backend does; a
/// refusal (FMSA_ERR_NOT_SUPPORTED, outputs untouched) counts as 'not
/// supported' -- printed, skipped -- only when its message is the feature
/// gate's (common/feature_gate.c) and the environment variable
/// FLASHMSA_TEST_REQUIRE_ALL ("1", or a comma list such as "cpu,opencl")
/// does not name the backend; any other refusal fails, on the CPU too.
int fmsa_test_suite_main_features(int argc, char **argv, const char *suite,
                                  const fmsa_test_spec *cases, size_t count);

/// 1 when msg (a case's message) holds a refusal of common/feature_gate.c
/// (a feature or head dims a backend's kernels lack), 0 for any other.
int fmsa_test_is_gate_refusal(const char *msg);

#endif /* FMSA_TEST_RUNNER_H */
