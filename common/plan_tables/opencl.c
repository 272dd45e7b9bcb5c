/*
 * OpenCL, two kernel families, two tables.
 *
 * "opencl": the generic (GPU-shaped) kernels on any OpenCL 1.2 device, built
 * at run time with the tiles and the exact head dim as -D options (D is not
 * padded).  warps = (rows a work-group owns: Br forward, Bc backward) / 32
 * rounded up; Br and Bc are multiples of 8; each bucket lists the 48 KiB
 * class first, then 32 KiB and 16 KiB.  The planner costs rows in the input
 * dtype with the GPU formula; fmsa_ocl_config_make (backends/opencl/
 * ocl_config.c) checks each kernel against its real __local footprint and
 * halves a tile that does not fit.  Backward rows are KV-stationary (dK/dV
 * keeps Bc keys and streams Br query rows; dQ takes the pair the other way
 * round) and per dtype class, sized so both backward kernels run the planned
 * pair without halving on 48 KiB (NVIDIA), except the d64 16-bit row; the
 * comments give the real bytes.  history: bench/RESULTS.md (H200 sweeps).
 */
#include "common/plan_tables/plan_tables.h"

static const fmsa_tile_row fmsa_rows_opencl[] = {
/*   name                        pass maxD dtypes not_with  Br   Bc st  w  sram run  KiB f16 / f32 */
    {"opencl-fwd-d64-128x64",    FWD,  64, ANY,   0,       128,  64, 1, 4, Q, RUN, 0, 0},  /* 32 / 64 */
    {"opencl-fwd-d64-64x64",     FWD,  64, ANY,   0,        64,  64, 1, 2, Q, RUN, 0, 0},  /* 24 / 48 */
    {"opencl-fwd-d64-32x32",     FWD,  64, ANY,   0,        32,  32, 1, 1, Q, RUN, 0, 0},  /* 12 / 24 */
    {"opencl-fwd-d64-16x16",     FWD,  64, ANY,   0,        16,  16, 1, 1, Q, RUN, 0, 0},  /*  6 / 12 */
    {"opencl-fwd-d128-64x64",    FWD, 128, ANY,   0,        64,  64, 1, 2, Q, RUN, 0, 0},  /* 48 / 96 */
    {"opencl-fwd-d128-64x32",    FWD, 128, ANY,   0,        64,  32, 1, 2, Q, RUN, 0, 0},  /* 32 / 64 */
    {"opencl-fwd-d128-32x32",    FWD, 128, ANY,   0,        32,  32, 1, 1, Q, RUN, 0, 0},  /* 24 / 48 */
    {"opencl-fwd-d128-16x16",    FWD, 128, ANY,   0,        16,  16, 1, 1, Q, RUN, 0, 0},  /* 12 / 24 */
    {"opencl-fwd-d256-32x32",    FWD, 256, ANY,   0,        32,  32, 1, 1, Q, RUN, 0, 0},  /* 48 / 96 */
    {"opencl-fwd-d256-16x32",    FWD, 256, ANY,   0,        16,  32, 1, 1, Q, RUN, 0, 0},  /* 40 / 80 */
    {"opencl-fwd-d256-16x16",    FWD, 256, ANY,   0,        16,  16, 1, 1, Q, RUN, 0, 0},  /* 24 / 48 */
    {"opencl-fwd-d256-8x8",      FWD, 256, ANY,   0,         8,   8, 1, 1, Q, RUN, 0, 0},  /* 12 / 24: 16 KiB devices */
    /* backward, planner KiB (f16 / f32); real KiB on 48 KiB: dK/dV + dQ */
    {"opencl-bwd-d64-64x64",     BWD,  64, H16,   0,        64,  64, 1, 2, Q, RUN, 0, 0},  /* 32: halved, 64x32 k 43.5 + 32x32 38.5 */
    {"opencl-bwd-d64-32x32",     BWD,  64, ANY,   0,        32,  32, 1, 1, Q, RUN, 0, 0},  /* 16 / 32: QDO2 43.0 + 38.5 */
    {"opencl-bwd-d64-16x16",     BWD,  64, ANY,   0,        16,  16, 1, 1, Q, RUN, 0, 0},  /*  8 / 16: QDO2 19.5 + 18.3 */
    {"opencl-bwd-d128-32x32",    BWD, 128, H16,   0,        32,  32, 1, 1, Q, RUN, 0, 0},  /* 32: k 42.0 + 32x32 k KV1 45.8 */
    {"opencl-bwd-f32-d128-16x32",BWD, 128, F32,   0,        16,  32, 1, 1, Q, RUN, 0, 0},  /* 48: 45.8 + 32x16 KV1 43.8 */
    {"opencl-bwd-d128-16x16",    BWD, 128, ANY,   0,        16,  16, 1, 1, Q, RUN, 0, 0},  /* 16 / 32: QDO2 35.5 + 34.3 */
    {"opencl-bwd-d256-16x32",    BWD, 256, ANY,   0,        16,  32, 1, 1, Q, RUN, 0, 0},  /* 48 / 96 */
    {"opencl-bwd-d256-16x16",    BWD, 256, ANY,   0,        16,  16, 1, 1, Q, RUN, 0, 0},  /* 32 / 64 */
    {"opencl-bwd-d256-8x8",      BWD, 256, ANY,   0,         8,   8, 1, 1, Q, RUN, 0, 0},  /* 16 / 32: 16 KiB devices */
};

/* JIT per problem: D exactly */
const fmsa_arch_table fmsa_plan_table_opencl = {
    FMSA_BACKEND_OPENCL, "opencl", FMSA_SRAM_MODEL_GPU, 0, 0, fmsa_rows_opencl,
    FMSA_PLAN_COUNT(fmsa_rows_opencl)};

/*
 * "opencl-cpu": the CPU-device kernels (backends/opencl/ocl_cpu.c), which
 * fmsa_ocl_config_make plans against this key on CPU devices.  A work-item
 * owns 16 rows (two float8 lanes per head-dim element) and streams the other
 * side 32 rows per step, in private memory only (no __local, no barriers), so
 * rows cost no local memory.  Forward: 16 query rows, 32 keys per step;
 * backward KV-stationary as above: dK/dV keeps Bc = 16 keys and streams Br =
 * 32 query rows, dQ keeps 16 query rows and streams 32 keys.
 */
static const fmsa_tile_row fmsa_rows_opencl_cpu[] = {
/*   name                        pass maxD dtypes not_with  Br   Bc st  w  sram run */
    {"opencl-cpu-fwd-d256-16x32",FWD, 256, ANY,   0,        16,  32, 1, 1, 0, RUN, 0, 0},
    {"opencl-cpu-bwd-d256-32x16",BWD, 256, ANY,   0,        32,  16, 1, 1, 0, RUN, 0, 0},
};

const fmsa_arch_table fmsa_plan_table_opencl_cpu = {
    FMSA_BACKEND_OPENCL, "opencl-cpu", FMSA_SRAM_MODEL_NONE, 0, 0, fmsa_rows_opencl_cpu,
    FMSA_PLAN_COUNT(fmsa_rows_opencl_cpu)};
