/*
 * Every arch table the planner knows, in lookup order.  One file per backend
 * family holds the rows (cpu.c, opencl.c, sm80.c, sm90.c, cdna.c); a new arch
 * is its rows there plus one line here.  The fallback for an arch not listed
 * is chosen in planner.c (fmsa_plan_find_table).
 */
#include "common/plan_tables/plan_tables.h"

static const fmsa_arch_table *const fmsa_arch_tables[] = {
    &fmsa_plan_table_x86_avx512, &fmsa_plan_table_x86_avx2, &fmsa_plan_table_x86,
    &fmsa_plan_table_aarch64,    &fmsa_plan_table_cpu,      &fmsa_plan_table_sm80,
    &fmsa_plan_table_sm90,       &fmsa_plan_table_gfx942,   &fmsa_plan_table_gfx90a,
    &fmsa_plan_table_opencl,     &fmsa_plan_table_opencl_cpu,
};

const fmsa_arch_table *const *fmsa_plan_arch_tables(int *count) {
    if (count) *count = FMSA_PLAN_COUNT(fmsa_arch_tables);
    return fmsa_arch_tables;
}
