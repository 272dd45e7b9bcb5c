/*
 * The forward instances of cuda_fwd_instances.h, one extern "C" kernel each,
 * so the host finds them by name in the module (cuModuleGetFunction).
 */
#include "fmsa_cuda_fwd_split.cuh"

FMSA_CUDA_FWD_INSTANCES(FMSA_CUDA_FWD_DEFINE)
FMSA_CUDA_FWD_SPLIT_INSTANCES(FMSA_CUDA_FWD_SPLIT_DEFINE)
FMSA_CUDA_FWD_COMBINE_INSTANCES(FMSA_CUDA_FWD_COMBINE_DEFINE)
