/*
 * 64-byte aligned host allocations for the CPU backend (fmsa_malloc on a CPU
 * context and the per-thread scratch tiles).  Written on plain malloc rather
 * than aligned_alloc / posix_memalign so the same code builds with MSVC, and
 * so a zero-byte request still yields a unique, freeable pointer.  The
 * original malloc pointer is kept in the word just below the aligned block.
 */
#include <stdint.h>
#include <stdlib.h>

#include "backends/cpu/cpu_internal.h"

/// One cache line: keeps fp32 tiles on their own lines and satisfies every
/// SIMD load alignment up to AVX-512.
#define FMSA_CPU_ALIGN 64u

void *fmsa_cpu_aligned_alloc(size_t bytes) {
    const size_t extra = FMSA_CPU_ALIGN + sizeof(void *);
    char *raw;
    uintptr_t aligned;
    if (bytes > SIZE_MAX - extra) return NULL;
    raw = (char *)malloc(bytes + extra);
    if (!raw) return NULL;
    aligned = ((uintptr_t)(raw + sizeof(void *)) + (FMSA_CPU_ALIGN - 1)) &
              ~(uintptr_t)(FMSA_CPU_ALIGN - 1);
    ((void **)aligned)[-1] = raw;
    return (void *)aligned;
}

void fmsa_cpu_aligned_free(void *ptr) {
    if (ptr) free(((void **)ptr)[-1]);
}
