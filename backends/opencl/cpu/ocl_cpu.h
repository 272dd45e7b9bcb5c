/*
 * The CPU-device variant of the OpenCL backend (fmsa_ocl_cpu_*.cl beside
 * this file): barrier-free kernels, one work-item per tile of rows, the tile
 * shape (fmsa_ocl_cpu_tiles) as -D values and everything else as arguments,
 * so one program serves every problem.
 * fmsa_ocl_config_make (ocl_config.c) asks fmsa_ocl_cpu_selected first, so
 * the choice stays in the one function that decides what runs.
 */
#ifndef FMSA_OCL_CPU_H
#define FMSA_OCL_CPU_H

#include "backends/opencl/ocl_internal.h"
#include "common/planner.h"

/// Variants of fmsa_ocl_config.variant.
enum {
    FMSA_OCL_VARIANT_GENERIC = 0, ///< fmsa_ocl_forward.cl / fmsa_ocl_backward.cl (work-group tiles)
    FMSA_OCL_VARIANT_CPU = 1,     ///< fmsa_ocl_cpu_*.cl (no barriers, no __local)
};

/// 0 when tiles t is a shape the CPU kernels compile for; else a status
/// naming the field (a planner row out of range is an internal error).
fmsa_status fmsa_ocl_cpu_tiles_check(const fmsa_ocl_cpu_tiles *t);

/// 1 when problem p runs the CPU variant on this context's device:
/// CL_DEVICE_TYPE_CPU, unless FLASHMSA_OCL_VARIANT=generic (or a
/// FLASHMSA_OCL_TILES override of the generic kernels) says otherwise;
/// FLASHMSA_OCL_VARIANT=cpu forces it on any device.
int fmsa_ocl_cpu_selected(const fmsa_ocl_state *st, const fmsa_problem *p);

/// The CPU variant's configuration (variant, launch shape, workspace) for
/// the planner's "opencl-cpu" plan of p (ocl_config.c asks the planner).
fmsa_status fmsa_ocl_cpu_config_make(const fmsa_ocl_state *st, const fmsa_problem *p,
                                     const fmsa_tile_plan *plan, fmsa_ocl_config *cfg);

/// Runs the forward / backward pass with the CPU kernels (caller holds st->lock).
fmsa_status fmsa_ocl_cpu_run_forward(fmsa_ocl_state *st, const fmsa_problem *p,
                                     const fmsa_ocl_config *cfg, cl_mem workspace,
                                     size_t workspace_bytes, cl_command_queue queue);
fmsa_status fmsa_ocl_cpu_run_backward(fmsa_ocl_state *st, const fmsa_problem *p,
                                      const fmsa_ocl_config *cfg, cl_mem workspace,
                                      size_t workspace_bytes, cl_command_queue queue);

/// Embedded source of the CPU program (generated at build time).
extern const char fmsa_ocl_cpu_kernel_source[];

#endif /* FMSA_OCL_CPU_H */
