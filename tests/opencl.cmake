# tests of group opencl (included when FLASHMSA_HAVE_OPENCL)
