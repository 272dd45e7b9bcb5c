/*
 * Development harness of the CUDA forward kernels (not part of the library):
 * a shared library on the CUDA runtime that launches the production
 * instances through the same picker the host backend calls
 * (cuda_fwd_instances.h), plus experimental tile variants for A/B timing.
 * bench/cuda_fwd_check.py drives it through ctypes on the device machine.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cuda_runtime.h>

#include "../kernels/fmsa_cuda_fwd.cu"

/* Variants timed beside the production rows (bf16, FAST); same columns. */
#define FMSA_CUDA_FWD_DEV_INSTANCES(X)                                                          \
    X(dev_d64_w4_n128_s2_q1_y0, 1, 64, 0, 128, 128, 128, 2, 1, 0, 2)                            \
    X(dev_d64_w4_n64_s3_q1_y1, 1, 64, 0, 128, 128, 64, 3, 1, 1, 2)                              \
    X(dev_d128_w4_n32_s2_q1_y0, 1, 128, 0, 128, 128, 32, 2, 1, 0, 2)                            \
    X(dev_d128_w4_n32_s2_q0_y0, 1, 128, 0, 128, 128, 32, 2, 0, 0, 2)                            \
    X(dev_d128_w4_n32_s3_q1_y1, 1, 128, 0, 128, 128, 32, 3, 1, 1, 2)                            \
    X(dev_d128_w4_n64_s2_q0_y1, 1, 128, 0, 128, 128, 64, 2, 0, 1, 2)                            \
    X(dev_d256_w8_n32_s2_q1_y0, 1, 256, 0, 256, 128, 32, 2, 1, 0, 1)                            \
    X(dev_d256_w8_n64_s2_q0_y0, 1, 256, 0, 256, 128, 64, 2, 0, 0, 1)

FMSA_CUDA_FWD_DEV_INSTANCES(FMSA_CUDA_FWD_DEFINE)

typedef void (*fmsa_dev_kernel)(const fmsa_cuda_fwd_params);

typedef struct fmsa_dev_entry {
    const char *name;
    fmsa_dev_kernel fn;
    int info[8]; /* is_bf16, D, variant, threads, block_m, block_n, smem, kind (1 production, 0 dev, 2 split, 3 combine) */
    int attr_set;
} fmsa_dev_entry;

#define FMSA_DEV_PROD(...) {FMSA_DEV_PROD_(__VA_ARGS__)},
#define FMSA_DEV_PROD_(name, dt, d, variant, threads, bm, bn, stages, qreg, sync, minb)         \
    #name, name, {dt, d, variant, threads, bm, bn, FMSA_CUDA_FWD_SMEM(d, bm, bn, stages), 1}, 0
#define FMSA_DEV_EXP(...) {FMSA_DEV_EXP_(__VA_ARGS__)},
#define FMSA_DEV_EXP_(name, dt, d, variant, threads, bm, bn, stages, qreg, sync, minb)          \
    #name, name, {dt, d, variant, threads, bm, bn, FMSA_CUDA_FWD_SMEM(d, bm, bn, stages), 0}, 0

#define FMSA_DEV_SPLIT(name, dt, d, variant, threads, bnw, stages)                              \
    {#name, name, {dt, d, variant, threads, 16, (threads) / 32 * (bnw), FMSA_CUDA_FWD_SPLIT_SMEM(d, threads, stages), 2}, 0},
#define FMSA_DEV_COMBINE(name, dt, threads) {#name, name, {dt, 0, 0, threads, 0, 0, 0, 3}, 0},

/* production rows first, in list order: fmsa_cuda_fwd_select's index is theirs */
static fmsa_dev_entry fmsa_dev_table[] = {
    FMSA_CUDA_FWD_INSTANCES(FMSA_DEV_PROD) FMSA_CUDA_FWD_DEV_INSTANCES(FMSA_DEV_EXP)
        FMSA_CUDA_FWD_SPLIT_INSTANCES(FMSA_DEV_SPLIT) FMSA_CUDA_FWD_COMBINE_INSTANCES(FMSA_DEV_COMBINE)};
static const int fmsa_dev_count = (int)(sizeof fmsa_dev_table / sizeof fmsa_dev_table[0]);
static char fmsa_dev_msg[256];

extern "C" {

int fmsa_cuda_dev_num_kernels(void) { return fmsa_dev_count; }

const char *fmsa_cuda_dev_kernel_name(int i) {
    return i >= 0 && i < fmsa_dev_count ? fmsa_dev_table[i].name : "";
}

/// info[8] of kernel i (see fmsa_dev_entry); 0 on success.
int fmsa_cuda_dev_kernel_info(int i, int *info) {
    if (i < 0 || i >= fmsa_dev_count) return -1;
    for (int k = 0; k < 8; ++k) info[k] = fmsa_dev_table[i].info[k];
    return 0;
}

const char *fmsa_cuda_dev_last_error(void) { return fmsa_dev_msg; }

static int fmsa_dev_find(const char *name) {
    for (int i = 0; i < fmsa_dev_count; ++i)
        if (strcmp(fmsa_dev_table[i].name, name) == 0) return i;
    return -1;
}

static int fmsa_dev_launch(int i, const fmsa_cuda_fwd_params *p, const unsigned grid[3], void *stream) {
    fmsa_dev_entry *e = &fmsa_dev_table[i];
    cudaError_t err;
    if (!e->attr_set) {
        err = cudaFuncSetAttribute((const void *)e->fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   e->info[6]);
        if (err != cudaSuccess) {
            snprintf(fmsa_dev_msg, sizeof fmsa_dev_msg, "cudaFuncSetAttribute(%s): %s", e->name,
                     cudaGetErrorString(err));
            return (int)err;
        }
        e->attr_set = 1;
    }
    void *args[1] = {(void *)p};
    err = cudaLaunchKernel((const void *)e->fn, dim3(grid[0], grid[1], grid[2]), dim3((unsigned)e->info[3]),
                           args, (size_t)e->info[6], (cudaStream_t)stream);
    if (err != cudaSuccess) {
        snprintf(fmsa_dev_msg, sizeof fmsa_dev_msg, "cudaLaunchKernel(%s): %s", e->name,
                 cudaGetErrorString(err));
        return (int)err;
    }
    return 0;
}

static void *fmsa_dev_ws;
static unsigned long long fmsa_dev_ws_bytes;
static int fmsa_dev_sms;
static char fmsa_dev_plan_msg[256];

/// The production path as the host will run it: fmsa_cuda_fwd_make_plan, the
/// workspace for split partials (grown here; the host takes it from the
/// caller's workspace), then each launch.  force_splits as in make_plan.
/// Returns -2 when no instance serves p (FMSA_ERR_NOT_SUPPORTED on the host).
int fmsa_cuda_dev_forward_ex(const fmsa_cuda_fwd_params *p_in, int is_bf16, void *stream,
                             int force_splits) {
    fmsa_cuda_fwd_plan plan;
    fmsa_cuda_fwd_params p = *p_in;
    if (!fmsa_dev_sms) cudaDeviceGetAttribute(&fmsa_dev_sms, cudaDevAttrMultiProcessorCount, 0);
    if (fmsa_cuda_fwd_make_plan(is_bf16, &p, fmsa_dev_sms, force_splits, &plan) != 0) {
        snprintf(fmsa_dev_msg, sizeof fmsa_dev_msg, "no instance");
        return -2;
    }
    if (plan.workspace_bytes > fmsa_dev_ws_bytes) {
        if (fmsa_dev_ws) cudaFree(fmsa_dev_ws);
        fmsa_dev_ws = NULL;
        if (cudaMalloc(&fmsa_dev_ws, plan.workspace_bytes) != cudaSuccess) {
            fmsa_dev_ws_bytes = 0;
            snprintf(fmsa_dev_msg, sizeof fmsa_dev_msg, "cudaMalloc workspace");
            return -3;
        }
        fmsa_dev_ws_bytes = plan.workspace_bytes;
    }
    p.num_splits = plan.num_splits;
    p.o_accum = (float *)fmsa_dev_ws;
    p.lse_accum = (float *)((char *)fmsa_dev_ws + plan.lse_offset);
    snprintf(fmsa_dev_plan_msg, sizeof fmsa_dev_plan_msg, "%s%s%s splits %d", plan.num_launches ? plan.launch[0].name : "-",
             plan.num_launches > 1 ? " + " : "", plan.num_launches > 1 ? plan.launch[1].name : "", plan.num_splits);
    for (int k = 0; k < plan.num_launches; ++k) {
        const int i = fmsa_dev_find(plan.launch[k].name);
        if (i < 0 || fmsa_dev_table[i].info[3] != (int)plan.launch[k].threads ||
            (fmsa_dev_table[i].info[7] != 3 && fmsa_dev_table[i].info[6] != plan.launch[k].smem_bytes)) {
            snprintf(fmsa_dev_msg, sizeof fmsa_dev_msg, "plan names %s: not in the table as planned",
                     plan.launch[k].name);
            return -4;
        }
        const int rc = fmsa_dev_launch(i, &p, plan.launch[k].grid, stream);
        if (rc) return rc;
    }
    return 0;
}

/// Launches main-forward kernel i (production or dev row) on problem p:
/// 0, or a cudaError_t (message in last_error).
int fmsa_cuda_dev_forward_kernel(int i, const fmsa_cuda_fwd_params *p, void *stream) {
    fmsa_cuda_fwd_instance inst;
    unsigned grid[3];
    if (i < 0 || i >= fmsa_dev_count || fmsa_dev_table[i].info[7] > 1) return -1;
    inst.block_m = fmsa_dev_table[i].info[4];
    fmsa_cuda_fwd_grid(&inst, p, grid);
    if (grid[0] == 0) return 0;
    return fmsa_dev_launch(i, p, grid, stream);
}

/// Name of the kernels the last forward_ex planned, for the script's log.
const char *fmsa_cuda_dev_last_plan(void) { return fmsa_dev_plan_msg; }

int fmsa_cuda_dev_forward(const fmsa_cuda_fwd_params *p, int is_bf16, void *stream) {
    return fmsa_cuda_dev_forward_ex(p, is_bf16, stream, -1);
}

/// Index of the instance the picker takes for p (-1: none), for the script's log.
int fmsa_cuda_dev_select(const fmsa_cuda_fwd_params *p, int is_bf16) {
    return fmsa_cuda_fwd_select(is_bf16, p);
}

#define FMSA_DEV_FIELDS(X)                                                                      \
    X(q) X(k) X(v) X(o) X(lse) X(alibi) X(mask) X(cu_seqlens_q) X(cu_seqlens_k) X(block_table)  \
    X(seqused_k) X(sinks) X(status) X(o_accum) X(lse_accum) X(q_sb) X(q_ss) X(q_sh) X(k_sb)     \
    X(k_ss) X(k_sh) X(v_sb) X(v_ss) X(v_sh) X(o_sb) X(o_ss) X(o_sh) X(lse_sb) X(lse_sh)         \
    X(lse_ss) X(alibi_sb) X(alibi_sh) X(mask_sb) X(mask_sh) X(mask_ss) X(cu_q_s) X(cu_k_s)      \
    X(bt_sb) X(bt_sp) X(su_s) X(batch) X(seqlen_q) X(seqlen_k) X(heads_q) X(heads_kv)           \
    X(head_dim) X(head_dim_v) X(total_q) X(total_k) X(page_size) X(max_pages) X(num_pages)      \
    X(num_splits) X(window_left) X(window_right) X(softmax_scale) X(scale_log2) X(softcap)      \
    X(is_varlen) X(is_paged) X(has_seqused_k)

/// out[0] = sizeof(fmsa_cuda_fwd_params), then offsetof of every field in the
/// order above; returns the count written, for the script's ctypes check.
int fmsa_cuda_dev_params_layout(long long *out, int cap) {
    int n = 0;
    if (cap < 1) return 0;
    out[n++] = (long long)sizeof(fmsa_cuda_fwd_params);
#define FMSA_DEV_OFF(f)                                                                         \
    if (n < cap) out[n++] = (long long)offsetof(fmsa_cuda_fwd_params, f);
    FMSA_DEV_FIELDS(FMSA_DEV_OFF)
#undef FMSA_DEV_OFF
    return n;
}

} /* extern "C" */
