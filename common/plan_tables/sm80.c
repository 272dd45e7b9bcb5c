/*
 * A100, sm80 (CUDA): every row is UNRUN and nothing dispatches from this
 * table: the CUDA backend's mma.sync kernels pick from their own instance
 * lists (backends/cuda/cuda_fwd_instances.h, cuda_bwd_instances.h), which
 * know D_v and the device's opt-in shared memory; these rows are the
 * FlashAttention-2 launch templates' shapes (../shared/notes/), kept as the
 * planner's model of the arch.  mma.sync m16n8k16:
 * 16 query rows per warp in the forward, so Br is a multiple of 16 * warps and
 * Bc of 16 (the k of P.V).  Opt-in shared memory 163 KiB (48 KiB without).
 * FA2's forward keeps K and V single-buffered (stages = 1), its backward
 * double-buffers Q/dO.  f32 inputs take an exact SIMT path (TF32 would break
 * the accuracy rule), hence smaller rows.
 */
#include "common/plan_tables/plan_tables.h"

static const fmsa_tile_row fmsa_rows_sm80[] = {
/*   name                        pass maxD dtypes not_with  Br   Bc st  w  sram run       KiB */
    {"sm80-fwd-d64-128x128",     FWD,  64, H16,   0,       128, 128, 1, 4, Q, UNRUN},   /*  48: FA2 hdim64 choice */
    {"sm80-fwd-d96-128x64",      FWD,  96, H16,   0,       128,  64, 1, 4, Q, UNRUN},   /*  48: FA2 hdim96 on A100 */
    {"sm80-fwd-d128-128x64",     FWD, 128, H16,   0,       128,  64, 1, 4, Q, UNRUN},   /*  64: FA2 hdim128 on A100 */
    {"sm80-fwd-d128-64x64",      FWD, 128, H16,   0,        64,  64, 1, 4, Q, UNRUN},   /*  48: fits without opt-in */
    {"sm80-fwd-d192-128x64",     FWD, 192, H16,   0,       128,  64, 1, 8, Q, UNRUN},   /*  96: FA2 hdim192, 8 warps */
    {"sm80-fwd-d256-128x64",     FWD, 256, H16,   0,       128,  64, 1, 8, Q, UNRUN},   /* 128: FA2 hdim256 when smem >= 128 KiB */
    {"sm80-fwd-d256-64x64",      FWD, 256, H16,   0,        64,  64, 1, 4, Q, UNRUN},   /*  96: FA2 hdim256 otherwise (sm86/89: 99 KiB) */
    {"sm80-fwd-d256-64x16",      FWD, 256, H16,   0,        64,  16, 1, 4, Q, UNRUN},   /*  48: last resort, 48 KiB default limit */
    {"sm80-fwd-f32-d128-64x64",  FWD, 128, F32,   0,        64,  64, 1, 4, Q, UNRUN},   /*  96: SIMT fp32, same staging */
    {"sm80-fwd-f32-d256-64x32",  FWD, 256, F32,   0,        64,  32, 1, 4, Q, UNRUN},   /* 128 */
    {"sm80-fwd-f32-d256-16x16",  FWD, 256, F32,   0,        16,  16, 1, 1, Q, UNRUN},   /*  48: last resort without opt-in */
    {"sm80-bwd-d64-128x128",     BWD,  64, H16,   0,       128, 128, 2, 8, Q|P, UNRUN}, /* 162: FA2 hdim64 when smem >= 144 KiB */
    {"sm80-bwd-d128-64x128",     BWD, 128, H16,   0,        64, 128, 2, 8, Q|P, UNRUN}, /* 161: FA2 hdim128 on A100 */
    {"sm80-bwd-d128-64x64",      BWD, 128, H16,   0,        64,  64, 1, 4, Q|P, UNRUN}, /*  80.5: sm86/89 (99 KiB) */
    {"sm80-bwd-d256-64x64",      BWD, 256, H16,   0,        64,  64, 1, 8, Q|P, UNRUN}, /* 144.5: single-buffered Q/dO is what fits d=256 */
    {"sm80-bwd-d256-64x32",      BWD, 256, H16,   0,        64,  32, 1, 4, Q|P, UNRUN}, /* 104.5: sm86/89 */
    {"sm80-bwd-d256-16x16",      BWD, 256, H16,   0,        16,  16, 1, 1, Q|P, UNRUN}, /*  33: last resort, 48 KiB default limit */
    {"sm80-bwd-f32-d128-64x64",  BWD, 128, F32,   0,        64,  64, 1, 4, Q|P, UNRUN}, /* 160.5 */
    {"sm80-bwd-f32-d256-32x32",  BWD, 256, F32,   0,        32,  32, 1, 2, Q|P, UNRUN}, /* 136.25 */
    {"sm80-bwd-f32-d256-16x16",  BWD, 256, F32,   0,        16,  16, 1, 1, Q|P, UNRUN}, /*  66: last resort (needs opt-in) */
};

/* kernels per head-dim bucket: D is costed as the row's max_head_dim */
const fmsa_arch_table fmsa_plan_table_sm80 = {
    FMSA_BACKEND_CUDA, "sm80", FMSA_SRAM_MODEL_GPU, 1, 0, fmsa_rows_sm80,
    FMSA_PLAN_COUNT(fmsa_rows_sm80)};
