/*
 * Command line of every correctness suite, so the same executable runs on any
 * backend:  <suite> [--backend NAME] [--case N]
 *                   [--shape '<spec string>'] [--list] [--verbose]
 * NAME is one of FMSA_BACKEND_NAMES (common/backend_list.h).  Without
 * --backend, FLASHMSA_TEST_BACKEND chooses; the default is cpu.
 */
#ifndef FMSA_TEST_OPTIONS_H
#define FMSA_TEST_OPTIONS_H

#include "flashmsa/flashmsa.h"

/// Exit status meaning "skipped" (CTest SKIP_RETURN_CODE): the backend asked
/// for is not usable on this machine.
#define FMSA_TEST_EXIT_SKIP 77

typedef struct fmsa_test_options {
    fmsa_backend backend;     ///< which backend the suite runs on
    const char *backend_name; ///< as given ("cpu", ...), for reproducer lines
    const char *prog;         ///< argv[0], for reproducer lines
    long case_index;          ///< --case N: run only case N of the table (-1 = all)
    const char *shape;        ///< --shape: run only this spec string (NULL = table)
    int list;                 ///< --list: print the case table and exit
    int verbose;              ///< --verbose: print the error summary of passing cases too
} fmsa_test_options;

/// Parses argv (and FLASHMSA_TEST_BACKEND).  0, or -1 after printing usage.
int fmsa_test_options_parse(int argc, char **argv, fmsa_test_options *o);

/// Creates a context on the chosen backend, device 0.
fmsa_status fmsa_test_context_create(const fmsa_test_options *o, fmsa_context **ctx);

#endif /* FMSA_TEST_OPTIONS_H */
