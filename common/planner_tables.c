/*
 * Per-architecture tile tables read by fmsa_plan_tiles() (planner.c).
 *
 * Each table lists rows in preference order; the planner walks them and
 * takes the first row that (a) is for the requested pass, (b) has
 * max_head_dim >= D, (c) serves the dtype, (d) is not excluded by one of the
 * request's features (not_with), and (e) whose SRAM estimate fits the
 * device's limit.  Within a head-dim bucket the fastest measured shape comes
 * first and smaller fallbacks follow, so a device with less SRAM than the
 * flagship part (an A100 without opt-in, a 32 KiB OpenCL device) still gets a
 * plan.  Rows of a larger bucket follow the smaller buckets and act as the
 * last resort for smaller head dims too.
 *
 * The SRAM formulas (planner.c, fmsa_plan_row_sram) in short, e = element
 * bytes, d = head dim (padded to max_head_dim where the table says so):
 *   GPU fwd: [Q] Br*d*e + stages*2*Bc*d*e + [P] Br*Bc*e
 *   GPU bwd: [Q] stages*2*Br*d*e (Q, dO) + [!KV_REGS] 2*Bc*d*e (K, V)
 *            + [P] (2*Br*Bc*e (P, dS) + stages*2*Br*4 (LSE, D)) + [DQ] Br*d*4
 *   CPU fwd: 4*(Br*d + 2*Bc*d + Br*Bc + Br*d + 2*Br)            (fp32 staging)
 *   CPU bwd: 4*(2*Br*d + 4*Bc*d + Br*d + 2*Br*Bc + 2*Br)
 *   CPU fwd, bf16 products: 2*(Br*d + 2*Bc*d + Br*Bc) + 4*(Br*Bc + Br*d + 2*Br)
 *   CPU bwd, bf16 products: 2*(2*Br*d + 2*Bc*d + 2*Br*Bc) + 4*(2*Br*Bc + 2*Bc*d + Br*d + 2*Br)
 * The KiB figures in the comments below are these formulas at the row's
 * max_head_dim and the row's dtype (16-bit unless the row is f32-only;
 * OpenCL rows give f16 / f32).
 *
 * Sources for the flagship shapes: FlashAttention-2 launch templates (sm80),
 * FlashAttention-3 hopper/tile_size.h (sm90), CK tile / HipKittens / the
 * MI300X design note (CDNA), see ../shared/notes/.  Tiles are data, never
 * code: a rejected alternative becomes a row or a benchmark case.
 */
#include "common/planner.h"

#define FWD FMSA_PASS_FORWARD
#define BWD FMSA_PASS_BACKWARD
#define ANY FMSA_PLAN_DTYPES_ANY
#define H16 FMSA_PLAN_DTYPES_16BIT
#define F32 FMSA_PLAN_DTYPES_F32
#define B16 FMSA_PLAN_DTYPES_BF16_MMA
#define Q FMSA_TILE_Q_SRAM
#define P FMSA_TILE_P_SRAM
#define DQ FMSA_TILE_DQ_SRAM
#define KVR FMSA_TILE_KV_REGS
#define CAUSAL FMSA_FEAT_CAUSAL
#define PAGED FMSA_FEAT_PAGED

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/*
 * A100, sm80: mma.sync m16n8k16, 16 query rows per warp in the forward, so
 * Br is a multiple of 16 * warps and Bc of 16 (the k of P.V).  Opt-in shared
 * memory is 163 KiB per block (48 KiB without opt-in).  FA2's forward keeps K
 * and V single-buffered (the next K loads while P.V runs), hence stages = 1;
 * its backward double-buffers the Q/dO stream.  f32 inputs take an exact
 * SIMT path (TF32 would break the accuracy rule), so those rows are smaller.
 */
static const fmsa_tile_row fmsa_rows_sm80[] = {
/*   name                        pass maxD dtypes not_with  Br   Bc st  w  sram     KiB */
    {"sm80-fwd-d64-128x128",     FWD,  64, H16,   0,       128, 128, 1, 4, Q},   /*  48: FA2 hdim64 choice */
    {"sm80-fwd-d96-128x64",      FWD,  96, H16,   0,       128,  64, 1, 4, Q},   /*  48: FA2 hdim96 on A100 */
    {"sm80-fwd-d128-128x64",     FWD, 128, H16,   0,       128,  64, 1, 4, Q},   /*  64: FA2 hdim128 on A100 */
    {"sm80-fwd-d128-64x64",      FWD, 128, H16,   0,        64,  64, 1, 4, Q},   /*  48: fits without opt-in */
    {"sm80-fwd-d192-128x64",     FWD, 192, H16,   0,       128,  64, 1, 8, Q},   /*  96: FA2 hdim192, 8 warps */
    {"sm80-fwd-d256-128x64",     FWD, 256, H16,   0,       128,  64, 1, 8, Q},   /* 128: FA2 hdim256 when smem >= 128 KiB */
    {"sm80-fwd-d256-64x64",      FWD, 256, H16,   0,        64,  64, 1, 4, Q},   /*  96: FA2 hdim256 otherwise (sm86/89: 99 KiB) */
    {"sm80-fwd-d256-64x16",      FWD, 256, H16,   0,        64,  16, 1, 4, Q},   /*  48: last resort, 48 KiB default limit */
    {"sm80-fwd-f32-d128-64x64",  FWD, 128, F32,   0,        64,  64, 1, 4, Q},   /*  96: SIMT fp32, same staging */
    {"sm80-fwd-f32-d256-64x32",  FWD, 256, F32,   0,        64,  32, 1, 4, Q},   /* 128 */
    {"sm80-fwd-f32-d256-16x16",  FWD, 256, F32,   0,        16,  16, 1, 1, Q},   /*  48: last resort without opt-in */
    {"sm80-bwd-d64-128x128",     BWD,  64, H16,   0,       128, 128, 2, 8, Q|P}, /* 162: FA2 hdim64 when smem >= 144 KiB */
    {"sm80-bwd-d128-64x128",     BWD, 128, H16,   0,        64, 128, 2, 8, Q|P}, /* 161: FA2 hdim128 on A100 */
    {"sm80-bwd-d128-64x64",      BWD, 128, H16,   0,        64,  64, 1, 4, Q|P}, /*  80.5: sm86/89 (99 KiB) */
    {"sm80-bwd-d256-64x64",      BWD, 256, H16,   0,        64,  64, 1, 8, Q|P}, /* 144.5: single-buffered Q/dO is what fits d=256 */
    {"sm80-bwd-d256-64x32",      BWD, 256, H16,   0,        64,  32, 1, 4, Q|P}, /* 104.5: sm86/89 */
    {"sm80-bwd-d256-16x16",      BWD, 256, H16,   0,        16,  16, 1, 1, Q|P}, /*  33: last resort, 48 KiB default limit */
    {"sm80-bwd-f32-d128-64x64",  BWD, 128, F32,   0,        64,  64, 1, 4, Q|P}, /* 160.5 */
    {"sm80-bwd-f32-d256-32x32",  BWD, 256, F32,   0,        32,  32, 1, 2, Q|P}, /* 136.25 */
    {"sm80-bwd-f32-d256-16x16",  BWD, 256, F32,   0,        16,  16, 1, 1, Q|P}, /*  66: last resort (needs opt-in) */
};

/*
 * H100/H200, sm90a: wgmma has M = 64 per consumer warpgroup, so the forward
 * Br = 64 * consumer WGs and warps = 4 * (1 producer WG + consumer WGs); the
 * backward is KV-stationary, so there Bc = 64 * consumer WGs.  Bc is a
 * multiple of 16 (k of P.V).  Up to 227 KiB of shared memory per block (228
 * fails to launch).  K/V stream through 2-stage TMA rings (FA3 kStages = 2).
 * FA3 keeps P in registers (RS wgmma) except for d <= 64 non-causal, where P
 * goes through smem to allow 192x192; the backward stages dQ in fp32 smem
 * for the TMA reduce-add.  No fp32 wgmma exists (only TF32), so f32 inputs
 * run an exact FMA path with one consumer WG.
 */
static const fmsa_tile_row fmsa_rows_sm90[] = {
/*   name                        pass maxD dtypes not_with      Br   Bc st  w  sram        KiB */
    {"sm90-fwd-d64-192x192",     FWD,  64, H16,   CAUSAL,      192, 192, 2, 16, Q|P},   /* 192: FA3 hdim64 non-causal, P through smem */
    {"sm90-fwd-d64-192x128",     FWD,  64, H16,   0,           192, 128, 2, 16, Q},     /*  88: FA3 hdim64 causal/local (paper config) */
    {"sm90-fwd-d96-192x144",     FWD,  96, H16,   0,           192, 144, 2, 16, Q},     /* 144: FA3 hdim96 */
    {"sm90-fwd-d128-128x176",    FWD, 128, H16,   CAUSAL|PAGED,128, 176, 2, 12, Q},     /* 208: FA3 hdim128 non-causal */
    {"sm90-fwd-d128-128x128",    FWD, 128, H16,   0,           128, 128, 2, 12, Q},     /* 160: FA3 hdim128 causal (finer tile skipping) */
    {"sm90-fwd-d192-128x112",    FWD, 192, H16,   0,           128, 112, 2, 12, Q},     /* 216: FA3 hdim192 */
    {"sm90-fwd-d256-128x80",     FWD, 256, H16,   0,           128,  80, 2, 12, Q},     /* 224: FA3 hdim256, "hits the limit of smem" */
    {"sm90-fwd-d256-64x16",      FWD, 256, H16,   0,            64,  16, 1,  8, Q},     /*  48: last resort without opt-in */
    {"sm90-fwd-f32-d128-64x64",  FWD, 128, F32,   0,            64,  64, 2,  8, Q},     /* 160 */
    {"sm90-fwd-f32-d256-64x32",  FWD, 256, F32,   0,            64,  32, 2,  8, Q},     /* 192 */
    {"sm90-fwd-f32-d256-64x16",  FWD, 256, F32,   0,            64,  16, 1,  8, Q},     /*  96: last resort */
    {"sm90-bwd-d64-128x128",     BWD,  64, H16,   0,           128, 128, 2, 12, Q|P|DQ},/* 194: FA3 hdim64 */
    {"sm90-bwd-d128-64x128",     BWD, 128, H16,   0,            64, 128, 2, 12, Q|P|DQ},/* 193: FA3 hdim128 */
    {"sm90-bwd-d192-64x64",      BWD, 192, H16,   0,            64,  64, 2,  8, Q|P|DQ},/* 209 */
    {"sm90-bwd-d256-64x64",      BWD, 256, H16,   0,            64,  64, 1,  8, Q|P|DQ},/* 208.5: FA3 hdim256, 1 dO stage */
    {"sm90-bwd-d256-16x64",      BWD, 256, H16,   0,            16,  64, 1,  8, Q|P},   /*  84: last resort, dQ by global atomics */
    {"sm90-bwd-f32-d128-64x64",  BWD, 128, F32,   0,            64,  64, 1,  8, Q|P|DQ},/* 192.5 */
    {"sm90-bwd-f32-d256-32x64",  BWD, 256, F32,   0,            32,  64, 1,  8, Q|P},   /* 208.25 */
};

/*
 * MI300X gfx942 and MI200 gfx90a (CDNA3 / CDNA2): 64 KiB LDS per CU, wave64,
 * MFMA 32x32x8 (waves owning 32 rows) and 16x16x16 (16 rows), both with the
 * same builtins on either chip.  Forward: S^T = K Q^T with Q kept in
 * registers, K/V in LDS, so Br = rows per wave * waves and Bc is a multiple
 * of 16.  Backward: KV-stationary, Bc = rows per wave * waves.  Double-
 * buffered 64x128 K and V fill the whole 64 KiB (one workgroup per CU), as
 * the MI300X note derives.  CDNA has fp32 MFMA (32x32x2 f32), so f32 runs on
 * the matrix cores at full precision, with half the tile of 16-bit.  gfx90a
 * lacks direct buffer->LDS loads (register-staged instead), which changes the
 * schedule but not the LDS budget, so both chips share these rows.
 */
static const fmsa_tile_row fmsa_rows_cdna[] = {
/*   name                        pass maxD dtypes not_with  Br   Bc st  w  sram       KiB */
    {"cdna-fwd-d64-256x64",      FWD,  64, H16,   0,       256,  64, 2, 8, 0},       /* 32: 8-wave ping-pong, 32 rows/wave */
    {"cdna-fwd-d128-256x64",     FWD, 128, H16,   0,       256,  64, 2, 8, 0},       /* 64: MI300X note §7 starting point */
    {"cdna-fwd-d128-128x64",     FWD, 128, H16,   0,       128,  64, 1, 4, 0},       /* 32: CK-like 4 waves, leaves LDS for 2 WGs/CU */
    {"cdna-fwd-d256-128x64",     FWD, 256, H16,   0,       128,  64, 1, 4, 0},       /* 64 */
    {"cdna-fwd-d256-128x32",     FWD, 256, H16,   0,       128,  32, 1, 4, 0},       /* 32: devices reporting < 64 KiB */
    {"cdna-fwd-f32-d128-128x32", FWD, 128, F32,   0,       128,  32, 1, 4, 0},       /* 32: MFMA f32 32x32x2 */
    {"cdna-fwd-f32-d256-128x32", FWD, 256, F32,   0,       128,  32, 1, 4, 0},       /* 64 */
    {"cdna-fwd-f32-d256-64x16",  FWD, 256, F32,   0,        64,  16, 1, 4, 0},       /* 32: 16x16 MFMA, 16 rows/wave */
    {"cdna-bwd-d64-32x128",      BWD,  64, H16,   0,        32, 128, 1, 4, Q|P},     /* 56.25: K/V in LDS, 32 kv rows/wave */
    {"cdna-bwd-d128-16x128",     BWD, 128, H16,   0,        16, 128, 2, 4, Q|P|KVR}, /* 24.25: CK hdim128 bwd (bm0=16, bn0=128) */
    {"cdna-bwd-d256-16x64",      BWD, 256, H16,   0,        16,  64, 2, 4, Q|P|KVR}, /* 36.25: 16 kv rows/wave, 16x16x16 */
    {"cdna-bwd-f32-d256-16x64",  BWD, 256, F32,   0,        16,  64, 1, 4, Q|P|KVR}, /* 40.125 */
};

/*
 * Generic OpenCL 1.2: local memory as the device reports it (16 KiB on old
 * or embedded parts, 32 KiB on many integrated GPUs, 48 KiB on NVIDIA, 64 KiB
 * on AMD, megabytes emulated on PoCL).  Kernels are built at run time with
 * the tile sizes and the exact head dim as -D options, so D is not padded.
 * warps = (rows a work-group owns: Br forward, Bc backward) / 32 rounded up;
 * Br and Bc are multiples of 8.  Each bucket lists the 48 KiB-class shape
 * first, then the 32 KiB and 16 KiB classes.
 *
 * The planner costs rows with the generic GPU formula in the input dtype
 * (planner.c); the kernels stage Q/dO in fp32 and K/V in fp32 or as raw
 * 16-bit values (16-bit dtypes only), with padded rows, and their exact
 * footprint is fmsa_ocl_local_bytes (backends/opencl/ocl_config.c, README
 * there).  fmsa_ocl_config_make checks every kernel against that formula
 * and halves a tile that does not fit.  The backward rows are therefore per
 * dtype class, sized so that on the 48 KiB target (NVIDIA) both backward
 * kernels run the planned pair without halving, except the d64 16-bit row
 * (kept as measured before: dK/dV halves to 64x32, dQ to 32x32); the
 * comments give the real bytes.
 * Backward rows are KV-stationary: the dK/dV kernel keeps Bc keys and
 * streams Br query rows; the dQ kernel takes the pair the other way round
 * (keeps Bc query rows, streams Br keys).  On 48 KiB at d=128 the fp32 row
 * is 16x32 (dK/dV 16x32 fp32, one Q/dO tile: 45.8 KiB; dQ 32x16 with one K/V
 * tile, KV1: 43.8 KiB) and the 16-bit row 32x32 (dK/dV K/V 16-bit: 42.0
 * KiB; dQ K/V 16-bit, KV1: 45.8 KiB), the fastest pairs of the H200 sweep
 * (bench/RESULTS.md).  The forward rows are costed in the input dtype as
 * before (the kernel halves the tile where needed).
 */
static const fmsa_tile_row fmsa_rows_opencl[] = {
/*   name                        pass maxD dtypes not_with  Br   Bc st  w  sram  KiB f16 / f32 */
    {"opencl-fwd-d64-128x64",    FWD,  64, ANY,   0,       128,  64, 1, 4, Q},  /* 32 / 64 */
    {"opencl-fwd-d64-64x64",     FWD,  64, ANY,   0,        64,  64, 1, 2, Q},  /* 24 / 48 */
    {"opencl-fwd-d64-32x32",     FWD,  64, ANY,   0,        32,  32, 1, 1, Q},  /* 12 / 24 */
    {"opencl-fwd-d64-16x16",     FWD,  64, ANY,   0,        16,  16, 1, 1, Q},  /*  6 / 12 */
    {"opencl-fwd-d128-64x64",    FWD, 128, ANY,   0,        64,  64, 1, 2, Q},  /* 48 / 96 */
    {"opencl-fwd-d128-64x32",    FWD, 128, ANY,   0,        64,  32, 1, 2, Q},  /* 32 / 64 */
    {"opencl-fwd-d128-32x32",    FWD, 128, ANY,   0,        32,  32, 1, 1, Q},  /* 24 / 48 */
    {"opencl-fwd-d128-16x16",    FWD, 128, ANY,   0,        16,  16, 1, 1, Q},  /* 12 / 24 */
    {"opencl-fwd-d256-32x32",    FWD, 256, ANY,   0,        32,  32, 1, 1, Q},  /* 48 / 96 */
    {"opencl-fwd-d256-16x32",    FWD, 256, ANY,   0,        16,  32, 1, 1, Q},  /* 40 / 80 */
    {"opencl-fwd-d256-16x16",    FWD, 256, ANY,   0,        16,  16, 1, 1, Q},  /* 24 / 48 */
    {"opencl-fwd-d256-8x8",      FWD, 256, ANY,   0,         8,   8, 1, 1, Q},  /* 12 / 24: 16 KiB devices */
    /* backward, planner KiB (f16 / f32); real KiB on 48 KiB: dK/dV + dQ */
    {"opencl-bwd-d64-64x64",     BWD,  64, H16,   0,        64,  64, 1, 2, Q},  /* 32: halved, 64x32 k 43.5 + 32x32 38.5 */
    {"opencl-bwd-d64-32x32",     BWD,  64, ANY,   0,        32,  32, 1, 1, Q},  /* 16 / 32: QDO2 43.0 + 38.5 */
    {"opencl-bwd-d64-16x16",     BWD,  64, ANY,   0,        16,  16, 1, 1, Q},  /*  8 / 16: QDO2 19.5 + 18.3 */
    {"opencl-bwd-d128-32x32",    BWD, 128, H16,   0,        32,  32, 1, 1, Q},  /* 32: k 42.0 + 32x32 k KV1 45.8 */
    {"opencl-bwd-f32-d128-16x32",BWD, 128, F32,   0,        16,  32, 1, 1, Q},  /* 48: 45.8 + 32x16 KV1 43.8 */
    {"opencl-bwd-d128-16x16",    BWD, 128, ANY,   0,        16,  16, 1, 1, Q},  /* 16 / 32: QDO2 35.5 + 34.3 */
    {"opencl-bwd-d256-16x32",    BWD, 256, ANY,   0,        16,  32, 1, 1, Q},  /* 48 / 96 */
    {"opencl-bwd-d256-16x16",    BWD, 256, ANY,   0,        16,  16, 1, 1, Q},  /* 32 / 64 */
    {"opencl-bwd-d256-8x8",      BWD, 256, ANY,   0,         8,   8, 1, 1, Q},  /* 16 / 32: 16 KiB devices */
};

/*
 * CPU (every ISA): a thread computes one Br x D block of O while streaming
 * K/V tiles, staging everything in fp32 (the kernels convert f16/bf16 on
 * load), so the dtype does not change the working set -- except on the
 * bf16-product rows (dtypes B16, only for bf16 requests whose backend has
 * the instructions), which keep Q/K/V/P in bf16 and are costed so, and whose
 * K tile counts 2 bytes per element against L1.  The whole working
 * set should stay in L2 (sram_per_block_optin) and the micro-kernel's B
 * sliver (32 columns of a K or V tile, re-read for every 8 query rows) in
 * L1 (sram_per_block): the planner prefers the first row meeting both,
 * else the first meeting L2 (planner.c).  Tile sizes follow the caches, not
 * the ISA, so one table serves every CPU arch; the ISA only sets the
 * granularity (the fp32 SIMD width, which the planner rounds Br and Bc up
 * to).  KiB figures: working set / B sliver.
 */
static const fmsa_tile_row fmsa_rows_cpu[] = {
/*   name                        pass maxD dtypes not_with  Br   Bc st  w  sram  KiB */
    /* bf16 on bf16 products (request caps FMSA_PLAN_CAP_BF16_MMA: AMX,
     * AVX512-BF16): K/V panels, Q and P in bf16, S and acc in fp32.  The
     * instructions set the granularity: Br a multiple of 16 (the rows of an
     * AMX tile of C), Bc a multiple of 32 (the k of one tdpbf16ps in P.V).  Bc =
     * 128 gives P.V four k steps per load/store of the acc tiles; Br = 64
     * reuses each K/V tile for 4 row tiles of 16.  The tile loop alone
     * (bench/cpu_kernel_bench, K/V in L2) runs faster at 32x128 (S and acc
     * stay in L1), but in the whole pass, where K/V panels stream from L3,
     * 64x128 won on the device machine's Xeon (SPR, AMX, d = 128, 2 threads,
     * as speedup over torch in the same process: 1.24-1.33x against
     * 0.89-1.15x, bench/RESULTS.md 2026-11-29); 32x128 is the fallback for
     * a smaller L2.  Bc = 256 halves the per-row softmax overheads and the
     * acc tile loads/stores of P.V per key again: in one rotation with torch
     * on the same Xeon (2026-12-01) 64x256 ran 1.24 / 1.55x torch at d = 128
     * s = 2048 / 8192 where 64x128 ran 1.00-1.03 / 1.32-1.39x (16 threads:
     * 1.60 / 1.56x against 1.48-1.56 / 1.37-1.39x), and in a later rotation
     * against 64x128, 32x256 and 128x128 it was best or within 5% in 20 of
     * 24 shapes; on Zen 5's vdpbf16ps within +-5% of 64x128.  The causal
     * diagonal's extra waste is cut off at the last visible key
     * (cpu_forward_b16.c). */
    {"cpu-fwd-b16-d128-64x256",  FWD, 128, B16,   0,        64, 256, 1, 1, 0},  /* 289 / 64 */
    {"cpu-fwd-b16-d128-64x128",  FWD, 128, B16,   0,        64, 128, 1, 1, 0},  /* 160.5 / 32 */
    {"cpu-fwd-b16-d128-32x128",  FWD, 128, B16,   0,        32, 128, 1, 1, 0},  /* 112.25 / 32 */
    {"cpu-fwd-b16-d256-64x64",   FWD, 256, B16,   0,        64,  64, 1, 1, 0},  /* 184.5 / 32 */
    {"cpu-fwd-b16-d256-32x32",   FWD, 256, B16,   0,        32,  32, 1, 1, 0},  /*  86.25 / 16: last resort */
    /* backward on bf16 products: P and dS enter the dK/dV products as the B
     * panel with k = query rows (padded to 32 with zero rows).  64x128 ran
     * 1.08-1.22x the speed of 64x64 in 22 of 24 shapes on the Xeon (AMX),
     * 2 and 16 threads, d = 64 and 128, s = 512-8192, timed in one rotation
     * with torch (0.90x / 0.94x in the other two; bench/RESULTS.md
     * 2026-12-01); 64x64 stays as the fallback. */
    {"cpu-bwd-b16-d128-64x128",  BWD, 128, B16,   0,        64, 128, 1, 1, 0},
    {"cpu-bwd-b16-d128-64x64",   BWD, 128, B16,   0,        64,  64, 1, 1, 0},  /* 208.5 / 16 */
    {"cpu-bwd-b16-d256-32x64",   BWD, 256, B16,   0,        32,  64, 1, 1, 0},  /* 280.25 / 32 */
    {"cpu-bwd-b16-d256-32x32",   BWD, 256, B16,   0,        32,  32, 1, 1, 0},  /* 172.25 / 16: last resort */
    /* fp32 forward: 128x128 halves, against 64x64, both the K/V panel
     * traffic per product (each K/V tile serves 128 query rows) and the
     * softmax's fixed cost per row (128 keys per row step): 64x64 ran
     * 0.90-0.955x its speed on the device Xeon (d = 64 and 128, s = 2048 /
     * 8192, causal and not, 2 threads, 20 paired rounds each) and 128x128
     * 1.05-1.12x the speed of 64x64 on Zen 5 (d = 64 and 128, s = 512-8192;
     * bench/RESULTS.md 2026-12-01, fourth session).  The smaller rows serve
     * an L2 below 321 KiB. */
    {"cpu-fwd-d64-128x128",      FWD,  64, ANY,   0,       128, 128, 1, 1, 0},  /* 193 / 16 */
    {"cpu-fwd-d64-64x128",       FWD,  64, ANY,   0,        64, 128, 1, 1, 0},  /* 128.5 / 16 */
    {"cpu-fwd-d64-64x64",        FWD,  64, ANY,   0,        64,  64, 1, 1, 0},  /*  80.5 / 8 */
    {"cpu-fwd-d128-128x128",     FWD, 128, ANY,   0,       128, 128, 1, 1, 0},  /* 321 / 16 */
    {"cpu-fwd-d128-64x64",       FWD, 128, ANY,   0,        64,  64, 1, 1, 0},  /* 144.5 / 16 */
    {"cpu-fwd-d128-32x64",       FWD, 128, ANY,   0,        32,  64, 1, 1, 0},  /* 104.25 / 16 */
    {"cpu-fwd-d128-32x32",       FWD, 128, ANY,   0,        32,  32, 1, 1, 0},  /*  68.25 / 16 */
    /* d = 256: 64x64 ran 1.11x the speed of the 32x32 the former L1 test
     * chose on Zen 5 (2 threads, s = 2048, 3 rounds within 1%), 32x64 1.06x;
     * on the device Xeon 1.15x and 0.82x as medians of 5 rounds too spread
     * (0.66-1.26) to count as more than a hint (bench/RESULTS.md) */
    {"cpu-fwd-d256-64x64",       FWD, 256, ANY,   0,        64,  64, 1, 1, 0},  /* 272.5 / 32 */
    {"cpu-fwd-d256-32x64",       FWD, 256, ANY,   0,        32,  64, 1, 1, 0},  /* 200.25 / 32 */
    {"cpu-fwd-d256-32x32",       FWD, 256, ANY,   0,        32,  32, 1, 1, 0},  /* 132.25 / 32 */
    {"cpu-fwd-d256-16x16",       FWD, 256, ANY,   0,        16,  16, 1, 1, 0},  /*  65.125 / 32 */
    {"cpu-bwd-d64-64x64",        BWD,  64, ANY,   0,        64,  64, 1, 1, 0},  /* 144.5 / 8 */
    {"cpu-bwd-d64-32x32",        BWD,  64, ANY,   0,        32,  32, 1, 1, 0},  /*  64.25 / 8 */
    {"cpu-bwd-d128-32x64",       BWD, 128, ANY,   0,        32,  64, 1, 1, 0},  /* 192.25 / 16 */
    {"cpu-bwd-d128-32x32",       BWD, 128, ANY,   0,        32,  32, 1, 1, 0},  /* 120.25 / 16 */
    {"cpu-bwd-d128-16x16",       BWD, 128, ANY,   0,        16,  16, 1, 1, 0},  /*  58.125 / 16 */
    {"cpu-bwd-d256-16x32",       BWD, 256, ANY,   0,        16,  32, 1, 1, 0},  /* 180.125 / 32 */
    {"cpu-bwd-d256-16x16",       BWD, 256, ANY,   0,        16,  16, 1, 1, 0},  /* 114.125 / 32 */
};

/*
 * Arch keys.  The first entry of each backend is not special; the fallback
 * for an arch this list does not know is chosen in planner.c
 * (fmsa_plan_find_table): "cpu" for CPUs, "sm80" for CUDA, "gfx90a" for HIP,
 * "opencl" for OpenCL.
 */
static const fmsa_arch_table fmsa_arch_tables[] = {
/*   backend              arch          model                pad simd rows */
    {FMSA_BACKEND_CPU,    "x86-avx512", FMSA_SRAM_MODEL_CPU, 0, 16, fmsa_rows_cpu, COUNT(fmsa_rows_cpu)},    /* 16 fp32 lanes */
    {FMSA_BACKEND_CPU,    "x86-avx2",   FMSA_SRAM_MODEL_CPU, 0,  8, fmsa_rows_cpu, COUNT(fmsa_rows_cpu)},    /* 8 fp32 lanes */
    {FMSA_BACKEND_CPU,    "x86",        FMSA_SRAM_MODEL_CPU, 0,  4, fmsa_rows_cpu, COUNT(fmsa_rows_cpu)},    /* SSE2 baseline of x86-64 */
    {FMSA_BACKEND_CPU,    "aarch64",    FMSA_SRAM_MODEL_CPU, 0,  4, fmsa_rows_cpu, COUNT(fmsa_rows_cpu)},    /* NEON, 128-bit */
    {FMSA_BACKEND_CPU,    "cpu",        FMSA_SRAM_MODEL_CPU, 0,  1, fmsa_rows_cpu, COUNT(fmsa_rows_cpu)},    /* portable scalar C */
    {FMSA_BACKEND_CUDA,   "sm80",       FMSA_SRAM_MODEL_GPU, 1,  0, fmsa_rows_sm80, COUNT(fmsa_rows_sm80)},  /* kernels per head-dim bucket */
    {FMSA_BACKEND_CUDA,   "sm90",       FMSA_SRAM_MODEL_GPU, 1,  0, fmsa_rows_sm90, COUNT(fmsa_rows_sm90)},
    {FMSA_BACKEND_HIP,    "gfx942",     FMSA_SRAM_MODEL_GPU, 1,  0, fmsa_rows_cdna, COUNT(fmsa_rows_cdna)},
    {FMSA_BACKEND_HIP,    "gfx90a",     FMSA_SRAM_MODEL_GPU, 1,  0, fmsa_rows_cdna, COUNT(fmsa_rows_cdna)},
    {FMSA_BACKEND_OPENCL, "opencl",     FMSA_SRAM_MODEL_GPU, 0,  0, fmsa_rows_opencl, COUNT(fmsa_rows_opencl)}, /* JIT: exact D */
};

const fmsa_arch_table *fmsa_plan_arch_tables(int *count) {
    if (count) *count = COUNT(fmsa_arch_tables);
    return fmsa_arch_tables;
}
