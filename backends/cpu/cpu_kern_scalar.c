/*
 * The scalar kernel path: cpu_kern_generic.c compiled with auto-vectorisation
 * off (CMakeLists.txt sets the flag on this file), the plain scalar tiled
 * baseline the SIMD paths are measured against.
 */
#define FMSA_CPU_KERN_SCALAR 1
#include "backends/cpu/cpu_kern_generic.c"
