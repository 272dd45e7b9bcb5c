/*
 * The merge of two finished rows over disjoint key sets, for the public
 * fmsa_merge_states kernel and the split-KV combine alike: the weights come
 * from common/fmsa_softmax.h's fmsa_softmax_merge_lse, and a weight-0 side is
 * selected away, never multiplied (its row may hold anything, NaN included).
 */
#ifndef FMSA_CUDA_MERGE_CUH
#define FMSA_CUDA_MERGE_CUH

#include "../../../common/fmsa_softmax.h"
#include "fmsa_cuda_mma.cuh"

/// wa * a + wb * b with the side of weight 0 left out.
FMSA_DEV float fmsa_cuda_merge_value(float wa, float a, float wb, float b) {
    return (wa != 0.0f ? wa * a : 0.0f) + (wb != 0.0f ? wb * b : 0.0f);
}

/// Folds the row (lse_b, o_b[0..N)) into the running row (*lse, o[0..N)).
template <int N>
FMSA_DEV void fmsa_cuda_merge_step(float *lse, float o[N], float lse_b, const float o_b[N]) {
    float wa, wb;
    *lse = fmsa_softmax_merge_lse(*lse, lse_b, &wa, &wb);
#pragma unroll
    for (int i = 0; i < N; ++i) o[i] = fmsa_cuda_merge_value(wa, o[i], wb, o_b[i]);
}

#endif /* FMSA_CUDA_MERGE_CUH */
