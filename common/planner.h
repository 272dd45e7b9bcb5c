/*
 * The tile planner: a pure function from (device limits, arch, head dim,
 * dtype, pass, features) to tile sizes, reading the per-arch tables in
 * planner_tables.c.  Backends may only choose among what it returns; they
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

/// What the planner is asked.
typedef struct fmsa_plan_request {
    int64_t head_dim;   ///< D (multiple of 8, <= 256)
    fmsa_dtype dtype;   ///< element type of q/k/v
    fmsa_pass pass;     ///< forward or backward
    unsigned features;  ///< FMSA_FEAT_* bits
    int64_t seqlen_q;   ///< longest query sequence (for decode / split-KV)
    int64_t seqlen_k;   ///< longest key sequence
    int64_t batch_heads;///< batch * heads_q: independent row blocks of work
} fmsa_plan_request;

/// What the planner answers.
typedef struct fmsa_tile_plan {
    int block_m;        ///< Br: query rows per tile
    int block_n;        ///< Bc: keys per tile
    int stages;         ///< K/V pipeline stages (1 on the CPU)
    int warps;          ///< warps / waves per block (1 on the CPU)
    size_t sram_bytes;  ///< on-chip bytes one block (or one CPU thread's working set) uses
    int num_splits;     ///< split-KV count for decode (1 = no split)
    const char *table_row; ///< name of the table row that produced the plan (for logs/tests)
} fmsa_tile_plan;

/// Plans tiles for one problem on one device.  FMSA_ERR_NOT_SUPPORTED when no
/// row of the device's arch table fits its SRAM limit for this request.
fmsa_status fmsa_plan_tiles(const fmsa_device_info *dev, const fmsa_plan_request *req,
                            fmsa_tile_plan *plan);

/// The split-KV decision for decode-shaped problems: how many key splits keep
/// every multiprocessor busy when batch_heads * ceil(seqlen_q / block_m) is
/// small.  Pure; 1 means no split.
int fmsa_plan_num_splits(const fmsa_device_info *dev, int64_t batch_heads, int64_t seqlen_q,
                         int64_t seqlen_k, int block_m, int block_n);

#endif /* FMSA_COMMON_PLANNER_H */
