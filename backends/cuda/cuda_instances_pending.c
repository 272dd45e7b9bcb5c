/*
 * Placeholder pick functions until the kernel instance lists are merged
 * (branches cudafwd / cudabwd: cuda_fwd_instances.h, cuda_bwd_instances.h
 * provide fmsa_cuda_fwd_pick / fmsa_cuda_bwd_pick over their X-macro lists;
 * this file is then deleted).  Every problem is "not supported" so that the
 * backend, its loader, module loading and the device-side checks can be built
 * and tested without attention kernels.
 */
#include "backends/cuda/cuda_internal.h"
#include "common/error.h"

fmsa_status fmsa_cuda_fwd_pick(const fmsa_cuda_device *dev, const fmsa_problem *p,
                               fmsa_cuda_plan *plan) {
    (void)plan;
    return fmsa_fail(FMSA_ERR_NOT_SUPPORTED,
                     "cuda: no forward kernel instance for head_dim %lld on %s in this build",
                     (long long)p->head_dim, dev->info.arch);
}

fmsa_status fmsa_cuda_bwd_pick(const fmsa_cuda_device *dev, const fmsa_problem *p,
                               fmsa_cuda_plan *plan) {
    (void)plan;
    return fmsa_fail(FMSA_ERR_NOT_SUPPORTED,
                     "cuda: no backward kernel instance for head_dim %lld on %s in this build",
                     (long long)p->head_dim, dev->info.arch);
}
