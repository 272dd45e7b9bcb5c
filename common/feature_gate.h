/*
 * The features of API v0.2 a backend's kernels may not have yet, and one
 * refusal for them, so that every backend says the same thing in the same
 * words ("cuda: attention sinks (desc.sinks) are not supported by this
 * backend") and none ever computes a problem its kernels ignore part of.
 */
#ifndef FMSA_COMMON_FEATURE_GATE_H
#define FMSA_COMMON_FEATURE_GATE_H

#include "common/problem.h"

/// Bits of fmsa_problem_require's `have`.
enum fmsa_feature {
    FMSA_FEATURE_SINKS = 1u << 0,     ///< desc.sinks (forward) and dsink (backward)
    FMSA_FEATURE_DLSE = 1u << 1,      ///< backward dlse
    FMSA_FEATURE_VALUE_DIM = 1u << 2, ///< Dv != D
    FMSA_FEATURE_LARGE_DIM = 1u << 3, ///< D or Dv above FMSA_HEAD_DIM_SMALL_MAX
};

/// FMSA_ERR_NOT_SUPPORTED naming `backend`, the feature and the dims for the
/// first feature p uses that is not in `have`; FMSA_SUCCESS otherwise.
fmsa_status fmsa_problem_require(const fmsa_problem *p, const char *backend, unsigned have);

#endif /* FMSA_COMMON_FEATURE_GATE_H */
