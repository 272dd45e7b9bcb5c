/*
 * Backend registry: the compiled-in backends and the global device list.
 */
#ifndef FMSA_COMMON_REGISTRY_H
#define FMSA_COMMON_REGISTRY_H

#include "common/backend.h"

/// The vtable of a compiled-in backend, or NULL if it is not built.
const fmsa_backend_vtable *fmsa_registry_find(fmsa_backend backend);

/// 1 when backend is AUTO or a backend of backend_list.h (built or not).
int fmsa_backend_valid(fmsa_backend backend);

/// The backend whose fmsa_backend_name is name ("auto" included): 0, or -1
/// for a name that is none of FMSA_BACKEND_NAMES (out untouched).
int fmsa_backend_parse(const char *name, fmsa_backend *out);

/// The global device list in AUTO order (built once); returns its length.
int fmsa_registry_device_list(const fmsa_device_info **list);

#endif /* FMSA_COMMON_REGISTRY_H */
