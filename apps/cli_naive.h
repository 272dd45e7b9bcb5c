/*
 * The naive same-precision attention that sets the tolerance of the checks
 * (see cli_check.h): one query row at a time, scores materialised, every
 * intermediate a framework would store (S, P, dP, dS, outputs) rounded to
 * the problem's dtype, sums in fp32.  Not the reference (that is fp64, in
 * common/reference.c) and not a kernel: it answers "how wrong is an honest
 * implementation in this precision", which is what the backend is held to.
 */
#ifndef FMSA_APPS_CLI_NAIVE_H
#define FMSA_APPS_CLI_NAIVE_H

#include "common/problem.h"

/// Scratch for one row: scores and probabilities of every key (2 * seqlen_k floats).
typedef struct cli_naive_row {
    float *s;    ///< scores after scale and softcap (rounded to dtype)
    float *p;    ///< probabilities (rounded to dtype); 0 for masked keys
    float *o;    ///< output row, D floats (rounded to dtype)
    float *dq;   ///< dQ row, D floats (rounded to dtype)
    float lse;   ///< natural-log LSE of the row (-inf when fully masked)
    int any;     ///< at least one key was visible
} cli_naive_row;

/// Allocates scratch for rows of problem p; 0 on success.
int cli_naive_row_alloc(const fmsa_problem *p, cli_naive_row *r);
/// Frees what cli_naive_row_alloc allocated.
void cli_naive_row_free(cli_naive_row *r);

/// Forward of row i of sequence b, query head h into r (s, p, o, lse).
void cli_naive_forward_row(const fmsa_problem *p, int64_t b, int64_t h, int64_t i,
                           cli_naive_row *r);

/// Backward of the same row after cli_naive_forward_row: writes r->dq and,
/// when dk/dv are not NULL, adds this row's contributions to the fp32
/// accumulators dk/dv ([seqlen_k, D] for the row's kv head).
void cli_naive_backward_row(const fmsa_problem *p, int64_t b, int64_t h, int64_t i,
                            cli_naive_row *r, float *dk, float *dv);

/// Rounds x to the problem's dtype and back (identity for fp32).
float cli_naive_round(fmsa_dtype dtype, float x);

#endif /* FMSA_APPS_CLI_NAIVE_H */
