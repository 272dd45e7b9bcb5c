/*
 * The limits of the public API, one definition for validation, the planner
 * and every kernel (host C, CUDA, HIP and OpenCL C include this file): a
 * kernel sizes its private row buffers by FMSA_HEAD_DIM_MAX, so validation
 * must never admit more than the kernels were built for.  Plain macros only.
 */
#ifndef FMSA_LIMITS_H
#define FMSA_LIMITS_H

/// Smallest head dim (q.shape[3]) a call may have.
#define FMSA_HEAD_DIM_MIN 8
/// Largest head dim; kernels size their per-row buffers by it.
#define FMSA_HEAD_DIM_MAX 256
/// Head dims are multiples of this: kernels move rows in 8-element vectors.
#define FMSA_HEAD_DIM_MULTIPLE 8

#endif /* FMSA_LIMITS_H */
