/*
 * CUDA, sm80 and sm90 (and, by the planner's fallback, every later arch):
 * the rows of the mma.sync kernels the CUDA backend compiles, one row per
 * compiled kernel shape.  The planner chooses the row; the backend runs the
 * instance of that row (backends/cuda/cuda_fwd_pick.c, cuda_bwd_pick.c) and
 * the host test test_cuda_plan_rows keeps rows and instances one to one (same
 * shape, same shared memory), so a row cannot promise an uncompiled kernel.
 *
 * The order is the backend's preference: within a pass and dtype class the
 * smallest D + D_v that covers the problem and fits the device's opt-in
 * shared memory, the earlier row on a tie (the 2-stage rows for sm_90's
 * 227 KiB, then the 1-stage / 64-row ones that sm_80's 163 KiB holds).  The
 * forward's FAST rows (no softcap, ALiBi, bit mask or paged KV) come before
 * every FULL row, so a problem without those features never takes a FULL
 * kernel while a FAST one fits.  sram_bytes is the kernel's own dynamic
 * shared memory (its padded rows and extras), not the GPU model's estimate.
 * Warps: the forward splits block_m rows over them (16 or 32 rows a warp; two
 * warps share rows above 256), the backward always runs 8.  W16 rows are
 * Hopper's wgmma kernels: only requests whose backend passes
 * FMSA_PLAN_CAP_WGMMA take them (CUDA: sm_90a SASS on compute capability 9.0,
 * and the pass within what the kernel serves beyond these feature bits,
 * cuda_bwd_instances.h, cuda_fwd_instances.h), so they sit ahead of the
 * mma.sync rows of their head dim; the sm80 key never gets the capability.
 * The forward's W16 rows are UNRUN: their kernel has run on the host
 * emulation only, and the backend asks for them only under FLASHMSA_CUDA_WGMMA_FWD.
 */
#include "common/plan_tables/plan_tables.h"

#define FAST (FMSA_FEAT_SOFTCAP | FMSA_FEAT_ALIBI | FMSA_FEAT_MASK | FMSA_FEAT_PAGED)
#define SAME FMSA_PLAN_DV_SAME
/* what the wgmma forward does not serve of the planner's features */
#define WGF (FAST | FMSA_FEAT_VARLEN)
/* what the wgmma backward does not serve of the planner's features */
#define WGX (FMSA_FEAT_SOFTCAP | FMSA_FEAT_ALIBI | FMSA_FEAT_MASK | FMSA_FEAT_VARLEN | FMSA_FEAT_PAGED)

static const fmsa_tile_row fmsa_rows_cuda_mma[] = {
/*   name                                   pass maxD dt   not_with Br   Bc st w sram run  maxDv  bytes */
    {"cuda-fwd-d64-fast-128x128-p2",        FWD,  64, H16, FAST, 128, 128, 2, 4, 0, RUN,   64,  82048},
    {"cuda-fwd-d96-fast-128x32-p2",         FWD,  96, H16, FAST, 128,  32, 2, 4, 0, RUN,   96,  65792},
    {"cuda-fwd-d128-wgmma-128x128-p2",      FWD, 128, W16, WGF , 128, 128, 2, 8, 0, UNRUN, 128, 164864},
    {"cuda-fwd-d128-fast-128x64-p2",        FWD, 128, H16, FAST, 128,  64, 2, 4, 0, RUN,  128,  98560},
    {"cuda-fwd-d192-v128-fast-128x64-p2",   FWD, 192, H16, FAST, 128,  64, 2, 8, 0, RUN,  128, 131328},
    {"cuda-fwd-d192-fast-128x64-p2",        FWD, 192, H16, FAST, 128,  64, 2, 8, 0, RUN,  192, 147840},
    {"cuda-fwd-d256-wgmma-128x64-p2",       FWD, 256, W16, WGF , 128,  64, 2, 8, 0, UNRUN, 256, 197632},
    {"cuda-fwd-d256-fast-64x64-p1",         FWD, 256, H16, FAST,  64,  64, 1, 4, 0, RUN,  256,  98816},
    {"cuda-fwd-d256-fast-64x64-p2",         FWD, 256, H16, FAST,  64,  64, 2, 4, 0, RUN,  256, 164352},
    {"cuda-fwd-d512-fast-64x32-p2",         FWD, 512, H16, FAST,  64,  32, 2, 8, 0, RUN,  512, 197632},
    {"cuda-fwd-d576-v512-fast-64x32-p2",    FWD, 576, H16, FAST,  64,  32, 2, 8, 0, RUN,  512, 214016},
    {"cuda-fwd-d576-fast-64x32-p2",         FWD, 576, H16, FAST,  64,  32, 2, 8, 0, RUN,  576, 222336},
    {"cuda-fwd-f32-d64-fast-64x64-p2",      FWD,  64, F32, FAST,  64,  64, 2, 4, 0, RUN,   64,  82176},
    {"cuda-fwd-f32-d128-fast-64x32-p2",     FWD, 128, F32, FAST,  64,  32, 2, 4, 0, RUN,  128,  98816},
    {"cuda-fwd-f32-d256-fast-64x16-p2",     FWD, 256, F32, FAST,  64,  16, 2, 4, 0, RUN,  256, 132096},
    {"cuda-fwd-d64-full-128x64-p2",         FWD,  64, H16, 0   , 128,  64, 2, 4, 0, RUN,   64,  49280},
    {"cuda-fwd-d96-full-128x32-p2",         FWD,  96, H16, 0   , 128,  32, 2, 4, 0, RUN,   96,  65792},
    {"cuda-fwd-d128-full-128x64-p2",        FWD, 128, H16, 0   , 128,  64, 2, 4, 0, RUN,  128,  98560},
    {"cuda-fwd-d192-v128-full-128x64-p2",   FWD, 192, H16, 0   , 128,  64, 2, 8, 0, RUN,  128, 131328},
    {"cuda-fwd-d192-full-128x64-p2",        FWD, 192, H16, 0   , 128,  64, 2, 8, 0, RUN,  192, 147840},
    {"cuda-fwd-d256-full-128x64-p2",        FWD, 256, H16, 0   , 128,  64, 2, 8, 0, RUN,  256, 197120},
    {"cuda-fwd-d256-full-64x64-p2",         FWD, 256, H16, 0   ,  64,  64, 2, 4, 0, RUN,  256, 164352},
    {"cuda-fwd-d512-full-64x32-p2",         FWD, 512, H16, 0   ,  64,  32, 2, 8, 0, RUN,  512, 197632},
    {"cuda-fwd-d576-v512-full-64x32-p2",    FWD, 576, H16, 0   ,  64,  32, 2, 8, 0, RUN,  512, 214016},
    {"cuda-fwd-d576-full-64x32-p2",         FWD, 576, H16, 0   ,  64,  32, 2, 8, 0, RUN,  576, 222336},
    {"cuda-fwd-f32-d64-full-64x64-p2",      FWD,  64, F32, 0   ,  64,  64, 2, 4, 0, RUN,   64,  82176},
    {"cuda-fwd-f32-d128-full-64x32-p2",     FWD, 128, F32, 0   ,  64,  32, 2, 4, 0, RUN,  128,  98816},
    {"cuda-fwd-f32-d256-full-64x16-p2",     FWD, 256, F32, 0   ,  64,  16, 2, 4, 0, RUN,  256, 132096},
    {"cuda-bwd-d64-wgmma-128x128-p2",       BWD,  64, W16, WGX , 128, 128, 2, 8, 0, RUN, SAME, 134144},
    {"cuda-bwd-d64-128x128-p2",             BWD,  64, H16, 0   , 128, 128, 2, 8, 0, RUN, SAME, 182400},
    {"cuda-bwd-d64-64x128-p2",              BWD,  64, H16, 0   ,  64, 128, 2, 8, 0, RUN, SAME, 111744},
    {"cuda-bwd-d96-64x128-p2",              BWD,  96, H16, 0   ,  64, 128, 2, 8, 0, RUN, SAME, 144512},
    {"cuda-bwd-d128-wgmma-64x128-p2",       BWD, 128, W16, WGX ,  64, 128, 2, 8, 0, RUN, SAME, 149504},
    {"cuda-bwd-d128-64x128-p2",             BWD, 128, H16, 0   ,  64, 128, 2, 8, 0, RUN, SAME, 177280},
    {"cuda-bwd-d128-64x128-p1",             BWD, 128, H16, 0   ,  64, 128, 1, 8, 0, RUN, SAME, 141952},
    {"cuda-bwd-d192-v128-64x64-p2",         BWD, 192, H16, 0   ,  64,  64, 2, 8, 0, RUN,  128, 148608},
    {"cuda-bwd-d64-v256-64x64-p2",          BWD,  64, H16, 0   ,  64,  64, 2, 8, 0, RUN,  256, 148608},
    {"cuda-bwd-d192-64x64-p2",              BWD, 192, H16, 0   ,  64,  64, 2, 8, 0, RUN, SAME, 173184},
    {"cuda-bwd-d192-64x64-p1",              BWD, 192, H16, 0   ,  64,  64, 1, 8, 0, RUN, SAME, 121472},
    {"cuda-bwd-d256-wgmma-64x64-p2",        BWD, 256, W16, WGX ,  64,  64, 2, 8, 0, RUN, SAME, 215040},
    {"cuda-bwd-d256-64x64-p2",              BWD, 256, H16, 0   ,  64,  64, 2, 8, 0, RUN, SAME, 222336},
    {"cuda-bwd-d256-64x64-p1",              BWD, 256, H16, 0   ,  64,  64, 1, 8, 0, RUN, SAME, 154240},
    {"cuda-bwd-d256-v256-64x64-p1",         BWD, 256, H16, 0   ,  64,  64, 1, 8, 0, RUN,  256, 154240},
    {"cuda-bwd-d512-v512-64x32-p1",         BWD, 512, H16, 0   ,  64,  32, 1, 8, 0, RUN,  512, 209536},
    {"cuda-bwd-d576-v512-64x32-p1",         BWD, 576, H16, 0   ,  64,  32, 1, 8, 0, RUN,  512, 221824},
    {"cuda-bwd-f32-d64-v64-64x64-p2",       BWD,  64, F32, 0   ,  64,  64, 2, 8, 0, RUN,   64, 140304},
    {"cuda-bwd-f32-d128-v128-32x64-p2",     BWD, 128, F32, 0   ,  32,  64, 2, 8, 0, RUN,  128, 154128},
    {"cuda-bwd-f32-d256-v256-32x32-p2",     BWD, 256, F32, 0   ,  32,  32, 2, 8, 0, RUN,  256, 209424},
    {"cuda-bwd-f32-d256-v256-32x32-p1",     BWD, 256, F32, 0   ,  32,  32, 1, 8, 0, RUN,  256, 142608},
};

/* kernels per head-dim bucket; the rows' sram_bytes make the model unused */
const fmsa_arch_table fmsa_plan_table_sm80 = {
    FMSA_BACKEND_CUDA, "sm80", FMSA_SRAM_MODEL_GPU, 1, 0, fmsa_rows_cuda_mma,
    FMSA_PLAN_COUNT(fmsa_rows_cuda_mma)};
const fmsa_arch_table fmsa_plan_table_sm90 = {
    FMSA_BACKEND_CUDA, "sm90", FMSA_SRAM_MODEL_GPU, 1, 0, fmsa_rows_cuda_mma,
    FMSA_PLAN_COUNT(fmsa_rows_cuda_mma)};
