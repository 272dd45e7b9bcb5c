/*
 * The development programs' CUDA runtime check (backends/cuda/dev/, not the
 * library): a failing call prints its error and location and exits.
 */
#ifndef FMSA_DEV_CHECK_H
#define FMSA_DEV_CHECK_H

#include <cstdio>
#include <cstdlib>

#define CK(x)                                                                                  \
    do {                                                                                       \
        cudaError_t e_ = (x);                                                                  \
        if (e_ != cudaSuccess) {                                                               \
            printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__);   \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

#endif /* FMSA_DEV_CHECK_H */
