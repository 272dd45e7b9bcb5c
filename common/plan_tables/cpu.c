/*
 * CPU (every ISA).  A thread computes one Br x D block of O while streaming
 * K/V tiles staged in fp32, so the dtype does not change the working set,
 * except on the bf16-product rows (B16: bf16 requests whose backend has the
 * instructions), costed with bf16 Q/K/V/P.  The planner prefers the first row
 * whose working set fits L2 (sram_per_block_optin) and whose micro-kernel B
 * sliver (32 columns of a K or V tile) fits L1, else the first fitting L2
 * (planner.c).  Tiles follow the caches, not the ISA, so one row set serves
 * every CPU arch; the ISA only sets the granularity (the fp32 SIMD width Br
 * and Bc are rounded up to).  KiB: working set / B sliver.
 */
#include "common/plan_tables/plan_tables.h"

static const fmsa_tile_row fmsa_rows_cpu[] = {
/*   name                        pass maxD dtypes not_with  Br   Bc st  w  sram run  KiB */
    /* bf16 products (caps FMSA_PLAN_CAP_BF16_MMA: AMX, AVX512-BF16): Br a multiple of
     * 16 (rows of an AMX C tile), Bc of 32 (k of tdpbf16ps); 64x256 was best or within
     * 5% in the whole pass on the Xeon, 32x128 serves a smaller L2.  history: bench/RESULTS.md */
    {"cpu-fwd-b16-d128-64x256",  FWD, 128, B16,   0,        64, 256, 1, 1, 0, RUN, 0, 0},  /* 289 / 64 */
    {"cpu-fwd-b16-d128-64x128",  FWD, 128, B16,   0,        64, 128, 1, 1, 0, RUN, 0, 0},  /* 160.5 / 32 */
    {"cpu-fwd-b16-d128-32x128",  FWD, 128, B16,   0,        32, 128, 1, 1, 0, RUN, 0, 0},  /* 112.25 / 32 */
    {"cpu-fwd-b16-d256-64x64",   FWD, 256, B16,   0,        64,  64, 1, 1, 0, RUN, 0, 0},  /* 184.5 / 32 */
    {"cpu-fwd-b16-d256-32x32",   FWD, 256, B16,   0,        32,  32, 1, 1, 0, RUN, 0, 0},  /*  86.25 / 16: last resort */
    /* head dims to 576 (Gemma 4's 512, MLA's 576/512), costed at max(D, Dv); KiB at 512.
     * At d = 512 s = 4096 on Zen 4 (2 threads) 64x128 ran 1.05x 64x64 in the forward,
     * and the backward's 64x128 / 32x128 1.22x / 1.17x its 32x64.  history: bench/RESULTS.md */
    {"cpu-fwd-b16-d576-64x128",  FWD, 576, B16,   0,        64, 128, 1, 1, 0, RUN, 0, 0},  /* 496.5 / 32 */
    {"cpu-fwd-b16-d576-64x64",   FWD, 576, B16,   0,        64,  64, 1, 1, 0, RUN, 0, 0},  /* 344.5 / 32 */
    {"cpu-fwd-b16-d576-32x32",   FWD, 576, B16,   0,        32,  32, 1, 1, 0, RUN, 0, 0},  /* 166.25 / 16: last resort */
    /* backward on bf16 products: P and dS are the B panel of dK/dV with k = query
     * rows (padded to 32); 64x128 beat 64x64 on the Xeon.  history: bench/RESULTS.md */
    {"cpu-bwd-b16-d128-64x128",  BWD, 128, B16,   0,        64, 128, 1, 1, 0, RUN, 0, 0},  /* 352.5 / 16 */
    {"cpu-bwd-b16-d128-64x64",   BWD, 128, B16,   0,        64,  64, 1, 1, 0, RUN, 0, 0},  /* 208.5 / 16 */
    {"cpu-bwd-b16-d256-32x64",   BWD, 256, B16,   0,        32,  64, 1, 1, 0, RUN, 0, 0},  /* 280.25 / 32 */
    {"cpu-bwd-b16-d256-32x32",   BWD, 256, B16,   0,        32,  32, 1, 1, 0, RUN, 0, 0},  /* 172.25 / 16: last resort */
    {"cpu-bwd-b16-d576-64x128",  BWD, 576, B16,   0,        64, 128, 1, 1, 0, RUN, 0, 0},  /* 1120.5 / 16 */
    {"cpu-bwd-b16-d576-32x128",  BWD, 576, B16,   0,        32, 128, 1, 1, 0, RUN, 0, 0},  /* 944.25 / 16 */
    {"cpu-bwd-b16-d576-32x64",   BWD, 576, B16,   0,        32,  64, 1, 1, 0, RUN, 0, 0},  /* 536.25 / 32 */
    {"cpu-bwd-b16-d576-32x32",   BWD, 576, B16,   0,        32,  32, 1, 1, 0, RUN, 0, 0},  /* 332.25 / 16: last resort */
    /* fp32 forward: 128x128 halves the K/V panel traffic and the per-row softmax cost
     * of 64x64 (faster on the Xeon and Zen 5); the smaller rows serve an L2 below
     * 321 KiB.  history: bench/RESULTS.md */
    {"cpu-fwd-d64-128x128",      FWD,  64, ANY,   0,       128, 128, 1, 1, 0, RUN, 0, 0},  /* 193 / 16 */
    {"cpu-fwd-d64-64x128",       FWD,  64, ANY,   0,        64, 128, 1, 1, 0, RUN, 0, 0},  /* 128.5 / 16 */
    {"cpu-fwd-d64-64x64",        FWD,  64, ANY,   0,        64,  64, 1, 1, 0, RUN, 0, 0},  /*  80.5 / 8 */
    {"cpu-fwd-d128-128x128",     FWD, 128, ANY,   0,       128, 128, 1, 1, 0, RUN, 0, 0},  /* 321 / 16 */
    {"cpu-fwd-d128-64x64",       FWD, 128, ANY,   0,        64,  64, 1, 1, 0, RUN, 0, 0},  /* 144.5 / 16 */
    {"cpu-fwd-d128-32x64",       FWD, 128, ANY,   0,        32,  64, 1, 1, 0, RUN, 0, 0},  /* 104.25 / 16 */
    {"cpu-fwd-d128-32x32",       FWD, 128, ANY,   0,        32,  32, 1, 1, 0, RUN, 0, 0},  /*  68.25 / 16 */
    /* d = 256: 64x64 beat the 32x32 the former L1 rule chose (Zen 5; the Xeon's
     * rounds were too spread to decide).  history: bench/RESULTS.md */
    {"cpu-fwd-d256-64x64",       FWD, 256, ANY,   0,        64,  64, 1, 1, 0, RUN, 0, 0},  /* 272.5 / 32 */
    {"cpu-fwd-d256-32x64",       FWD, 256, ANY,   0,        32,  64, 1, 1, 0, RUN, 0, 0},  /* 200.25 / 32 */
    {"cpu-fwd-d256-32x32",       FWD, 256, ANY,   0,        32,  32, 1, 1, 0, RUN, 0, 0},  /* 132.25 / 32 */
    {"cpu-fwd-d256-16x16",       FWD, 256, ANY,   0,        16,  16, 1, 1, 0, RUN, 0, 0},  /*  65.125 / 32 */
    /* d <= 576 (costed at max(D, Dv)); KiB at 512.  At d = 512 on Zen 4 the forward's
     * 128x64 and 64x128 ran within 2% of 64x64; the backward's 64x64 / 32x64 ran
     * 1.13x / 1.09x its 32x32.  history: bench/RESULTS.md */
    {"cpu-fwd-d576-64x64",       FWD, 576, ANY,   0,        64,  64, 1, 1, 0, RUN, 0, 0},  /* 528.5 / 64 */
    {"cpu-fwd-d576-32x64",       FWD, 576, ANY,   0,        32,  64, 1, 1, 0, RUN, 0, 0},  /* 392.25 / 64 */
    {"cpu-fwd-d576-32x32",       FWD, 576, ANY,   0,        32,  32, 1, 1, 0, RUN, 0, 0},  /* 260.25 / 64 */
    {"cpu-fwd-d576-16x16",       FWD, 576, ANY,   0,        16,  16, 1, 1, 0, RUN, 0, 0},  /* 129.125 / 64 */
    {"cpu-bwd-d64-64x64",        BWD,  64, ANY,   0,        64,  64, 1, 1, 0, RUN, 0, 0},  /* 144.5 / 8 */
    {"cpu-bwd-d64-32x32",        BWD,  64, ANY,   0,        32,  32, 1, 1, 0, RUN, 0, 0},  /*  64.25 / 8 */
    {"cpu-bwd-d128-32x64",       BWD, 128, ANY,   0,        32,  64, 1, 1, 0, RUN, 0, 0},  /* 192.25 / 16 */
    {"cpu-bwd-d128-32x32",       BWD, 128, ANY,   0,        32,  32, 1, 1, 0, RUN, 0, 0},  /* 120.25 / 16 */
    {"cpu-bwd-d128-16x16",       BWD, 128, ANY,   0,        16,  16, 1, 1, 0, RUN, 0, 0},  /*  58.125 / 16 */
    {"cpu-bwd-d256-16x32",       BWD, 256, ANY,   0,        16,  32, 1, 1, 0, RUN, 0, 0},  /* 180.125 / 32 */
    {"cpu-bwd-d256-16x16",       BWD, 256, ANY,   0,        16,  16, 1, 1, 0, RUN, 0, 0},  /* 114.125 / 32 */
    {"cpu-bwd-d576-64x64",       BWD, 576, ANY,   0,        64,  64, 1, 1, 0, RUN, 0, 0},  /* 928.5 / 64 */
    {"cpu-bwd-d576-32x64",       BWD, 576, ANY,   0,        32,  64, 1, 1, 0, RUN, 0, 0},  /* 720.25 / 64 */
    {"cpu-bwd-d576-32x32",       BWD, 576, ANY,   0,        32,  32, 1, 1, 0, RUN, 0, 0},  /* 456.25 / 64 */
    {"cpu-bwd-d576-16x32",       BWD, 576, ANY,   0,        16,  32, 1, 1, 0, RUN, 0, 0},  /* 356.125 / 64 */
    {"cpu-bwd-d576-16x16",       BWD, 576, ANY,   0,        16,  16, 1, 1, 0, RUN, 0, 0},  /* 226.125 / 64 */
};

#define CPU_TABLE(var, key, lanes)                                                   \
    const fmsa_arch_table var = {FMSA_BACKEND_CPU, key, FMSA_SRAM_MODEL_CPU, 0, lanes, \
                                 fmsa_rows_cpu, FMSA_PLAN_COUNT(fmsa_rows_cpu)}
/*        table                       arch key      fp32 lanes */
CPU_TABLE(fmsa_plan_table_x86_avx512, "x86-avx512", 16); /* AVX-512 */
CPU_TABLE(fmsa_plan_table_x86_avx2,   "x86-avx2",    8); /* AVX2 */
CPU_TABLE(fmsa_plan_table_x86,        "x86",         4); /* SSE2 baseline of x86-64 */
CPU_TABLE(fmsa_plan_table_aarch64,    "aarch64",     4); /* NEON, 128-bit */
CPU_TABLE(fmsa_plan_table_cpu,        "cpu",         1); /* portable scalar C */
