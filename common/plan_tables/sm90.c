/*
 * H100/H200, sm90a (CUDA): the wgmma kernels of CUDA part 2 do not exist
 * yet, so every row is UNRUN and nothing dispatches from this table (the
 * mma.sync kernels that run on sm_90 today pick from their instance lists,
 * backends/cuda/cuda_fwd_instances.h); shapes from FlashAttention-3
 * hopper/tile_size.h (../shared/notes/).  wgmma M = 64 per
 * consumer warpgroup: forward Br = 64 * consumer WGs, warps = 4 * (1 producer
 * + consumer WGs); the backward is KV-stationary, so there Bc = 64 * consumer
 * WGs.  Up to 227 KiB of shared memory, 2-stage TMA rings; P in registers
 * except d <= 64 non-causal; the backward stages dQ in fp32 smem.  No fp32
 * wgmma (only TF32): f32 runs an exact FMA path with one consumer WG.
 */
#include "common/plan_tables/plan_tables.h"

static const fmsa_tile_row fmsa_rows_sm90[] = {
/*   name                        pass maxD dtypes not_with      Br   Bc st  w  sram run          KiB */
    {"sm90-fwd-d64-192x192",     FWD,  64, H16,   CAUSAL,      192, 192, 2, 16, Q|P, UNRUN},   /* 192: FA3 hdim64 non-causal, P through smem */
    {"sm90-fwd-d64-192x128",     FWD,  64, H16,   0,           192, 128, 2, 16, Q, UNRUN},     /*  88: FA3 hdim64 causal/local (paper config) */
    {"sm90-fwd-d96-192x144",     FWD,  96, H16,   0,           192, 144, 2, 16, Q, UNRUN},     /* 144: FA3 hdim96 */
    {"sm90-fwd-d128-128x176",    FWD, 128, H16,   CAUSAL|PAGED,128, 176, 2, 12, Q, UNRUN},     /* 208: FA3 hdim128 non-causal */
    {"sm90-fwd-d128-128x128",    FWD, 128, H16,   0,           128, 128, 2, 12, Q, UNRUN},     /* 160: FA3 hdim128 causal (finer tile skipping) */
    {"sm90-fwd-d192-128x112",    FWD, 192, H16,   0,           128, 112, 2, 12, Q, UNRUN},     /* 216: FA3 hdim192 */
    {"sm90-fwd-d256-128x80",     FWD, 256, H16,   0,           128,  80, 2, 12, Q, UNRUN},     /* 224: FA3 hdim256, "hits the limit of smem" */
    {"sm90-fwd-d256-64x16",      FWD, 256, H16,   0,            64,  16, 1,  8, Q, UNRUN},     /*  48: last resort without opt-in */
    {"sm90-fwd-f32-d128-64x64",  FWD, 128, F32,   0,            64,  64, 2,  8, Q, UNRUN},     /* 160 */
    {"sm90-fwd-f32-d256-64x32",  FWD, 256, F32,   0,            64,  32, 2,  8, Q, UNRUN},     /* 192 */
    {"sm90-fwd-f32-d256-64x16",  FWD, 256, F32,   0,            64,  16, 1,  8, Q, UNRUN},     /*  96: last resort */
    {"sm90-bwd-d64-128x128",     BWD,  64, H16,   0,           128, 128, 2, 12, Q|P|DQ, UNRUN},/* 194: FA3 hdim64 */
    {"sm90-bwd-d128-64x128",     BWD, 128, H16,   0,            64, 128, 2, 12, Q|P|DQ, UNRUN},/* 193: FA3 hdim128 */
    {"sm90-bwd-d192-64x64",      BWD, 192, H16,   0,            64,  64, 2,  8, Q|P|DQ, UNRUN},/* 209 */
    {"sm90-bwd-d256-64x64",      BWD, 256, H16,   0,            64,  64, 1,  8, Q|P|DQ, UNRUN},/* 208.5: FA3 hdim256, 1 dO stage */
    {"sm90-bwd-d256-16x64",      BWD, 256, H16,   0,            16,  64, 1,  8, Q|P, UNRUN},   /*  84: last resort, dQ by global atomics */
    {"sm90-bwd-f32-d128-64x64",  BWD, 128, F32,   0,            64,  64, 1,  8, Q|P|DQ, UNRUN},/* 192.5 */
    {"sm90-bwd-f32-d256-32x64",  BWD, 256, F32,   0,            32,  64, 1,  8, Q|P, UNRUN},   /* 208.25 */
};

const fmsa_arch_table fmsa_plan_table_sm90 = {
    FMSA_BACKEND_CUDA, "sm90", FMSA_SRAM_MODEL_GPU, 1, 0, fmsa_rows_sm90,
    FMSA_PLAN_COUNT(fmsa_rows_sm90)};
