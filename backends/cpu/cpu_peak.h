/*
 * Peak-throughput probe of the CPU (`flashmsa peak`, bench/cpu_vs_torch.py):
 * what a register-resident loop of independent multiply-adds reaches on N
 * threads, per kernel path, so speed figures can be reported as a fraction
 * of what the machine can do rather than against a datasheet.
 */
#ifndef FMSA_CPU_PEAK_H
#define FMSA_CPU_PEAK_H

#include "backends/cpu/cpu_kernels.h"
#include "common/backend.h"

/// What the probe's loop multiplies.
typedef enum fmsa_cpu_peak_kind {
    FMSA_CPU_PEAK_FP32 = 0, ///< fp32 FMA (mul + add for generic / scalar) on the path's vectors
    FMSA_CPU_PEAK_BF16 = 1, ///< bf16 dot products into fp32: vdpbf16ps (avx512), tdpbf16ps (amx)
} fmsa_cpu_peak_kind;

/// Measures GFLOP/s (a multiply-add counts 2) of path isa on `threads` OpenMP
/// threads (<= 0: all) for about `seconds` (<= 0: 0.3 s).  Fails with
/// FMSA_ERR_NOT_SUPPORTED when this CPU or build cannot run the path / kind
/// (BF16 exists for avx512 with AVX512-BF16 and for amx only).
fmsa_status fmsa_cpu_peak_measure(fmsa_cpu_isa isa, fmsa_cpu_peak_kind kind, int threads,
                                  double seconds, double *gflops);

/// The probe in the vtable's form (cpu_backend.c sets .peak to it).
extern const fmsa_backend_peak fmsa_cpu_peak_probe;

#endif /* FMSA_CPU_PEAK_H */
