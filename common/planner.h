/*
 * The tile planner: a pure function from (device limits, arch, head dim,
 * dtype, pass, features) to tile sizes, reading the per-arch tables in
 * common/plan_tables/.  Backends may only choose among what it returns; they
 * never invent tile sizes.  The same function serves dispatch, support checks
 * and workspace sizing, so "supported" cannot disagree with "what runs".
 */
#ifndef FMSA_COMMON_PLANNER_H
#define FMSA_COMMON_PLANNER_H

#include "flashmsa/flashmsa.h"

/// Feature bits that change tile choices (masks cost registers/SRAM).
enum {
    FMSA_FEAT_CAUSAL = 1u << 0,  ///< causal or windowed (tiles can be skipped)
    FMSA_FEAT_SOFTCAP = 1u << 1, ///< tanh in the inner loop
    FMSA_FEAT_ALIBI = 1u << 2,   ///< per-element bias
    FMSA_FEAT_MASK = 1u << 3,    ///< bit-packed mask loads
    FMSA_FEAT_VARLEN = 1u << 4,  ///< cu_seqlens
    FMSA_FEAT_PAGED = 1u << 5,   ///< block-table indirection
};

/// Capability bits of the backend's kernels that open extra table rows
/// (fmsa_plan_request.caps).  A row that needs a capability is a different
/// kernel variant, not only a different shape, so the backend learns from
/// fmsa_tile_plan.dtypes which variant the planner chose.
enum {
    /// bf16 x bf16 -> fp32 matrix products (CPU: AMX tdpbf16ps, AVX512-BF16
    /// vdpbf16ps, or their portable twin): opens the FMSA_PLAN_DTYPES_BF16_MMA
    /// rows for bf16 requests
    FMSA_PLAN_CAP_BF16_MMA = 1u << 0,
    /// Hopper's warpgroup products (CUDA: sm_90a SASS on compute capability
    /// 9.0) for this request: opens the FMSA_PLAN_DTYPES_16BIT_WGMMA rows
    FMSA_PLAN_CAP_WGMMA = 1u << 1,
};

/// fmsa_plan_split.block_m: the backend runs no split kernel for this request.
#define FMSA_PLAN_SPLIT_NONE (-1)

/// The kernel a backend would split a decode's keys over (fmsa_plan_request.split),
/// so the split count is planned for the blocks that kernel launches.  All 0:
/// not described; the count is then the generic rule's for the planned row's
/// tile (fmsa_plan_num_splits), as on the CPU and OpenCL backends.
typedef struct fmsa_plan_split {
    /// query rows per block, a KV head's query heads packed together (GQA);
    /// FMSA_PLAN_SPLIT_NONE: no split kernel serves the request (1 split)
    int block_m;
    int block_n;       ///< keys per pipeline stage of the split kernel
    int blocks_per_sm; ///< its blocks one multiprocessor runs at once (its occupancy)
    int reserved;      ///< 0 (keeps the struct free of padding)
} fmsa_plan_split;

/// What the planner is asked.
typedef struct fmsa_plan_request {
    int64_t head_dim;   ///< D (multiple of 8, <= FMSA_HEAD_DIM_MAX)
    fmsa_dtype dtype;   ///< element type of q/k/v
    fmsa_pass pass;     ///< forward or backward
    unsigned features;  ///< FMSA_FEAT_* bits
    int64_t seqlen_q;   ///< longest query sequence (for decode / split-KV)
    int64_t seqlen_k;   ///< longest key sequence
    int64_t batch_heads;///< batch * heads_q: independent row blocks of work
    unsigned caps;      ///< FMSA_PLAN_CAP_* bits the backend's kernels have (0 = none)
    int64_t head_dim_v; ///< D_v, 0 = D (read only by rows that bound it: max_head_dim_v != 0)
    int64_t batch_heads_kv; ///< batch * heads_kv: what a split kernel packs by (0 = batch_heads)
    fmsa_plan_split split;  ///< the backend's split-KV kernel, where it describes one (forward)
} fmsa_plan_request;

/// What the planner answers.
typedef struct fmsa_tile_plan {
    int block_m;        ///< Br: query rows per tile
    int block_n;        ///< Bc: keys per tile
    int stages;         ///< K/V pipeline stages (1 on the CPU)
    int warps;          ///< warps / waves per block (1 on the CPU)
    size_t sram_bytes;  ///< on-chip bytes one block (or one CPU thread's working set) uses
    int num_splits;     ///< split-KV count for decode (1 = no split)
    int dtypes;         ///< the row's fmsa_plan_dtypes: which kernel variant the plan is for
    unsigned sram;      ///< the row's FMSA_TILE_* flags: what the kernel keeps on chip (GPU rows)
    int verified;       ///< the row's verified flag: 0 = no kernel has run this row yet
                        ///< (ints in pairs, so the struct has no padding bytes)
    const char *table_row; ///< name of the table row that produced the plan (for logs/tests)
    /// the row itself: backends of compiled kernels find the kernel of this row
    const struct fmsa_tile_row *row;
} fmsa_tile_plan;

struct fmsa_problem;
/// The FMSA_FEAT_* bits of a validated problem (windows and causal count as
/// FMSA_FEAT_CAUSAL), so every backend asks the planner the same question.
unsigned fmsa_plan_features(const struct fmsa_problem *p);

/// The planner's request for a validated problem: every field from p, caps
/// (FMSA_PLAN_CAP_* bits of the backend's kernels) as given.  Every backend
/// fills its request here, so none can ask a different question of one problem.
void fmsa_plan_request_from_problem(const struct fmsa_problem *p, unsigned caps,
                                    fmsa_plan_request *req);

/// Plans tiles for one problem on one device.  FMSA_ERR_NOT_SUPPORTED when no
/// row of the device's arch table fits its SRAM limit for this request.
fmsa_status fmsa_plan_tiles(const fmsa_device_info *dev, const fmsa_plan_request *req,
                            fmsa_tile_plan *plan);

/// The split-KV decision for decode-shaped problems: how many key splits keep
/// every multiprocessor busy when batch_heads * ceil(seqlen_q / block_m) is
/// small.  Pure; 1 means no split.  The generic rule (requests that describe
/// no split kernel); fmsa_plan_split_count is the one every request takes.
int fmsa_plan_num_splits(const fmsa_device_info *dev, int64_t batch_heads, int64_t seqlen_q,
                         int64_t seqlen_k, int block_m, int block_n);

/// The split count of a forward request whose planned row has the tile
/// block_m x block_n (what fmsa_plan_tiles reports as num_splits): 1 for
/// FMSA_PLAN_SPLIT_NONE, the decode kernel's rule where req->split describes
/// one, else fmsa_plan_num_splits.  Pure; 1 means no split.
int fmsa_plan_split_count(const fmsa_device_info *dev, const fmsa_plan_request *req, int block_m,
                          int block_n);

/* ------------------------------------------------------------------------ */
/* The per-arch tables (common/plan_tables/, one file per backend family),  */
/* exposed for the planner and for tests/test_core_planner.c, which checks  */
/* every row.                                                               */
/* ------------------------------------------------------------------------ */

/// Which element types a table row serves.
typedef enum fmsa_plan_dtypes {
    FMSA_PLAN_DTYPES_ANY = 0,   ///< f32, f16 and bf16
    FMSA_PLAN_DTYPES_16BIT = 1, ///< f16 and bf16 (tensor-core / MFMA paths)
    FMSA_PLAN_DTYPES_F32 = 2,   ///< f32 only (exact-fp32 paths: SIMT FMA, MFMA f32)
    /// bf16 only, on bf16 matrix products, and only for requests with
    /// FMSA_PLAN_CAP_BF16_MMA (CPU rows: the working set is costed with bf16
    /// Q / K / V / P and the K tile against L1 at 2 bytes per element)
    FMSA_PLAN_DTYPES_BF16_MMA = 3,
    /// f16 and bf16 on wgmma kernels, only for requests with FMSA_PLAN_CAP_WGMMA
    FMSA_PLAN_DTYPES_16BIT_WGMMA = 4,
} fmsa_plan_dtypes;

/// What a GPU row keeps in on-chip memory besides the K/V stages (bit flags).
enum {
    FMSA_TILE_Q_SRAM = 1u << 0,  ///< the Q tile (and dO in the backward) is staged in SRAM
    FMSA_TILE_P_SRAM = 1u << 1,  ///< P (and dS in the backward) goes through SRAM
    FMSA_TILE_DQ_SRAM = 1u << 2, ///< backward: fp32 dQ accumulator tile in SRAM
    FMSA_TILE_KV_REGS = 1u << 3, ///< backward: K/V stay in registers (KV-stationary), not in SRAM
};

/// How a table's rows are costed (see planner.c for the formulas).
typedef enum fmsa_sram_model {
    FMSA_SRAM_MODEL_GPU = 0, ///< bytes of shared memory / LDS / local memory one block uses
    FMSA_SRAM_MODEL_CPU = 1, ///< fp32 working set of one thread, against L2 (K/V tile against L1)
    /// nothing: the kernels keep their tiles in work-item private memory (the
    /// OpenCL CPU-device family), so rows cost 0 bytes and fit any device
    FMSA_SRAM_MODEL_NONE = 2,
} fmsa_sram_model;

/// One row: (pass, max head dim, dtypes, excluded features) -> tile shape.
typedef struct fmsa_tile_row {
    const char *name;          ///< stable name, reported in fmsa_tile_plan.table_row
    fmsa_pass pass;            ///< forward or backward
    int max_head_dim;          ///< serves head_dim <= this (the compiled head-dim bucket)
    fmsa_plan_dtypes dtypes;   ///< element types served
    unsigned not_with;         ///< FMSA_FEAT_* bits that disqualify the row (0 = any features)
    int block_m;               ///< query rows per tile
    int block_n;               ///< keys per tile
    int stages;                ///< pipeline depth of the streamed operand (K/V fwd, Q/dO bwd)
    int warps;                 ///< warps / waves per block (OpenCL: work-group / 16; CPU: 1)
    unsigned sram;             ///< FMSA_TILE_* flags (GPU model only)
    /// 1: a kernel of this tree runs the row and passes the fp64 grids on it;
    /// 0: no kernel yet (the shape is from the table's cited source, unmeasured)
    int verified;
    /// value head dims served: 0 any (the row does not bound D_v), > 0 up to
    /// this, FMSA_PLAN_DV_SAME only D_v == D (compiled-kernel rows: CUDA)
    int max_head_dim_v;
    /// the block's exact on-chip bytes where the row is one compiled kernel
    /// (its padding and extras are the kernel's, not the model's); 0 = the
    /// table's model
    unsigned sram_bytes;
} fmsa_tile_row;

/// fmsa_tile_row.max_head_dim_v: the row serves D_v == D only.
#define FMSA_PLAN_DV_SAME (-1)

/// One architecture's table.
typedef struct fmsa_arch_table {
    fmsa_backend backend;       ///< backend whose devices report this arch
    const char *arch;           ///< fmsa_device_info.arch key ("sm90", "x86-avx2", ...)
    fmsa_sram_model model;      ///< how rows are costed
    int pad_head_dim;           ///< 1: kernels are compiled per head-dim bucket, so D is
                                ///< costed as the row's max_head_dim; 0: D exactly (JIT / CPU)
    int simd_width;             ///< CPU: block granularity when dev->warp_size <= 0
    const fmsa_tile_row *rows;  ///< rows in preference order (first fitting row wins)
    int num_rows;               ///< entries of rows
} fmsa_arch_table;

/// Every arch table, in lookup order (common/plan_tables/index.c); *count
/// receives the number of tables.
const fmsa_arch_table *const *fmsa_plan_arch_tables(int *count);

/// The table the planner uses for dev: the exact (backend, arch) match, else
/// the backend's documented conservative fallback; NULL for FMSA_BACKEND_AUTO
/// or an unknown backend.
const fmsa_arch_table *fmsa_plan_find_table(const fmsa_device_info *dev);

/// The SRAM limit rows are checked against: sram_per_block_optin when > 0,
/// else sram_per_block; on the CPU (where a cache is a soft limit) at least
/// FMSA_PLAN_CPU_MIN_L2.
size_t fmsa_plan_sram_limit(const fmsa_device_info *dev);

/// Smallest per-core L2 the CPU planner assumes (bytes); see planner.c.
#define FMSA_PLAN_CPU_MIN_L2 ((size_t)256 * 1024)
/// L1d the CPU planner assumes when the device reports none (bytes).
#define FMSA_PLAN_CPU_DEFAULT_L1 ((size_t)32 * 1024)
/// Columns of B one fp32 CPU micro-kernel call re-reads for every row block
/// of A (the AVX-512 8x32 kernel's sliver; AVX2 and NEON read fewer): the part
/// of a K or V tile that must stay in L1 (planner.c).
#define FMSA_PLAN_CPU_SLIVER_COLS 32
/// Upper bound of fmsa_plan_num_splits().
#define FMSA_PLAN_MAX_SPLITS 128
/// Upper bound of the decode kernel's rule (fmsa_plan_split_count with req->split described).
#define FMSA_PLAN_MAX_DECODE_SPLITS 64

#endif /* FMSA_COMMON_PLANNER_H */
