/*
 * MI300X gfx942 and MI200 gfx90a (HIP, CDNA3 / CDNA2): no kernel yet, so
 * every row is UNRUN; shapes from CK tile, HipKittens and the MI300X design
 * note (../shared/notes/).  64 KiB LDS per CU, wave64, MFMA 32x32x8 (32 rows
 * per wave) and 16x16x16 (16 rows).  Forward: Q in registers, K/V in LDS, Br
 * = rows per wave * waves; backward KV-stationary, Bc = rows per wave *
 * waves.  fp32 MFMA exists, so f32 runs on the matrix cores at half the tile.
 * gfx90a stages loads through registers, which changes the schedule but not
 * the LDS budget, so both chips share these rows.
 */
#include "common/plan_tables/plan_tables.h"

static const fmsa_tile_row fmsa_rows_cdna[] = {
/*   name                        pass maxD dtypes not_with  Br   Bc st  w  sram run         KiB */
    {"cdna-fwd-d64-256x64",      FWD,  64, H16,   0,       256,  64, 2, 8, 0, UNRUN, 0, 0},       /* 32: 8-wave ping-pong, 32 rows/wave */
    {"cdna-fwd-d128-256x64",     FWD, 128, H16,   0,       256,  64, 2, 8, 0, UNRUN, 0, 0},       /* 64: MI300X note §7 starting point */
    {"cdna-fwd-d128-128x64",     FWD, 128, H16,   0,       128,  64, 1, 4, 0, UNRUN, 0, 0},       /* 32: CK-like 4 waves, leaves LDS for 2 WGs/CU */
    {"cdna-fwd-d256-128x64",     FWD, 256, H16,   0,       128,  64, 1, 4, 0, UNRUN, 0, 0},       /* 64 */
    {"cdna-fwd-d256-128x32",     FWD, 256, H16,   0,       128,  32, 1, 4, 0, UNRUN, 0, 0},       /* 32: devices reporting < 64 KiB */
    {"cdna-fwd-f32-d128-128x32", FWD, 128, F32,   0,       128,  32, 1, 4, 0, UNRUN, 0, 0},       /* 32: MFMA f32 32x32x2 */
    {"cdna-fwd-f32-d256-128x32", FWD, 256, F32,   0,       128,  32, 1, 4, 0, UNRUN, 0, 0},       /* 64 */
    {"cdna-fwd-f32-d256-64x16",  FWD, 256, F32,   0,        64,  16, 1, 4, 0, UNRUN, 0, 0},       /* 32: 16x16 MFMA, 16 rows/wave */
    {"cdna-bwd-d64-32x128",      BWD,  64, H16,   0,        32, 128, 1, 4, Q|P, UNRUN, 0, 0},     /* 56.25: K/V in LDS, 32 kv rows/wave */
    {"cdna-bwd-d128-16x128",     BWD, 128, H16,   0,        16, 128, 2, 4, Q|P|KVR, UNRUN, 0, 0}, /* 24.25: CK hdim128 bwd (bm0=16, bn0=128) */
    {"cdna-bwd-d256-16x64",      BWD, 256, H16,   0,        16,  64, 2, 4, Q|P|KVR, UNRUN, 0, 0}, /* 36.25: 16 kv rows/wave, 16x16x16 */
    {"cdna-bwd-f32-d256-16x64",  BWD, 256, F32,   0,        16,  64, 1, 4, Q|P|KVR, UNRUN, 0, 0}, /* 40.125 */
};

const fmsa_arch_table fmsa_plan_table_gfx942 = {
    FMSA_BACKEND_HIP, "gfx942", FMSA_SRAM_MODEL_GPU, 1, 0, fmsa_rows_cdna,
    FMSA_PLAN_COUNT(fmsa_rows_cdna)};
const fmsa_arch_table fmsa_plan_table_gfx90a = {
    FMSA_BACKEND_HIP, "gfx90a", FMSA_SRAM_MODEL_GPU, 1, 0, fmsa_rows_cdna,
    FMSA_PLAN_COUNT(fmsa_rows_cdna)};
