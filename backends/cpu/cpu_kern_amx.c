/*
 * AMX kernel path: not written yet; the dispatcher skips a NULL table.
 */
#include "backends/cpu/cpu_kernels.h"

const fmsa_cpu_kernels *fmsa_cpu_kernels_amx(void) { return NULL; }
