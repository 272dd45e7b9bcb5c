/*
 * Qualifiers that let the shared headers (fmsa_softmax.h, fmsa_score.h)
 * compile unchanged as C11, CUDA, HIP and OpenCL C.  Keep those headers to
 * the C99 subset that OpenCL C 1.2 accepts: no stdint, no bool, no statics.
 */
#ifndef FMSA_PORTABLE_H
#define FMSA_PORTABLE_H

#if defined(__OPENCL_VERSION__)
#define FMSA_INLINE inline
#define FMSA_PRIVATE __private
#define FMSA_GLOBAL __global
#define FMSA_LOCAL __local
#define FMSA_EXP2(x) exp2(x)
#define FMSA_LOG2(x) log2(x)
#define FMSA_TANH(x) tanh(x)
#define FMSA_FMAX(a, b) fmax((a), (b))
typedef long fmsa_i64;
#elif defined(__CUDACC__) || defined(__HIPCC__) || defined(__HIP__)
#define FMSA_INLINE static __host__ __device__ __forceinline__
#define FMSA_PRIVATE
#define FMSA_GLOBAL
#define FMSA_LOCAL
#define FMSA_EXP2(x) exp2f(x)
#define FMSA_LOG2(x) log2f(x)
#define FMSA_TANH(x) tanhf(x)
#define FMSA_FMAX(a, b) fmaxf((a), (b))
typedef long long fmsa_i64;
#else
#include <math.h>
#define FMSA_INLINE static inline
#define FMSA_PRIVATE
#define FMSA_GLOBAL
#define FMSA_LOCAL
#define FMSA_EXP2(x) exp2f(x)
#define FMSA_LOG2(x) log2f(x)
#define FMSA_TANH(x) tanhf(x)
#define FMSA_FMAX(a, b) fmaxf((a), (b))
typedef long long fmsa_i64;
#endif /* language */

/// log2(e): scores are kept in base-2 units so the hot loop uses exp2.
#define FMSA_LOG2E 1.4426950408889634f
/// ln(2): converts a base-2 log-sum-exp back to the natural log the API returns.
#define FMSA_LN2 0.6931471805599453f

#endif /* FMSA_PORTABLE_H */
