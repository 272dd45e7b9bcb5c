/*
 * Ring attention over MPI: run as `mpiexec -n P test_ring_mpi` (tests/ring.cmake
 * does for P = 1, 2, 3, 4).  Every process is one rank with its own CPU
 * context; every layout, causal and not, GQA, f32 and bf16, and two windows
 * (causal sliding, two-sided) reaching across ranks, ALiBi over the whole
 * sequence (every layout, [Hq] and [B, Hq] slopes, causal and not, windows,
 * sinks), and bit masks (contiguous and zigzag, each rank its own rows over
 * every key column, a fully masked row, with ALiBi on some); each rank checks
 * its own rows against the whole problem's fp64 reference under the rule
 * (tests/support/fmsa_ring_case.c), and the ranks agree on the verdict.
 */
#include <mpi.h>
#include <stdio.h>

#include "tests/support/fmsa_ring_case.h"

int main(int argc, char **argv) {
    static const fmsa_dtype dts[] = {FMSA_DTYPE_F32, FMSA_DTYPE_BF16};
    MPI_Comm world = MPI_COMM_WORLD;
    fmsa_dist_comm *comm = NULL;
    int rank, size, failures = 0, cases = 0, all = 0, refused = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(world, &rank);
    MPI_Comm_size(world, &size);
    if (fmsa_dist_comm_from_mpi(&world, &comm) != FMSA_SUCCESS) {
        fprintf(stderr, "rank %d: fmsa_dist_comm_from_mpi failed\n", rank);
        MPI_Abort(world, 1);
    }
    for (int layout = 0; layout < 3; ++layout)
        for (int causal = 0; causal < 2; ++causal)
            for (int di = 0; di < 6; ++di) { /* di = 2: bf16 with a window; 3, 4: ALiBi; 5: mask */
                fmsa_ring_spec s = {0};
                fmsa_ring_case *rc;
                char msg[512], name[160];
                int r;
                s.P = size;
                s.layout = (fmsa_ring_layout)layout;
                s.causal = causal;
                s.dtype = dts[di ? 1 : 0];
                if (di == 2) { /* causal: a sliding window; full: a two-sided one */
                    s.window = 1;
                    s.window_left = causal ? 7 : 4;
                    s.window_right = causal ? -1 : 9;
                }
                s.B = 1;
                s.c = 10; /* zigzag halves of 5 rows */
                s.Hq = 4;
                s.Hkv = 1;
                s.D = 16;
                s.Dv = 16;
                if (di == 3 || di == 4) { /* ALiBi (striped: slopes times P, lse shifts) */
                    s.dtype = di == 3 ? FMSA_DTYPE_F32 : FMSA_DTYPE_BF16;
                    s.alibi = di == 3 ? 1 : 2;
                    s.B = 2;
                    s.Hkv = 2;
                    s.sinks = di == 3;
                    if (di == 4) { /* causal: a sliding window; full: a two-sided one */
                        s.window = 1;
                        s.window_left = causal ? 6 : 5;
                        s.window_right = causal ? -1 : 8;
                    }
                }
                if (di == 5) { /* a bit mask: not striped (refused, see test_ring_loopback) */
                    if (layout == FMSA_RING_STRIPED) continue;
                    s.dtype = causal ? FMSA_DTYPE_BF16 : FMSA_DTYPE_F32;
                    s.c = 16; /* chunks of 16 and 8 keys: each starts at a byte of the mask */
                    s.mask = causal ? 2 : 1;
                    s.alibi = causal ? 2 : 0;
                    s.B = 2;
                    s.Hkv = 2;
                    s.sinks = !causal;
                    s.dlse = causal;
                }
                s.seed = 101u + 7u * (unsigned)(layout * 10 + causal * 5 + di);
                fmsa_ring_spec_name(&s, name, sizeof name);
                rc = fmsa_ring_case_make(&s);
                if (!rc) {
                    fprintf(stderr, "rank %d: %s: harness failed\n", rank, name);
                    MPI_Abort(world, 1);
                }
                r = fmsa_ring_case_run(rc, comm, msg, sizeof msg);
                if (r == 77) ++refused;
                else if (r != 0) {
                    ++failures;
                    fprintf(stderr, "FAIL %s: %s\n", name, msg);
                }
                ++cases;
                fmsa_ring_case_free(rc);
            }
    MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, world);
    if (rank == 0)
        printf("ring over MPI, %d ranks: %d cases, %d rank-failures, %d refused on rank 0\n", size,
               cases, all, refused);
    fmsa_dist_comm_destroy(comm);
    MPI_Finalize();
    return all == 0 && refused == 0 ? 0 : 1;
}
