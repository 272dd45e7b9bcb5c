/*
 * 64-byte aligned host allocations for the CPU backend (fmsa_malloc on a CPU
 * context and the per-thread scratch tiles).  Written on plain malloc rather
 * than aligned_alloc / posix_memalign so the same code builds with MSVC, and
 * so a zero-byte request still yields a unique, freeable pointer.  The
 * original malloc pointer is kept in the word just below the aligned block.
 * The per-context arena (cpu_internal.h) keeps one pass's buffer alive
 * between calls.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu_internal.h"
#include "common/error.h"

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

void *fmsa_cpu_arena_take(fmsa_cpu_arena *a, size_t bytes) {
    if (!a || atomic_flag_test_and_set_explicit(&a->busy, memory_order_acquire))
        return fmsa_cpu_aligned_alloc(bytes); /* no arena, or another pass holds it */
    if (a->bytes < bytes) {
        void *grown = fmsa_cpu_aligned_alloc(bytes);
        if (!grown) {
            atomic_flag_clear_explicit(&a->busy, memory_order_release);
            return NULL;
        }
        fmsa_cpu_aligned_free(a->buf);
        a->buf = grown;
        a->bytes = bytes;
    }
    return a->buf;
}

void fmsa_cpu_arena_give(fmsa_cpu_arena *a, void *buf) {
    if (a && buf && buf == a->buf) {
        atomic_flag_clear_explicit(&a->busy, memory_order_release);
        return;
    }
    fmsa_cpu_aligned_free(buf);
}

void fmsa_cpu_arena_release(fmsa_cpu_arena *a) {
    fmsa_cpu_aligned_free(a->buf);
    a->buf = NULL;
    a->bytes = 0;
}

fmsa_status fmsa_cpu_pass_buffers_take(fmsa_cpu_arena *a, int poison, const char *pass,
                                       int nthreads,
                                       const fmsa_cpu_plan *pl, int n_lists,
                                       const size_t *list_bytes, fmsa_cpu_pass_buffers *out) {
    const size_t scratch = fmsa_cpu_round64((size_t)nthreads * pl->scratch_bytes);
    const size_t panels = fmsa_cpu_round64((size_t)(pl->chunk_slots * pl->slot_floats) * sizeof(float));
    size_t total = scratch + panels;
    char *at;
    if (n_lists > FMSA_CPU_PASS_LISTS)
        return fmsa_fail(FMSA_ERR_INTERNAL, "cpu: %s asked for %d work lists (at most %d)", pass,
                         n_lists, FMSA_CPU_PASS_LISTS);
    for (int i = 0; i < n_lists; ++i) total += fmsa_cpu_round64(list_bytes[i]);
    out->base = at = (char *)fmsa_cpu_arena_take(a, total);
    if (!at)
        return fmsa_fail(FMSA_ERR_OUT_OF_MEMORY,
                         "cpu: %s scratch (%d x %zu bytes) and panels (%lld slots x %lld floats)",
                         pass, nthreads, pl->scratch_bytes, (long long)pl->chunk_slots,
                         (long long)pl->slot_floats);
    /* FLASHMSA_CPU_POISON (the test suites): every byte 0xff, a NaN in any
     * float read before it is written, so an output that depends on memory a
     * pass forgot to initialise fails the check instead of passing by luck */
    if (poison) memset(at, 0xff, total);
    out->scratch = at;
    out->panels = (float *)(at += scratch);
    at += panels;
    for (int i = 0; i < n_lists; ++i) {
        out->lists[i] = at;
        at += fmsa_cpu_round64(list_bytes[i]);
    }
    return FMSA_SUCCESS;
}
