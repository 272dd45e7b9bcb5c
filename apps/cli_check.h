/*
 * Correctness checks of `flashmsa run` and `flashmsa bench` against the fp64
 * reference (common/reference.h), with the project's rule (ARCHITECTURE.md):
 *
 *   max|out - ref| <= mult * max|naive - ref| + floor,   and no NaN,
 *
 * where naive is the naive same-precision attention of common/naive.h (the
 * suites' yardstick too: scores, probabilities, dP and dS rounded to the
 * dtype as a framework's unfused attention would round them; fp32
 * accumulation), mult is 2 for O and LSE and 3 for gradients, and the floor
 * is the one derived in common/check_rule.h (shared with the test suites).
 * The tolerance is derived from the naive error of the same run, never tuned.
 * The full check runs the naive on whole tensors, the spot check on single
 * rows of benchmark shapes whose score matrices would not fit.
 */
#ifndef FMSA_APPS_CLI_CHECK_H
#define FMSA_APPS_CLI_CHECK_H

#include <stdint.h>

#include "common/problem.h"

/// Error of one output tensor against the fp64 reference.
typedef struct cli_err {
    const char *name;  ///< "O", "LSE", "dQ", "dK", "dV", "dsink"
    double err;        ///< max |backend - reference| over finite pairs (inf on mismatched infinities)
    double naive;      ///< max |naive same-precision - reference|
    double ref_max;    ///< max |reference| over finite values
    double tol;        ///< allowed error (set by cli_check_* )
    int64_t nan_count; ///< NaN elements in the backend's output (poison left unwritten)
    int64_t checked;   ///< elements compared
    int ok;            ///< err <= tol and nan_count == 0
} cli_err;

/// Indices into the cli_err arrays the checks fill.
enum { CLI_ERR_O, CLI_ERR_LSE, CLI_ERR_DQ, CLI_ERR_DK, CLI_ERR_DV, CLI_ERR_DSINK, CLI_ERR_COUNT };

/// Full check of every element: O and LSE from pf (a forward host problem
/// whose o/lse hold the backend's results); with pb != NULL also dQ, dK, dV
/// (a backward host problem whose dq/dk/dv hold the backend's results), and
/// dsink when pb has one (up to 1024 heads).  Fills err[CLI_ERR_COUNT]; entries of passes not checked have checked = 0.
fmsa_status cli_check_full(const fmsa_problem *pf, const fmsa_problem *pb,
                           cli_err err[CLI_ERR_COUNT]);

/// Spot check of rows sampled across batch, heads and positions (always
/// including the first and last row): O and LSE, and dQ when pb != NULL
/// (dK/dV and dsink need every row, so sampled checks cannot see them).
fmsa_status cli_check_rows(const fmsa_problem *pf, const fmsa_problem *pb, int rows,
                           uint64_t seed, cli_err err[CLI_ERR_COUNT]);

/// True when every checked entry passed.
int cli_check_ok(const cli_err err[CLI_ERR_COUNT]);
/// Largest err / tol ratio among checked entries (how close to failing).
double cli_check_worst_ratio(const cli_err err[CLI_ERR_COUNT]);

#endif /* FMSA_APPS_CLI_CHECK_H */
