/*
 * Device query of the CPU backend: the host CPU as an fmsa_device_info.
 *
 * The planner reads the CPU as "one block per core": sram_per_block is the L1
 * data cache a thread's hot tiles should live in, sram_per_block_optin the L2
 * they may spill to.  Cache sizes come from sysconf (glibc) or sysfs (any
 * Linux); unknown sizes fall back to 32 KiB / 1 MiB, which every x86-64 and
 * ARMv8 server core of the last decade meets or exceeds.
 */
#if defined(__linux__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE 1 /* sysconf(_SC_LEVEL1_DCACHE_SIZE) is a glibc extension */
#endif /* __linux__ */

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__unix__) || defined(__APPLE__)
#include <unistd.h>
#define FMSA_CPU_HAVE_SYSCONF 1
#endif /* unix */

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#define FMSA_CPU_X86 1
#endif /* x86 with GNU builtins */

#include "backends/cpu/cpu_internal.h"
#include "common/error.h"

#define FMSA_CPU_DEFAULT_L1 ((size_t)32 << 10) ///< unknown L1d: 32 KiB
#define FMSA_CPU_DEFAULT_L2 ((size_t)1 << 20)  ///< unknown L2: 1 MiB

/// Copies src into dst (capacity cap) without leading/trailing blanks.
static void cpu_copy_trimmed(char *dst, size_t cap, const char *src) {
    size_t n;
    while (*src && isspace((unsigned char)*src)) ++src;
    n = strlen(src);
    while (n > 0 && isspace((unsigned char)src[n - 1])) --n;
    if (n >= cap) n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/// "model name" of /proc/cpuinfo (Linux x86), else the cpuid brand string.
static int cpu_brand(char *out, size_t cap) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[512];
        int found = 0;
        while (!found && fgets(line, sizeof line, f)) {
            char *colon = strchr(line, ':');
            if (strncmp(line, "model name", 10) == 0 && colon) {
                cpu_copy_trimmed(out, cap, colon + 1);
                found = out[0] != '\0';
            }
        }
        fclose(f);
        if (found) return 1;
    }
#ifdef FMSA_CPU_X86
    if ((unsigned int)__get_cpuid_max(0x80000000u, NULL) >= 0x80000004u) {
        unsigned int regs[12];
        char brand[49];
        for (unsigned int k = 0; k < 3; ++k)
            __get_cpuid(0x80000002u + k, &regs[4 * k], &regs[4 * k + 1], &regs[4 * k + 2],
                        &regs[4 * k + 3]);
        memcpy(brand, regs, 48);
        brand[48] = '\0';
        cpu_copy_trimmed(out, cap, brand);
        if (out[0]) return 1;
    }
#endif /* FMSA_CPU_X86 */
    return 0;
}

/// Size of the cpu0 cache of the given level and kind from sysfs (0 if unknown).
static size_t cpu_sysfs_cache(int level, int data) {
    for (int idx = 0; idx < 16; ++idx) {
        char path[96], buf[64];
        FILE *f;
        int lvl = 0, ok_type = 0;
        size_t size = 0;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", idx);
        if (!(f = fopen(path, "r"))) break;
        if (fgets(buf, sizeof buf, f)) lvl = atoi(buf);
        fclose(f);
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", idx);
        if ((f = fopen(path, "r"))) {
            if (fgets(buf, sizeof buf, f))
                ok_type = data ? strncmp(buf, "Data", 4) == 0
                               : (strncmp(buf, "Unified", 7) == 0 || strncmp(buf, "Data", 4) == 0);
            fclose(f);
        }
        if (lvl != level || !ok_type) continue;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", idx);
        if ((f = fopen(path, "r"))) {
            if (fgets(buf, sizeof buf, f)) {
                char *end;
                size = (size_t)strtoull(buf, &end, 10);
                if (*end == 'K') size <<= 10;
                else if (*end == 'M') size <<= 20;
            }
            fclose(f);
        }
        if (size) return size;
    }
    return 0;
}

/// L1 data (level 1) or L2 (level 2) cache bytes per core.
static size_t cpu_cache_size(int level) {
    size_t bytes = 0;
#if defined(FMSA_CPU_HAVE_SYSCONF) && defined(_SC_LEVEL1_DCACHE_SIZE) && defined(_SC_LEVEL2_CACHE_SIZE)
    {
        long v = sysconf(level == 1 ? _SC_LEVEL1_DCACHE_SIZE : _SC_LEVEL2_CACHE_SIZE);
        if (v > 0) bytes = (size_t)v;
    }
#endif /* sysconf cache queries */
    if (!bytes) bytes = cpu_sysfs_cache(level, level == 1);
    if (!bytes) bytes = level == 1 ? FMSA_CPU_DEFAULT_L1 : FMSA_CPU_DEFAULT_L2;
    return bytes;
}

/// Planner arch key and fp32 SIMD lanes of the widest usable vector unit.
static void cpu_isa(char *arch, size_t cap, int *lanes) {
    const char *key = "cpu";
    *lanes = 4;
#if defined(FMSA_CPU_X86)
    __builtin_cpu_init();
    key = "x86";
    if (__builtin_cpu_supports("avx512f")) {
        key = "x86-avx512";
        *lanes = 16;
    } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        key = "x86-avx2";
        *lanes = 8;
    }
#elif defined(__aarch64__)
    key = "aarch64"; /* NEON is architectural on ARMv8-A: 4 fp32 lanes */
#endif /* arch */
    cpu_copy_trimmed(arch, cap, key);
}

fmsa_status fmsa_cpu_device_info(int index, fmsa_device_info *info) {
    if (index != 0)
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "cpu: device index %d (the CPU backend has "
                         "exactly one device, index 0)", index);
    memset(info, 0, sizeof *info);
    info->backend = FMSA_BACKEND_CPU;
    info->kind = FMSA_DEVICE_KIND_CPU;
    info->index = 0;
    if (!cpu_brand(info->name, sizeof info->name))
        cpu_copy_trimmed(info->name, sizeof info->name, "CPU");
    cpu_isa(info->arch, sizeof info->arch, &info->warp_size);
    info->sram_per_block = cpu_cache_size(1);
    info->sram_per_block_optin = cpu_cache_size(2);
    info->sram_per_multiprocessor = info->sram_per_block_optin;
    info->multiprocessors = fmsa_cpu_max_threads();
    info->registers_per_block = 0; /* not meaningful on a CPU */
#if defined(FMSA_CPU_HAVE_SYSCONF) && defined(_SC_PHYS_PAGES) && defined(_SC_PAGESIZE)
    {
        long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
        if (pages > 0 && page > 0) info->global_memory = (size_t)pages * (size_t)page;
    }
#endif /* sysconf memory queries */
    return FMSA_SUCCESS;
}
