/*
 * Placeholder pick functions for a pass whose kernel instance list is not in
 * this tree yet (cuda_fwd_instances.h / cuda_bwd_instances.h of the kernel
 * branches; backends/cuda/backend.cmake compiles cuda_fwd_pick.c /
 * cuda_bwd_pick.c instead as soon as the header exists).  The pass is then
 * "not supported", so that the backend, its loader, module loading and the
 * device-side checks build and run without attention kernels.
 */
#include "backends/cuda/cuda_internal.h"
#include "common/error.h"

#if !defined(FMSA_CUDA_HAVE_FWD_INSTANCES)
fmsa_status fmsa_cuda_fwd_pick(const fmsa_cuda_device *dev, const fmsa_problem *p,
                               fmsa_cuda_plan *plan) {
    (void)plan;
    return fmsa_fail(FMSA_ERR_NOT_SUPPORTED,
                     "cuda: no forward kernel instance for head_dim %lld on %s in this build",
                     (long long)p->head_dim, dev->info.arch);
}
#endif /* FMSA_CUDA_HAVE_FWD_INSTANCES */

#if !defined(FMSA_CUDA_HAVE_BWD_INSTANCES)
fmsa_status fmsa_cuda_bwd_pick(const fmsa_cuda_device *dev, const fmsa_problem *p,
                               fmsa_cuda_plan *plan) {
    (void)plan;
    return fmsa_fail(FMSA_ERR_NOT_SUPPORTED,
                     "cuda: no backward kernel instance for head_dim %lld on %s in this build",
                     (long long)p->head_dim, dev->info.arch);
}

void fmsa_cuda_bwd_bind(const fmsa_cuda_plan *plan, fmsa_cu_deviceptr workspace,
                        fmsa_cuda_bwd_params *bp) {
    (void)plan, (void)workspace, (void)bp;
}
#endif /* FMSA_CUDA_HAVE_BWD_INSTANCES */
