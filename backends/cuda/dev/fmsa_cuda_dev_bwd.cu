/*
 * Development harness of the CUDA backward (not part of the library): the
 * three stages compiled with the runtime and launched with <<<>>>, so the
 * kernels can be checked and timed from Python (ctypes) before the driver-API
 * host backend exists.  Built as a shared library by bench/cuda_bwd_build.sh.
 */
#include <stddef.h>
#include <string.h>

#include "backends/cuda/kernels/fmsa_cuda_bwd.cu"
#include "backends/cuda/kernels/fmsa_cuda_bwd_pre_post.cu"

typedef void (*fmsa_dev_kernel)(const fmsa_cuda_bwd_params);

typedef struct fmsa_dev_entry {
    fmsa_cuda_bwd_instance inst;
    fmsa_dev_kernel pre, main, post;
} fmsa_dev_entry;

#define FMSA_DEV_ENTRY(dt, BF16, D, BM, BN, WK, ST, OPT)                                        \
    {{"fmsa_cuda_bwd_pre_" #dt, FMSA_CUDA_BWD_STR(FMSA_CUDA_BWD_MAIN_SYM(dt, D, BM, BN, WK, ST, OPT)), \
      FMSA_CUDA_BWD_POST_NAME(dt, OPT), BF16, D, BM, BN, ST, 32 * FMSA_CUDA_BWD_WARPS,        \
      32 * FMSA_CUDA_BWD_AUX_WARPS, FMSA_CUDA_BWD_SMEM(D, BM, BN, ST),                        \
      FMSA_CUDA_BWD_SMEM_STAGE(D, BM, OPT), D, 0},                                                 \
     fmsa_cuda_bwd_pre_##dt, FMSA_CUDA_BWD_MAIN_SYM(dt, D, BM, BN, WK, ST, OPT),                  \
     ((OPT) & 8192) ? fmsa_cuda_bwd_post_t_##dt : fmsa_cuda_bwd_post_##dt},

static const fmsa_dev_entry fmsa_dev_entries[] = {FMSA_CUDA_BWD_INSTANCES(FMSA_DEV_ENTRY)
                                                      FMSA_CUDA_BWD_VARIANTS(FMSA_DEV_ENTRY)};
static const int fmsa_dev_num = (int)(sizeof fmsa_dev_entries / sizeof fmsa_dev_entries[0]);

/// The entry: by main-kernel name when variant is non-empty, else the library's selection.
static const fmsa_dev_entry *fmsa_dev_find(int bf16, int head_dim, const char *variant) {
    if (variant && variant[0]) {
        for (int i = 0; i < fmsa_dev_num; ++i)
            if (!strcmp(fmsa_dev_entries[i].inst.main, variant)) return &fmsa_dev_entries[i];
        return NULL;
    }
    const fmsa_cuda_bwd_instance *s =
        fmsa_cuda_bwd_select(bf16 ? FMSA_DTYPE_BF16 : FMSA_DTYPE_F16, head_dim, head_dim,
                             232448u, 9);
    if (!s) return NULL;
    for (int i = 0; i < fmsa_dev_num; ++i)
        if (!strcmp(fmsa_dev_entries[i].inst.main, s->main)) return &fmsa_dev_entries[i];
    return NULL;
}

#define FMSA_DEV_OFF(f) (long long)offsetof(fmsa_cuda_bwd_params, f)

extern "C" {

/// sizeof and the offsets of the fields the ctypes mirror checks, in its order.
int fmsa_cuda_dev_bwd_layout(long long *out, int n) {
    const long long v[] = {(long long)sizeof(fmsa_cuda_bwd_params),
                           (long long)sizeof(fmsa_cuda_fwd_params),
                           FMSA_DEV_OFF(fwd.q), FMSA_DEV_OFF(fwd.status), FMSA_DEV_OFF(fwd.q_sb),
                           FMSA_DEV_OFF(fwd.su_s), FMSA_DEV_OFF(fwd.batch),
                           FMSA_DEV_OFF(fwd.num_splits), FMSA_DEV_OFF(fwd.window_left),
                           FMSA_DEV_OFF(fwd.softmax_scale), FMSA_DEV_OFF(fwd.has_seqused_k),
                           FMSA_DEV_OFF(dout), FMSA_DEV_OFF(do_sb), FMSA_DEV_OFF(dsum),
                           FMSA_DEV_OFF(dlse), FMSA_DEV_OFF(deterministic), FMSA_DEV_OFF(dq_sems),
                           FMSA_DEV_OFF(num_sems), FMSA_DEV_OFF(accum_dim)};
    const int nv = (int)(sizeof v / sizeof v[0]);
    for (int i = 0; i < n && i < nv; ++i) out[i] = v[i];
    return nv;
}

/// Workspace bytes for p (geometry set) with the chosen entry; -1 unsupported.
long long fmsa_cuda_dev_bwd_workspace(const fmsa_cuda_bwd_params *p, int bf16, const char *variant) {
    const fmsa_dev_entry *e = fmsa_dev_find(bf16, p->fwd.head_dim, variant);
    fmsa_cuda_bwd_plan plan;
    if (!e || fmsa_cuda_bwd_plan_make(p, &e->inst, &plan)) return -1;
    return (long long)plan.workspace_bytes;
}

/// Main-kernel name of the entry (for logs), or NULL.
const char *fmsa_cuda_dev_bwd_name(int bf16, int head_dim, const char *variant) {
    const fmsa_dev_entry *e = fmsa_dev_find(bf16, head_dim, variant);
    return e ? e->inst.main : NULL;
}

/// The three stages on stream; returns a cudaError_t (or -1 unsupported).
int fmsa_cuda_dev_backward(const fmsa_cuda_bwd_params *pin, int bf16, const char *variant,
                           void *workspace, long long ws_bytes, void *stream) {
    const fmsa_dev_entry *e = fmsa_dev_find(bf16, pin->fwd.head_dim, variant);
    fmsa_cuda_bwd_plan plan;
    fmsa_cuda_bwd_params p = *pin;
    cudaStream_t s = (cudaStream_t)stream;
    cudaError_t err;
    if (!e || fmsa_cuda_bwd_plan_make(&p, &e->inst, &plan)) return -1;
    if ((long long)plan.workspace_bytes > ws_bytes) return -2;
    fmsa_cuda_bwd_plan_bind(&plan, &p, workspace);
    const int smem = (int)fmsa_cuda_bwd_smem(&e->inst, 9); /* the harness runs on sm_90 */
    err = cudaFuncSetAttribute(e->main, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (err != cudaSuccess) return (int)err;
    e->pre<<<dim3(plan.grid_pre[0], plan.grid_pre[1], plan.grid_pre[2]), e->inst.threads_aux, 0, s>>>(p);
    e->main<<<dim3(plan.grid_main[0], plan.grid_main[1], plan.grid_main[2]), e->inst.threads_main,
              smem, s>>>(p);
    e->post<<<dim3(plan.grid_post[0], plan.grid_post[1], plan.grid_post[2]), e->inst.threads_aux, 0, s>>>(p);
    return (int)cudaGetLastError();
}

} /* extern "C" */
