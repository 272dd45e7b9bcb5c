/*
 * Kernel lookup and launches, and the device-side status word.
 *
 * Modules are loaded at context creation; a kernel is looked up by name on
 * first use and cached with the dynamic shared memory limit it has been
 * raised to, so a steady-state pass is only cuLaunchKernel calls (no
 * allocation, no synchronisation: it can be captured into a CUDA graph).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cuda_internal.h"
#include "common/error.h"

/* Shared memory every kernel may use without opting in. */
#define FMSA_CUDA_SMEM_DEFAULT (48u * 1024u)
#define FMSA_CUDA_CHECK_THREADS 256u
#define FMSA_CUDA_CHECK_MAX_BLOCKS 1024u

static fmsa_status fmsa_cuda_kernel_find(fmsa_cuda_state *st, const char *name,
                                         fmsa_cuda_kernel **out) {
    fmsa_cuda_kernel *k;
    fmsa_cu_function fn = NULL;
    for (k = st->kernels; k; k = k->next)
        if (!strcmp(k->name, name)) {
            *out = k;
            return FMSA_SUCCESS;
        }
    for (int i = 0; i < st->module_count && !fn; ++i) {
        fmsa_cu_result rc = st->cu->cuModuleGetFunction(&fn, st->modules[i], name);
        if (rc != FMSA_CU_SUCCESS && rc != FMSA_CU_ERROR_NOT_FOUND)
            return fmsa_cuda_fail(st->cu, "cuModuleGetFunction", rc);
        if (rc != FMSA_CU_SUCCESS) fn = NULL;
    }
    if (!fn)
        return fmsa_fail(FMSA_ERR_INTERNAL, "cuda: kernel %s is not in the embedded modules", name);
    k = (fmsa_cuda_kernel *)calloc(1, sizeof *k);
    if (!k) return fmsa_fail(FMSA_ERR_OUT_OF_MEMORY, "cuda: kernel cache entry");
    k->name = name; /* instance names are string literals of the instance lists */
    k->fn = fn;
    k->smem_limit = FMSA_CUDA_SMEM_DEFAULT;
    k->next = st->kernels;
    st->kernels = k;
    *out = k;
    return FMSA_SUCCESS;
}

fmsa_status fmsa_cuda_kernel_get(fmsa_cuda_state *st, const char *name, unsigned smem,
                                 fmsa_cu_function *out) {
    fmsa_cuda_kernel *k = NULL;
    fmsa_status s;
    pthread_mutex_lock(&st->lock);
    s = fmsa_cuda_kernel_find(st, name, &k);
    if (s == FMSA_SUCCESS && smem > k->smem_limit) {
        fmsa_cu_result rc = st->cu->cuFuncSetAttribute(k->fn, FMSA_CU_FUNC_ATTR_MAX_DYNAMIC_SMEM,
                                                       (int)smem);
        if (rc == FMSA_CU_SUCCESS) k->smem_limit = smem;
        else s = fmsa_cuda_fail(st->cu, "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)", rc);
    }
    pthread_mutex_unlock(&st->lock);
    if (s == FMSA_SUCCESS) *out = k->fn;
    return s;
}

static fmsa_status fmsa_cuda_launch_one(fmsa_cuda_state *st, const fmsa_cuda_launch *l,
                                        void *args, fmsa_cu_stream stream) {
    fmsa_cu_function fn;
    void *argv[1];
    fmsa_cu_result rc;
    argv[0] = args;
    FMSA_TRY(fmsa_cuda_kernel_get(st, l->kernel, l->smem, &fn));
    rc = st->cu->cuLaunchKernel(fn, l->grid[0], l->grid[1], l->grid[2], l->threads, 1, 1, l->smem,
                                stream, argv, NULL);
    if (rc != FMSA_CU_SUCCESS) {
        fmsa_status s = fmsa_cuda_fail(st->cu, "cuLaunchKernel", rc);
        return fmsa_fail(s, "%s (%s: grid %ux%ux%u, %u threads, %u bytes shared)",
                         fmsa_last_error(), l->kernel, l->grid[0], l->grid[1], l->grid[2],
                         l->threads, l->smem);
    }
    return FMSA_SUCCESS;
}

static fmsa_status fmsa_cuda_check_enqueue(fmsa_cuda_state *st, const fmsa_cuda_fwd_params *fp,
                                           fmsa_cu_stream stream) {
    fmsa_cuda_launch l;
    unsigned long long items, blocks;
    if (!fp->is_varlen && !fp->is_paged) return FMSA_SUCCESS;
    items = fp->is_paged ? (unsigned long long)fp->batch * (unsigned long long)fp->max_pages
                         : (unsigned long long)fp->batch + 1;
    blocks = (items + FMSA_CUDA_CHECK_THREADS - 1) / FMSA_CUDA_CHECK_THREADS;
    memset(&l, 0, sizeof l);
    l.kernel = "fmsa_cuda_check_metadata";
    l.grid[0] = (unsigned)(blocks < 1 ? 1 : blocks > FMSA_CUDA_CHECK_MAX_BLOCKS
                                               ? FMSA_CUDA_CHECK_MAX_BLOCKS
                                               : blocks);
    l.grid[1] = l.grid[2] = 1;
    l.threads = FMSA_CUDA_CHECK_THREADS;
    return fmsa_cuda_launch_one(st, &l, (void *)fp, stream);
}

static fmsa_status fmsa_cuda_plan_enqueue(fmsa_cuda_state *st, const fmsa_cuda_plan *plan,
                                          fmsa_cu_deviceptr workspace, void *args,
                                          fmsa_cu_stream stream) {
    if (plan->zero_bytes) {
        /* fp32 accumulators start at 0; zero_bytes is a multiple of 4 */
        FMSA_CU_CHECK(st->cu, "cuMemsetD32Async",
                      st->cu->cuMemsetD32Async(workspace + plan->zero_offset, 0u,
                                               plan->zero_bytes / 4, stream));
    }
    for (int i = 0; i < plan->launches; ++i) {
        const fmsa_cuda_launch *l = &plan->launch[i];
        if (l->grid[0] == 0 || l->grid[1] == 0 || l->grid[2] == 0) continue; /* empty problem */
        FMSA_TRY(fmsa_cuda_launch_one(st, l, args, stream));
    }
    return FMSA_SUCCESS;
}

fmsa_status fmsa_cuda_enqueue_pass(fmsa_cuda_state *st, const fmsa_cuda_plan *plan,
                                   const fmsa_cuda_fwd_params *fp, void *args,
                                   fmsa_cu_deviceptr workspace, fmsa_cu_stream stream) {
    fmsa_status s;
    FMSA_TRY(fmsa_cuda_push(st));
    s = fmsa_cuda_check_enqueue(st, fp, stream);
    if (s == FMSA_SUCCESS) s = fmsa_cuda_plan_enqueue(st, plan, workspace, args, stream);
    fmsa_cuda_pop(st);
    return s;
}

fmsa_status fmsa_cuda_status_take(fmsa_cuda_state *st, fmsa_cu_stream stream) {
    unsigned word = 0;
    char msg[512];
    size_t n = 0;
    FMSA_CU_CHECK(st->cu, "cuMemcpyDtoHAsync(status word)",
                  st->cu->cuMemcpyDtoHAsync(&word, st->status, sizeof word, stream));
    FMSA_CU_CHECK(st->cu, "cuStreamSynchronize", st->cu->cuStreamSynchronize(stream));
    if (!word) return FMSA_SUCCESS;
    /* cleared before reporting, so the next pass of this context runs again */
    FMSA_CU_CHECK(st->cu, "cuMemsetD32Async(status word)",
                  st->cu->cuMemsetD32Async(st->status, 0u, 1, stream));
    FMSA_CU_CHECK(st->cu, "cuStreamSynchronize", st->cu->cuStreamSynchronize(stream));
    msg[0] = '\0';
    if (word & FMSA_CUDA_STATUS_BAD_CU_SEQLENS)
        n += (size_t)snprintf(msg + n, sizeof msg - n, "%sdesc.cu_seqlens_q/k: must start at 0, "
                              "never decrease and end at the packed length, and no sequence may "
                              "exceed max_seqlen_q/k", n ? "; " : "");
    if ((word & FMSA_CUDA_STATUS_BAD_PAGE) && n < sizeof msg)
        n += (size_t)snprintf(msg + n, sizeof msg - n, "%sdesc.block_table: an entry a used key "
                              "lives in is outside [0, num_pages)", n ? "; " : "");
    if ((word & FMSA_CUDA_STATUS_BAD_SEQUSED) && n < sizeof msg)
        n += (size_t)snprintf(msg + n, sizeof msg - n, "%sdesc.seqused_k: an entry is outside "
                              "[0, max_pages * page_size]", n ? "; " : "");
    if (word & ~(FMSA_CUDA_STATUS_BAD_CU_SEQLENS | FMSA_CUDA_STATUS_BAD_PAGE |
                 FMSA_CUDA_STATUS_BAD_SEQUSED) && n < sizeof msg)
        snprintf(msg + n, sizeof msg - n, "%sunknown status bits %#x", n ? "; " : "", word);
    return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT,
                     "cuda: a device-side check of a pass since the last fmsa_synchronize "
                     "failed (the outputs of those passes are undefined): %s",
                     msg);
}
