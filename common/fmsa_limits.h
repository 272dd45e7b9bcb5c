/*
 * The limits of the public API, one definition for validation, the planner
 * and every kernel (host C, CUDA, HIP and OpenCL C include this file).
 * Validation admits up to FMSA_HEAD_DIM_MAX; a kernel family that sizes its
 * private row buffers by a smaller bound refuses larger dims in its backend's
 * supports() (FMSA_ERR_NOT_SUPPORTED), so no kernel ever sees a head dim it
 * was not built for.  Plain macros only.
 */
#ifndef FMSA_LIMITS_H
#define FMSA_LIMITS_H

/// Smallest head dim (q.shape[3] or v.shape[3]) a call may have.
#define FMSA_HEAD_DIM_MIN 8
/// Largest head dim of the API (D and Dv): 512 (Gemma 4) and MLA's 576/512.
#define FMSA_HEAD_DIM_MAX 576
/// The bound the v0.1 kernels size their per-row buffers by; a backend whose
/// kernels still use it refuses D or Dv above it.
#define FMSA_HEAD_DIM_SMALL_MAX 256
/// Head dims are multiples of this: kernels move rows in 8-element vectors.
#define FMSA_HEAD_DIM_MULTIPLE 8

#endif /* FMSA_LIMITS_H */
