/*
 * Run-time choice of the CPU micro-kernels, made once per process.
 *
 * The best path the CPU can run wins (AMX > AVX-512 > AVX2+FMA > NEON > generic C);
 * FLASHMSA_CPU_KERNEL=amx|avx512|avx2|neon|generic|scalar|generic-bf16 forces one, which is how
 * the test grid checks every path on a machine that has them all.  Forcing a
 * path the CPU (or this build) lacks is an error naming the path, never a
 * silent fallback: a test that thinks it checked AVX-512 must have run it.
 *
 * AMX needs more than cpuid: Linux only lets a process touch the 8 KiB tile
 * state after arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) (kernel
 * 5.16+), so the request is part of "usable".  The permission is per process
 * (every thread, existing or later, shares it), so asking once here suffices.
 */
#if defined(__linux__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE 1 /* syscall() */
#endif /* __linux__ */

#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu_kernels.h"
#include "common/error.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define FMSA_CPU_DISPATCH_X86 1
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#define FMSA_ARCH_REQ_XCOMP_PERM 0x1023 ///< arch_prctl code (asm/prctl.h, Linux 5.16)
#define FMSA_XFEATURE_XTILEDATA 18      ///< XSAVE feature number of the AMX tile data
#endif /* __linux__ */
#endif /* x86-64 GNU */

#if defined(_WIN32)
#include <windows.h>
static INIT_ONCE cpu_once = INIT_ONCE_STATIC_INIT;
#else
#include <pthread.h>
static pthread_once_t cpu_once = PTHREAD_ONCE_INIT;
#endif /* _WIN32 */

static const char *const cpu_isa_names[FMSA_CPU_ISA_COUNT] = {
    "amx", "avx512", "avx2", "neon", "generic", "scalar", "generic-bf16"};

/// The decision, written once under the once-guard.
static struct {
    const fmsa_cpu_kernels *kernels; ///< NULL when the request could not be met
    fmsa_status status;              ///< why not (FMSA_SUCCESS otherwise)
    char why[160];                   ///< message for fmsa_fail on every later call
    int usable[FMSA_CPU_ISA_COUNT];  ///< what the CPU supports
} cpu_choice;

const char *fmsa_cpu_isa_name(fmsa_cpu_isa isa) {
    return (unsigned)isa < FMSA_CPU_ISA_COUNT ? cpu_isa_names[isa] : "?";
}

/// The table of a path compiled into this build (NULL if it was not).
static const fmsa_cpu_kernels *cpu_table(fmsa_cpu_isa isa) {
    switch (isa) {
    case FMSA_CPU_ISA_AMX: return fmsa_cpu_kernels_amx();
    case FMSA_CPU_ISA_AVX512: /* vdpbf16ps for bf16 inputs only where the CPU has AVX512-BF16 */
#ifdef FMSA_CPU_DISPATCH_X86
        return __builtin_cpu_supports("avx512bf16") ? fmsa_cpu_kernels_avx512()
                                                    : fmsa_cpu_kernels_avx512_nobf16();
#else
        return fmsa_cpu_kernels_avx512();
#endif /* FMSA_CPU_DISPATCH_X86 */
    case FMSA_CPU_ISA_AVX2: return fmsa_cpu_kernels_avx2();
    case FMSA_CPU_ISA_NEON: return fmsa_cpu_kernels_neon();
    case FMSA_CPU_ISA_GENERIC: return fmsa_cpu_kernels_generic();
    case FMSA_CPU_ISA_SCALAR: return fmsa_cpu_kernels_scalar();
    case FMSA_CPU_ISA_GENERIC_BF16: return fmsa_cpu_kernels_generic_bf16();
    default: return NULL;
    }
}

#ifdef FMSA_CPU_DISPATCH_X86
/// Asks Linux for the AMX tile state; 1 when granted (or already granted).
static int cpu_amx_permission(void) {
#if defined(__linux__)
    return syscall(SYS_arch_prctl, FMSA_ARCH_REQ_XCOMP_PERM, FMSA_XFEATURE_XTILEDATA) == 0;
#else
    return 0; /* other OSes: no known permission protocol, so no AMX */
#endif /* __linux__ */
}
#endif /* FMSA_CPU_DISPATCH_X86 */

/// Fills cpu_choice.usable from cpuid (through the compiler's builtins).
static void cpu_probe(void) {
    cpu_choice.usable[FMSA_CPU_ISA_GENERIC] = 1;
    cpu_choice.usable[FMSA_CPU_ISA_SCALAR] = 1;
    cpu_choice.usable[FMSA_CPU_ISA_GENERIC_BF16] = 1;
    /* Advanced SIMD is part of AArch64 (ARMv8-A): compiled in means usable */
    cpu_choice.usable[FMSA_CPU_ISA_NEON] = 1;
#ifdef FMSA_CPU_DISPATCH_X86
    __builtin_cpu_init();
    /* __builtin_cpu_supports also checks that the OS saves the ymm/zmm state */
    cpu_choice.usable[FMSA_CPU_ISA_AVX2] =
        __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    cpu_choice.usable[FMSA_CPU_ISA_AVX512] =
        cpu_choice.usable[FMSA_CPU_ISA_AVX2] && __builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512dq");
    {
        /* gcc 12's __builtin_cpu_supports knows no AMX names: read cpuid leaf 7
         * directly (EDX bit 22 AMX-BF16, bit 24 AMX-TILE) */
        unsigned int a, b, c, d;
        int amx = 0;
        __asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(7u), "c"(0u));
        amx = ((d >> 22) & 1u) && ((d >> 24) & 1u);
        /* the AMX table's softmax converts P with vcvtneps2bf16: AVX512-BF16 too
         * (every AMX CPU has it) */
        cpu_choice.usable[FMSA_CPU_ISA_AMX] = cpu_choice.usable[FMSA_CPU_ISA_AVX512] && amx &&
                                              __builtin_cpu_supports("avx512bf16") &&
                                              cpu_amx_permission();
    }
#endif /* FMSA_CPU_DISPATCH_X86 */
    for (int i = 0; i < FMSA_CPU_ISA_COUNT; ++i)
        if (!cpu_table((fmsa_cpu_isa)i)) cpu_choice.usable[i] = 0;
}

static void cpu_decide(void) {
    const char *env = getenv("FLASHMSA_CPU_KERNEL");
    cpu_probe();
    if (env && *env) {
        int isa = -1;
        for (int i = 0; i < FMSA_CPU_ISA_COUNT; ++i)
            if (strcmp(env, cpu_isa_names[i]) == 0) isa = i;
        if (isa < 0) {
            cpu_choice.status = FMSA_ERR_INVALID_ARGUMENT;
            strcpy(cpu_choice.why, "FLASHMSA_CPU_KERNEL: unknown kernel path (use amx, avx512, "
                                   "avx2, neon, generic, scalar or generic-bf16)");
            return;
        }
        if (!cpu_choice.usable[isa]) {
            cpu_choice.status = FMSA_ERR_NOT_SUPPORTED;
            strcpy(cpu_choice.why, "FLASHMSA_CPU_KERNEL=");
            strcat(cpu_choice.why, cpu_isa_names[isa]);
            strcat(cpu_choice.why, ": this CPU (or this build) cannot run that kernel path");
            return;
        }
        cpu_choice.kernels = cpu_table((fmsa_cpu_isa)isa);
        fmsa_log(FMSA_LOG_INFO, "cpu: kernel path %s (forced by FLASHMSA_CPU_KERNEL)",
                 cpu_choice.kernels->name);
        return;
    }
    for (int i = 0; i <= FMSA_CPU_ISA_GENERIC; ++i) /* scalar, generic-bf16: only when forced */
        if (cpu_choice.usable[i]) {
            cpu_choice.kernels = cpu_table((fmsa_cpu_isa)i);
            break;
        }
    fmsa_log(FMSA_LOG_INFO, "cpu: kernel path %s (best this CPU supports)",
             cpu_choice.kernels->name);
}

#if defined(_WIN32)
static BOOL CALLBACK cpu_decide_once(PINIT_ONCE once, PVOID param, PVOID *ctx) {
    (void)once;
    (void)param;
    (void)ctx;
    cpu_decide();
    return TRUE;
}
#endif /* _WIN32 */

static void cpu_run_once(void) {
#if defined(_WIN32)
    InitOnceExecuteOnce(&cpu_once, cpu_decide_once, NULL, NULL);
#else
    pthread_once(&cpu_once, cpu_decide);
#endif /* _WIN32 */
}

fmsa_status fmsa_cpu_kernels_get(const fmsa_cpu_kernels **out) {
    cpu_run_once();
    if (!cpu_choice.kernels) return fmsa_fail(cpu_choice.status, "cpu: %s", cpu_choice.why);
    *out = cpu_choice.kernels;
    return FMSA_SUCCESS;
}

int fmsa_cpu_isa_usable(fmsa_cpu_isa isa) {
    cpu_run_once();
    return (unsigned)isa < FMSA_CPU_ISA_COUNT && cpu_choice.usable[isa];
}
