/*
 * The peak probe (cpu_peak.h).  Each ISA's loop keeps 12 independent
 * accumulator chains in registers (two FMA pipes x 4-6 cycles of latency
 * need at least 8-12 in flight) and touches no memory, so it measures the
 * arithmetic units and nothing else.  Every thread runs the same number of
 * iterations between two barriers; GFLOP/s = total flops / wall time, so a
 * thread slowed by another process lowers the figure as it would a real run.
 *
 * The ISA code uses target attributes rather than per-file flags so the
 * probe stays one file; the dispatcher's cpuid checks guard every call.
 */
#if defined(__linux__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE 1
#endif /* __linux__ */

#include "backends/cpu/cpu_peak.h"

#include <string.h>

#include "backends/cpu/cpu_internal.h"
#include "backends/cpu/cpu_trace.h"
#include "common/error.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define FMSA_PEAK_X86 1
#endif /* x86-64 GNU */

#define PEAK_CHAINS 12 ///< independent accumulators per loop

/// Generic / scalar: 4-lane arrays the compiler may vectorise (generic) or not.
static double peak_generic(int64_t iters, float seed) {
    float acc[PEAK_CHAINS][4], m = 0.999999f, c = 1e-7f, s = 0.0f;
    for (int i = 0; i < PEAK_CHAINS; ++i)
        for (int l = 0; l < 4; ++l) acc[i][l] = seed + (float)(i * 4 + l);
    for (int64_t it = 0; it < iters; ++it)
        for (int i = 0; i < PEAK_CHAINS; ++i)
            for (int l = 0; l < 4; ++l) acc[i][l] = acc[i][l] * m + c;
    for (int i = 0; i < PEAK_CHAINS; ++i)
        for (int l = 0; l < 4; ++l) s += acc[i][l];
    return s;
}

#ifdef FMSA_PEAK_X86
#define PEAK_DECL12(T, INIT)                                                                   \
    T r0 = INIT, r1 = INIT, r2 = INIT, r3 = INIT, r4 = INIT, r5 = INIT, r6 = INIT, r7 = INIT, \
      r8 = INIT, r9 = INIT, r10 = INIT, r11 = INIT
#define PEAK_STEP12(OP)                                                                        \
    r0 = OP(r0); r1 = OP(r1); r2 = OP(r2); r3 = OP(r3); r4 = OP(r4); r5 = OP(r5);          \
    r6 = OP(r6); r7 = OP(r7); r8 = OP(r8); r9 = OP(r9); r10 = OP(r10); r11 = OP(r11)
/* An empty asm that claims to change every accumulator: without it GCC sees
 * twelve chains with the same start and the same operation, merges them into
 * one, and the loop runs at the FMA latency while being counted as twelve
 * chains (the probe then reported 1.5x the real peak). */
#define PEAK_OPAQUE12(C)                                                                       \
    __asm__ volatile("" : "+" C(r0), "+" C(r1), "+" C(r2), "+" C(r3), "+" C(r4), "+" C(r5),   \
                     "+" C(r6), "+" C(r7), "+" C(r8), "+" C(r9), "+" C(r10), "+" C(r11))
#define PEAK_SUM12(ADD) ADD(ADD(ADD(ADD(r0, r1), ADD(r2, r3)), ADD(ADD(r4, r5), ADD(r6, r7))), \
                            ADD(ADD(r8, r9), ADD(r10, r11)))

__attribute__((target("avx2,fma"))) static double peak_avx2(int64_t iters, float seed) {
    const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
    PEAK_DECL12(__m256, _mm256_set1_ps(seed));
#define PEAK_FMA256(x) _mm256_fmadd_ps((x), m, c)
    for (int64_t it = 0; it < iters; ++it) {
        PEAK_STEP12(PEAK_FMA256);
        PEAK_OPAQUE12("x");
    }
    {
        __m256 s = PEAK_SUM12(_mm256_add_ps);
        float out[8];
        _mm256_storeu_ps(out, s);
        return out[0] + out[7];
    }
}

__attribute__((target("avx512f"))) static double peak_avx512(int64_t iters, float seed) {
    const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
    PEAK_DECL12(__m512, _mm512_set1_ps(seed));
#define PEAK_FMA512(x) _mm512_fmadd_ps((x), m, c)
    for (int64_t it = 0; it < iters; ++it) {
        PEAK_STEP12(PEAK_FMA512);
        PEAK_OPAQUE12("v");
    }
    return _mm512_reduce_add_ps(PEAK_SUM12(_mm512_add_ps));
}

__attribute__((target("avx512f,avx512bf16"))) static double peak_avx512_bf16(int64_t iters,
                                                                              float seed) {
    const __m512bh a = (__m512bh)_mm512_set1_epi16(0x3f80), b = a; /* bf16 1.0 */
    PEAK_DECL12(__m512, _mm512_set1_ps(seed));
#define PEAK_DP512(x) _mm512_dpbf16_ps((x), a, b)
    for (int64_t it = 0; it < iters; ++it) {
        PEAK_STEP12(PEAK_DP512);
        PEAK_OPAQUE12("v");
    }
    return _mm512_reduce_add_ps(PEAK_SUM12(_mm512_add_ps));
}

/// AMX tile configuration (palette 1): 64 bytes, the layout ldtilecfg reads.
typedef struct peak_tilecfg {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} peak_tilecfg;

__attribute__((target("amx-tile,amx-bf16"))) static double peak_amx(int64_t iters, float seed) {
    /* 4 accumulators (tmm0-3) fed by tmm4 (A) and tmm5 (B): 16x16 fp32 +=
     * 16x32 bf16 . 32x16 bf16, 16*16*32*2 = 16384 flops per tdpbf16ps */
    static const uint16_t ones[16 * 32] = {0};
    float out[16 * 16];
    peak_tilecfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 6; ++t) {
        cfg.colsb[t] = 64;
        cfg.rows[t] = 16;
    }
    _tile_loadconfig(&cfg);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    _tile_loadd(4, ones, 64);
    _tile_loadd(5, ones, 64);
    for (int64_t it = 0; it < iters; ++it) {
        _tile_dpbf16ps(0, 4, 5);
        _tile_dpbf16ps(1, 4, 5);
        _tile_dpbf16ps(2, 4, 5);
        _tile_dpbf16ps(3, 4, 5);
    }
    _tile_stored(0, out, 64);
    _tile_release();
    return out[0] + seed;
}
#endif /* FMSA_PEAK_X86 */

typedef double (*peak_loop_fn)(int64_t iters, float seed);

/// The loop and its flops per iteration for (isa, kind); NULL if none.
static peak_loop_fn peak_loop(fmsa_cpu_isa isa, fmsa_cpu_peak_kind kind, double *flops_per_iter) {
    if (kind == FMSA_CPU_PEAK_FP32) {
        switch (isa) {
        case FMSA_CPU_ISA_GENERIC:
        case FMSA_CPU_ISA_NEON: /* 4 lanes: the portable loop (compilers emit fmla for it) */
        case FMSA_CPU_ISA_SCALAR: *flops_per_iter = PEAK_CHAINS * 4 * 2; return peak_generic;
#ifdef FMSA_PEAK_X86
        case FMSA_CPU_ISA_AVX2: *flops_per_iter = PEAK_CHAINS * 8 * 2; return peak_avx2;
        case FMSA_CPU_ISA_AVX512:
        case FMSA_CPU_ISA_AMX: *flops_per_iter = PEAK_CHAINS * 16 * 2; return peak_avx512;
#endif /* FMSA_PEAK_X86 */
        default: return NULL;
        }
    }
#ifdef FMSA_PEAK_X86
    if (isa == FMSA_CPU_ISA_AMX) {
        *flops_per_iter = 4.0 * 16 * 16 * 32 * 2;
        return peak_amx;
    }
    if (isa == FMSA_CPU_ISA_AVX512 && __builtin_cpu_supports("avx512bf16")) {
        *flops_per_iter = PEAK_CHAINS * 16 * 2 * 2; /* 2 bf16 products per fp32 lane */
        return peak_avx512_bf16;
    }
#endif /* FMSA_PEAK_X86 */
    return NULL;
}


/// volatile sink: keeps the loops' results alive
static volatile double peak_sink;

fmsa_status fmsa_cpu_peak_measure(fmsa_cpu_isa isa, fmsa_cpu_peak_kind kind, int threads,
                                  double seconds, double *gflops) {
    double per_iter = 0.0, t0, t1 = 0.0, elapsed = 0.0;
    peak_loop_fn fn;
    int64_t iters = 1000, warm;
    if (!fmsa_cpu_isa_usable(isa) || !(fn = peak_loop(isa, kind, &per_iter)))
        return fmsa_fail(FMSA_ERR_NOT_SUPPORTED, "cpu: peak probe of %s %s: not available on "
                         "this CPU or build", fmsa_cpu_isa_name(isa),
                         kind == FMSA_CPU_PEAK_FP32 ? "fp32" : "bf16");
#ifdef _OPENMP
    if (threads <= 0) threads = fmsa_cpu_max_threads();
#else
    threads = 1; /* no OpenMP: the loop below runs once, on this thread */
#endif /* _OPENMP */
    if (seconds <= 0.0) seconds = 0.3;
    /* calibrate on one thread (also warms the vector units up to speed) */
    while (elapsed < 0.02 && iters < ((int64_t)1 << 40)) {
        iters *= 4;
        t0 = fmsa_cpu_wall_seconds();
        peak_sink = fn(iters, 1.0f);
        elapsed = fmsa_cpu_wall_seconds() - t0;
    }
    warm = iters;
    iters = (int64_t)((double)iters * seconds / elapsed) + 1;
    t0 = fmsa_cpu_wall_seconds();
FMSA_CPU_OMP(omp parallel num_threads(threads))
    {
        double r;
        /* every thread first runs the calibration's ~0.02 s untimed: the other
         * cores may just have been woken (a new process creates its OpenMP
         * threads here); what it changed is in bench/RESULTS.md (103407e) */
        r = fn(warm, 2.0f);
FMSA_CPU_OMP(omp atomic)
        peak_sink += r;
FMSA_CPU_OMP(omp barrier)
FMSA_CPU_OMP(omp master)
        t0 = fmsa_cpu_wall_seconds();
        r = fn(iters, (float)fmsa_cpu_thread_num());
FMSA_CPU_OMP(omp barrier)
FMSA_CPU_OMP(omp master)
        t1 = fmsa_cpu_wall_seconds();
FMSA_CPU_OMP(omp atomic)
        peak_sink += r;
    }
    *gflops = per_iter * (double)iters * (double)threads / (t1 - t0) * 1e-9;
    return FMSA_SUCCESS;
}

/* The probe as the vtable offers it (backend.h), so the flashmsa program
 * reaches it without this backend's headers; paths are fmsa_cpu_isa values. */
static const char *cpu_peak_path_name(int path) { return fmsa_cpu_isa_name((fmsa_cpu_isa)path); }

static int cpu_peak_path_usable(int path) { return fmsa_cpu_isa_usable((fmsa_cpu_isa)path); }

static int cpu_peak_path_selected(void) {
    const fmsa_cpu_kernels *k;
    return fmsa_cpu_kernels_get(&k) == FMSA_SUCCESS ? (int)k->isa : -1;
}

static fmsa_status cpu_peak_path_measure(int path, fmsa_peak_kind kind, int threads,
                                         double seconds, double *gflops) {
    const fmsa_cpu_peak_kind k = kind == FMSA_PEAK_BF16 ? FMSA_CPU_PEAK_BF16 : FMSA_CPU_PEAK_FP32;
    if (path < 0 || path >= FMSA_CPU_ISA_COUNT)
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "peak path %d: the CPU has %d", path,
                         FMSA_CPU_ISA_COUNT);
    return fmsa_cpu_peak_measure((fmsa_cpu_isa)path, k, threads, seconds, gflops);
}

const fmsa_backend_peak fmsa_cpu_peak_probe = {
    .path_count = FMSA_CPU_ISA_COUNT,         /* every fmsa_cpu_isa, usable or not */
    .path_name = cpu_peak_path_name,          /* "amx", "avx512", ... */
    .path_usable = cpu_peak_path_usable,      /* cpuid and the build */
    .path_selected = cpu_peak_path_selected,  /* FLASHMSA_CPU_KERNEL or the best */
    .measure = cpu_peak_path_measure,         /* fmsa_cpu_peak_measure */
};
