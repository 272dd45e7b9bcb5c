/*
 * The one list of backends.  Everything that names or finds a backend is
 * generated from FMSA_BACKEND_LIST: the vtable getter prototypes
 * (backend.h), the registry (registry.c), fmsa_backend_name (tensor.c), the
 * name parser of FLASHMSA_BACKEND and --backend (registry.c) and the name
 * list in messages and help texts (FMSA_BACKEND_NAMES).
 *
 * One entry per fmsa_backend value, in AUTO preference order (GPU backends
 * first, the CPU last: the registry keeps this order among devices of one
 * kind).  X(ID, name) stands for FMSA_BACKEND_<ID>, the name string "name",
 * the getter fmsa_backend_<name>_vtable() and the build macro
 * FLASHMSA_HAVE_<ID>, which cmake's fmsa_add_backend defines as 1 exactly when
 * the backend is compiled in.  Adding a backend: backends/README.md.
 */
#ifndef FMSA_COMMON_BACKEND_LIST_H
#define FMSA_COMMON_BACKEND_LIST_H

#define FMSA_BACKEND_LIST(X) \
    X(CUDA, cuda)            \
    X(HIP, hip)              \
    X(OPENCL, opencl)        \
    X(CPU, cpu)

/// "auto|cuda|hip|opencl|cpu": every name FLASHMSA_BACKEND and --backend
/// accept, as one string literal (so help texts can splice it in).
#define FMSA_BACKEND_NAME_BAR_(ID, name) "|" #name
#define FMSA_BACKEND_NAMES "auto" FMSA_BACKEND_LIST(FMSA_BACKEND_NAME_BAR_)

/*
 * FMSA_IF_BUILT(ID, ...) expands to its tail when FLASHMSA_HAVE_<ID> is
 * defined as 1 and to nothing otherwise, so one list line can both name a
 * backend that is not compiled in and leave its getter out of the registry
 * (a getter that does not exist must not even be referenced).  How: pasting
 * the macro's value onto FMSA_BUILT_PROBE_ gives FMSA_BUILT_PROBE_1, which
 * expands to "~, 1" and shifts a 1 into the second argument; an undefined
 * macro pastes to an unknown name and leaves the 0 there.
 */
#define FMSA_BUILT_PROBE_1 ~, 1
#define FMSA_BUILT_SECOND_(a, b, ...) b
#define FMSA_BUILT_SECOND(...) FMSA_BUILT_SECOND_(__VA_ARGS__)
#define FMSA_BUILT_VALUE_(v) FMSA_BUILT_SECOND(FMSA_BUILT_PROBE_##v, 0, ~)
#define FMSA_BUILT_VALUE(v) FMSA_BUILT_VALUE_(v)
/// 1 when backend ID is compiled into this build, else 0 (a constant expression).
#define FMSA_BUILT(ID) FMSA_BUILT_VALUE(FLASHMSA_HAVE_##ID)
#define FMSA_IF_BUILT_0(...)
#define FMSA_IF_BUILT_1(...) __VA_ARGS__
#define FMSA_IF_BUILT_(c) FMSA_IF_BUILT_##c
#define FMSA_IF_BUILT_SEL(c) FMSA_IF_BUILT_(c)
#define FMSA_IF_BUILT(ID, ...) FMSA_IF_BUILT_SEL(FMSA_BUILT(ID))(__VA_ARGS__)

#endif /* FMSA_COMMON_BACKEND_LIST_H */
