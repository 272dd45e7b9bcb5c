/*
 * Device enumeration through the driver, done once per process, into the
 * common device model the planner reads.  The arch key is "sm<major><minor>"
 * ("sm80", "sm90"); architectures without a table of their own fall back to
 * "sm80" in the planner (mma.sync runs on every later arch).
 * FLASHMSA_CUDA_ARCH=<key> replaces the key, so the sm80 tables can be run on
 * a Hopper device; for a key whose opt-in shared memory per block is known
 * and smaller than the device's, it caps that too (sm80: 163 KB), so the
 * instance picks are the ones that device would get (the SASS that runs is
 * still the device's own).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cuda_internal.h"

#define FMSA_CUDA_MAX_DEVICES 64

static fmsa_cuda_device fmsa_cuda_dev_list[FMSA_CUDA_MAX_DEVICES];
static int fmsa_cuda_dev_count;
static pthread_once_t fmsa_cuda_dev_once = PTHREAD_ONCE_INIT;

static int fmsa_cuda_attr(const fmsa_cuda_api *cu, fmsa_cu_device d, int attr) {
    int v = 0;
    return cu->cuDeviceGetAttribute(&v, attr, d) == FMSA_CU_SUCCESS ? v : 0;
}

/* Opt-in shared memory per block of the keys FLASHMSA_CUDA_ARCH may name
 * (CUDA programming guide, compute capabilities table); 0 = leave as queried. */
static size_t fmsa_cuda_arch_smem_optin(const char *key) {
    if (!strcmp(key, "sm80") || !strcmp(key, "sm87")) return 166912; /* 163 KB */
    if (!strcmp(key, "sm86") || !strcmp(key, "sm89")) return 101376; /* 99 KB */
    return 0;
}

static void fmsa_cuda_add_device(const fmsa_cuda_api *cu, int ordinal) {
    fmsa_cuda_device *d;
    fmsa_cu_device h;
    size_t mem = 0;
    const char *arch_env = getenv("FLASHMSA_CUDA_ARCH");
    if (fmsa_cuda_dev_count >= FMSA_CUDA_MAX_DEVICES) return;
    if (cu->cuDeviceGet(&h, ordinal) != FMSA_CU_SUCCESS) return;
    d = &fmsa_cuda_dev_list[fmsa_cuda_dev_count];
    memset(d, 0, sizeof *d);
    d->handle = h;
    d->cc_major = fmsa_cuda_attr(cu, h, FMSA_CU_ATTR_CC_MAJOR);
    d->cc_minor = fmsa_cuda_attr(cu, h, FMSA_CU_ATTR_CC_MINOR);
    /* The kernels are mma.sync (sm_80+) code: older devices are not listed
     * rather than listed and failing every call. */
    if (d->cc_major < 8) return;
    d->max_threads_per_block = fmsa_cuda_attr(cu, h, FMSA_CU_ATTR_MAX_THREADS_PER_BLOCK);
    if (cu->cuDeviceGetName(d->info.name, (int)sizeof d->info.name - 1, h) != FMSA_CU_SUCCESS)
        snprintf(d->info.name, sizeof d->info.name, "CUDA device %d", ordinal);
    cu->cuDeviceTotalMem(&mem, h);
    d->info.backend = FMSA_BACKEND_CUDA;
    d->info.kind = FMSA_DEVICE_KIND_GPU;
    d->info.index = fmsa_cuda_dev_count;
    if (arch_env && *arch_env)
        snprintf(d->info.arch, sizeof d->info.arch, "%.31s", arch_env);
    else
        snprintf(d->info.arch, sizeof d->info.arch, "sm%d%d", d->cc_major, d->cc_minor);
    d->info.sram_per_block = (size_t)fmsa_cuda_attr(cu, h, FMSA_CU_ATTR_SMEM_PER_BLOCK);
    d->info.sram_per_block_optin = (size_t)fmsa_cuda_attr(cu, h, FMSA_CU_ATTR_SMEM_PER_BLOCK_OPTIN);
    if (arch_env && *arch_env) {
        const size_t cap = fmsa_cuda_arch_smem_optin(arch_env);
        if (cap && cap < d->info.sram_per_block_optin) d->info.sram_per_block_optin = cap;
    }
    d->info.sram_per_multiprocessor = (size_t)fmsa_cuda_attr(cu, h, FMSA_CU_ATTR_SMEM_PER_SM);
    d->info.multiprocessors = fmsa_cuda_attr(cu, h, FMSA_CU_ATTR_MULTIPROCESSORS);
    d->info.warp_size = fmsa_cuda_attr(cu, h, FMSA_CU_ATTR_WARP_SIZE);
    d->info.registers_per_block = fmsa_cuda_attr(cu, h, FMSA_CU_ATTR_REGS_PER_BLOCK);
    d->l2_bytes = (size_t)fmsa_cuda_attr(cu, h, FMSA_CU_ATTR_L2_CACHE_SIZE);
    d->info.global_memory = mem;
    {
        /* wgmma needs sm_90a SASS and compute capability 9.0 exactly (the
         * arch-specific target runs nowhere else); FLASHMSA_CUDA_ARCH (another
         * table's kernels) and FLASHMSA_CUDA_WGMMA=0 (the A/B of the
         * mma.sync kernels) turn it off */
        const char *wg_env = getenv("FLASHMSA_CUDA_WGMMA");
        d->wgmma = fmsa_cuda_fatbin_sm90a && d->cc_major == 9 && d->cc_minor == 0 &&
                   !(arch_env && *arch_env) && !(wg_env && !strcmp(wg_env, "0"));
        /* o<N>: a development variant (cuda_bwd_instances.h), 2 + N */
        if (d->wgmma && wg_env && wg_env[0] == 'o') d->wgmma = 2 + atoi(wg_env + 1);
        /* the Hopper forward has not yet run on the hardware: only where asked
         * (1: its overlapped schedule, 2: the serial one; cuda_fwd_instances.h) */
        {
            const char *fwd_env = getenv("FLASHMSA_CUDA_WGMMA_FWD");
            const int want = fwd_env ? atoi(fwd_env) : 0;
            d->wgmma_fwd = d->wgmma && (want == 1 || want == 2) ? want : 0;
        }
    }
    ++fmsa_cuda_dev_count;
}

static void fmsa_cuda_enumerate_once(void) {
    const fmsa_cuda_api *cu = fmsa_cuda_load();
    int n = 0;
    if (!cu || cu->cuDeviceGetCount(&n) != FMSA_CU_SUCCESS) return;
    for (int i = 0; i < n; ++i) fmsa_cuda_add_device(cu, i);
}

const fmsa_cuda_device *fmsa_cuda_devices(int *count) {
    pthread_once(&fmsa_cuda_dev_once, fmsa_cuda_enumerate_once);
    *count = fmsa_cuda_dev_count;
    return fmsa_cuda_dev_list;
}
