/*
 * Private to the table files of common/plan_tables/, one per backend family
 * (BLIS keeps one config file per arch the same way): the column shorthands
 * the rows are written in and the arch tables each file defines, listed in
 * index.c.  They live in common/, not under backends/, because the planner
 * and its tests see every table in every build, whichever backends it has.
 *
 * The planner walks a table's rows in order and takes the first that is for
 * the pass, has max_head_dim >= D, serves the dtype, is not excluded by a
 * request feature (not_with) and fits the device's SRAM limit, so within a
 * head-dim bucket the fastest shape comes first and smaller fallbacks follow.
 * Columns: common/planner.h (fmsa_tile_row).  SRAM formulas, e = element
 * bytes, d = head dim (the bucket's max where the table pads):
 *   GPU fwd: [Q] Br*d*e + stages*2*Bc*d*e + [P] Br*Bc*e
 *   GPU bwd: [Q] stages*2*Br*d*e + [!KVR] 2*Bc*d*e + [P] (2*Br*Bc*e + stages*2*Br*4)
 *            + [DQ] Br*d*4
 *   CPU fwd: 4*(Br*d + 2*Bc*d + Br*Bc + Br*d + 2*Br)            (fp32 staging)
 *   CPU bwd: 4*(2*Br*d + 4*Bc*d + Br*d + 2*Br*Bc + 2*Br)
 *   CPU B16 fwd: 2*(Br*d + 2*Bc*d + Br*Bc) + 4*(Br*Bc + Br*d + 2*Br)
 *   CPU B16 bwd: 2*(2*Br*d + 2*Bc*d + 2*Br*Bc) + 4*(2*Br*Bc + 2*Bc*d + Br*d + 2*Br)
 * KiB figures in the row comments are these at the row's max_head_dim.
 * Tiles are data, never code: a rejected alternative becomes a row or a
 * benchmark case.
 */
#ifndef FMSA_PLAN_TABLES_H
#define FMSA_PLAN_TABLES_H

#include "common/planner.h"

#define FWD FMSA_PASS_FORWARD
#define BWD FMSA_PASS_BACKWARD
#define ANY FMSA_PLAN_DTYPES_ANY
#define H16 FMSA_PLAN_DTYPES_16BIT
#define F32 FMSA_PLAN_DTYPES_F32
#define B16 FMSA_PLAN_DTYPES_BF16_MMA
#define W16 FMSA_PLAN_DTYPES_16BIT_WGMMA
#define Q FMSA_TILE_Q_SRAM
#define P FMSA_TILE_P_SRAM
#define DQ FMSA_TILE_DQ_SRAM
#define KVR FMSA_TILE_KV_REGS
#define CAUSAL FMSA_FEAT_CAUSAL
#define PAGED FMSA_FEAT_PAGED
/* the run column (fmsa_tile_row.verified) */
#define RUN 1   /* a kernel of this tree runs the row and passes the fp64 grids on it */
#define UNRUN 0 /* no kernel has passed the grids on the row's hardware: the HIP rows (no kernel yet; the shape
                   comes from the cited source), the CUDA forward's wgmma row (host emulation only) */

#define FMSA_PLAN_COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* cpu.c */
extern const fmsa_arch_table fmsa_plan_table_x86_avx512, fmsa_plan_table_x86_avx2,
    fmsa_plan_table_x86, fmsa_plan_table_aarch64, fmsa_plan_table_cpu;
/* opencl.c */
extern const fmsa_arch_table fmsa_plan_table_opencl, fmsa_plan_table_opencl_cpu;
/* cuda_mma.c (sm80, sm90), cdna.c */
extern const fmsa_arch_table fmsa_plan_table_sm80, fmsa_plan_table_sm90,
    fmsa_plan_table_gfx942, fmsa_plan_table_gfx90a;

#endif /* FMSA_PLAN_TABLES_H */
