/*
 * Option parsing for the flashmsa program.  A small hand-written parser
 * instead of getopt_long: the program is strict C11 and getopt_long is a GNU
 * extension.  Options are long-only, "--name value" or "--name=value".
 *
 * Every cli_parse_* returns 0 on success and -1 after printing a message that
 * names the option and the accepted values.
 */
#ifndef FMSA_APPS_CLI_OPTIONS_H
#define FMSA_APPS_CLI_OPTIONS_H

#include <stdint.h>

#include "common/backend_list.h"
#include "flashmsa/flashmsa.h"

/// Walks argv[first..argc).  Usage:
///   cli_args a = cli_args_begin(argc, argv, 1);
///   while (cli_args_next(&a)) { if (cli_flag(&a, "--causal")) ...;
///                               else if (cli_value(&a, "--dim")) parse(a.value) ...;
///                               else return cli_unknown(&a, "run"); }
///   if (a.error) ...
typedef struct cli_args {
    int argc;           ///< argument count
    char **argv;        ///< argument vector
    int next;           ///< index of the next unread argument
    const char *arg;    ///< the argument being matched
    const char *value;  ///< value of the last matched cli_value()
    int error;          ///< set when an option lacked its value
} cli_args;

/// Starts walking argv at index first.
cli_args cli_args_begin(int argc, char **argv, int first);
/// Advances to the next argument; 0 at the end (or after an error).
int cli_args_next(cli_args *a);
/// True when the current argument is exactly the flag name.
int cli_flag(cli_args *a, const char *name);
/// True when the current argument is `name value` or `name=value`; sets
/// a->value.  A missing value sets a->error and prints a message.
int cli_value(cli_args *a, const char *name);
/// Prints "unknown option" for the current argument; returns -1.
int cli_unknown(const cli_args *a, const char *command);

/// Integer in [lo, hi].
int cli_parse_i64(const char *opt, const char *s, int64_t lo, int64_t hi, int64_t *out);
/// Finite float in [lo, hi].
int cli_parse_float(const char *opt, const char *s, float lo, float hi, float *out);
/// Comma-separated integers in [lo, hi]; at most max entries.
int cli_parse_i64_list(const char *opt, const char *s, int64_t lo, int64_t hi, int64_t *out,
                       int max, int *count);
/// "fp32"/"f32", "fp16"/"f16", "bf16".
int cli_parse_dtype(const char *opt, const char *s, fmsa_dtype *out);
/// A backend name of FMSA_BACKEND_NAMES (common/backend_list.h), "auto" included.
int cli_parse_backend(const char *opt, const char *s, fmsa_backend *out);
/// "L,R" window sizes, each -1 (unlimited) or >= 0.
int cli_parse_window(const char *opt, const char *s, int64_t *left, int64_t *right);
/// --sinks: "random" (mode 1: a random logit per head) or one finite logit
/// for every head (mode 2, *value).  0, or -1 after printing the problem.
int cli_parse_sinks(const char *opt, const char *s, int *mode, float *value);

/// Options every command that runs attention shares.
typedef struct cli_device_opts {
    fmsa_backend backend; ///< --backend; with auto, FLASHMSA_BACKEND steers (in the library)
    int device;           ///< --device: index within the backend (auto: in the global list)
    int threads;          ///< --threads (>= 1): OpenMP threads for the CPU backend; 0 = not given, all
} cli_device_opts;

/// Matches --backend, --device, --threads.  1 = consumed, 0 = not one of
/// them, -1 = bad value (message printed).
int cli_device_option(cli_args *a, cli_device_opts *o);

/// Short name of an attention dtype ("fp32", "fp16", "bf16").
const char *cli_dtype_name(fmsa_dtype dtype);

#endif /* FMSA_APPS_CLI_OPTIONS_H */
