/*
 * The `flashmsa` command-line program: declarations shared by its files.
 *
 * flashmsa.c dispatches to one cmd_*() per subcommand.  Each command parses
 * its own options (cli_options.h), builds its problems through the shared
 * setup module (cli_workload.h), checks results with cli_check.h and shares
 * the helpers of cli_util.h; nothing calls back into flashmsa.c.  The
 * program only reaches devices through the public API (fmsa_malloc and the
 * copy helpers), so every backend is driven the same way; the internal
 * headers it uses are common/'s (fp64 reference, naive oracle, validation,
 * registry), never a backend's.
 */
#ifndef FMSA_APPS_CLI_H
#define FMSA_APPS_CLI_H

#include "flashmsa/flashmsa.h"

/// Exit codes: 0 only when everything asked for ran and passed its check.
enum {
    CLI_EXIT_OK = 0,    ///< ran, and every check passed
    CLI_EXIT_FAIL = 1,  ///< ran, but a correctness check failed
    CLI_EXIT_ERROR = 2, ///< bad usage or a library call failed
};

/// `flashmsa devices`: lists every device of every compiled-in backend.
int cmd_devices(int argc, char **argv);
/// `flashmsa run`: one problem, timed and checked against the fp64 reference.
int cmd_run(int argc, char **argv);
/// `flashmsa bench`: the standard sweep, timed, each shape spot-checked.
int cmd_bench(int argc, char **argv);
/// `flashmsa peak`: the CPU's measured multiply-add peak per kernel path.
int cmd_peak(int argc, char **argv);

#endif /* FMSA_APPS_CLI_H */
