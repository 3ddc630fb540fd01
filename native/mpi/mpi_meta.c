/* What ran, for the raw file's "# meta:" line: the MPI library, the run's
 * settings, and each collective's coll_tuned algorithm read through MPI_T. */
#define _GNU_SOURCE
#include <mpi.h>

#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/raw_out.h"
#include "../common/timing.h"
#include "mpi_probe.h"

/* Reads an integer MCA parameter through MPI_T. Returns 0 and fills *value
 * and, for enumerations, `label`; -1 when the parameter does not exist (not
 * Open MPI, or its tuned component is not loaded). */
static int read_cvar(const char *name, int *value, char *label, size_t label_len)
{
	int idx, verbosity, bind, scope, name_len = 0, desc_len = 0, count;
	MPI_Datatype type;
	MPI_T_enum enumtype;
	MPI_T_cvar_handle handle;

	label[0] = '\0';
	if (MPI_T_cvar_get_index(name, &idx) != MPI_SUCCESS)
		return -1;
	if (MPI_T_cvar_get_info(idx, NULL, &name_len, &verbosity, &type, &enumtype, NULL, &desc_len,
				&bind, &scope) != MPI_SUCCESS || (type != MPI_INT && type != MPI_C_BOOL))
		return -1;
	if (MPI_T_cvar_handle_alloc(idx, NULL, &handle, &count) != MPI_SUCCESS || count != 1)
		return -1;
	/* Booleans (use_dynamic_rules) are C bools, not ints. */
	union {
		int i;
		_Bool b;
	} buf = {0};
	int rc = MPI_T_cvar_read(handle, &buf);
	MPI_T_cvar_handle_free(&handle);
	if (rc != MPI_SUCCESS)
		return -1;
	*value = type == MPI_C_BOOL ? (int)buf.b : buf.i;
	if (enumtype != MPI_T_ENUM_NULL) {
		int items = 0, len = (int)label_len;
		char ename[256];
		int elen = sizeof(ename);
		if (MPI_T_enum_get_info(enumtype, &items, ename, &elen) == MPI_SUCCESS) {
			for (int i = 0; i < items; i++) {
				int v;
				len = (int)label_len;
				if (MPI_T_enum_get_item(enumtype, i, &v, label, &len) == MPI_SUCCESS && v == *value)
					return 0;
			}
		}
		label[0] = '\0';
	}
	return 0;
}

void write_meta(struct raw_out *f, const struct options *o, char (*procs)[MPI_MAX_PROCESSOR_NAME])
{
	char library[MPI_MAX_LIBRARY_VERSION_STRING];
	int len = 0, provided, dynamic = 0, have_dynamic;
	char label[128];

	MPI_Get_library_version(library, &len);
	if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) {
		fprintf(stderr, "%s: MPI_T_init_thread failed; cannot record the collective algorithms\n", prog);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	have_dynamic = read_cvar("coll_tuned_use_dynamic_rules", &dynamic, label, sizeof(label)) == 0;

	raw_printf(f, "# meta: {\"probe\": \"mpi-probe\", \"format\": 1, \"ranks\": %d, \"library\": ", nranks);
	raw_json_string(f, library);
	raw_printf(f, ", \"processors\": [");
	for (int r = 0; r < nranks; r++) {
		raw_printf(f, r ? ", " : "");
		raw_json_string(f, procs[r]);
	}
	raw_printf(f, "], \"sync\": \"%s\", \"warmup\": %lld, \"iterations\": %lld, \"series\": %lld, "
		"\"large_bytes\": %lld, \"large_iterations\": %lld, \"seed\": %lld, \"timer\": \"CLOCK_MONOTONIC\", "
		"\"pingpong_ns\": \"round trip on rank 0, timed after the peer's ready message (no barrier or window); the peer's own time from posting its receive to sending the echo\", "
		"\"timer_overhead_ns\": %.1f, ",
		sync_names[o->sync], o->warmup, o->iterations, o->series, o->large_bytes,
		o->large_iterations, o->seed, timer_overhead_ns(10001));
	raw_printf(f, "\"method\": \"%s\", ", method_names[o->method]);
	if (o->method == METHOD_OSU)
		raw_printf(f, "\"osu\": {\"modelled_on\": \"OSU micro-benchmarks 5.3\", \"large_above_elements\": %d, "
			"\"collective\": {\"skip\": %lld, \"iterations\": %lld, \"skip_large\": %lld, \"iterations_large\": %lld}, "
			"\"latency\": {\"skip\": %lld, \"iterations\": %lld, \"skip_large\": %lld, \"iterations_large\": %lld}, "
			"\"counts_from_command_line\": %s, \"allreduce_op\": \"MPI_SUM on MPI_FLOAT\", "
			"\"ns\": \"osu_latency rows: one round trip (back to back); collective rows: the operation, barrier after\"}, ",
			OSU_LARGE, osu_coll_counts[0], osu_coll_counts[1], osu_coll_counts[2], osu_coll_counts[3],
			osu_lat_counts[0], osu_lat_counts[1], osu_lat_counts[2], osu_lat_counts[3],
			o->set_warmup || o->set_iterations || o->set_large_iterations ? "true" : "false");
	raw_printf(f, "\"validated\": true, \"inject_error_rank\": %lld, \"delay_rank\": %lld, \"delay_us\": %lld, "
		"\"coll_tuned_use_dynamic_rules\": ",
		o->inject_rank, o->delay_rank, o->delay_us);
	if (have_dynamic)
		raw_printf(f, "%d", dynamic);
	else
		raw_printf(f, "null");
	raw_printf(f, ", \"algorithms\": {");
	int first = 1;
	for (int b = 0; b < B_COUNT; b++) {
		int value = 0;
		if (!bench_cvar[b] || !(o->benches & (1u << b)))
			continue;
		raw_printf(f, "%s\"%s\": ", first ? "" : ", ", bench_names[b]);
		first = 0;
		if (read_cvar(bench_cvar[b], &value, label, sizeof(label)) != 0)
			raw_printf(f, "{\"pinned\": false, \"algorithm\": \"unknown: no coll_tuned parameter\"}");
		else if (have_dynamic && dynamic && value != 0) {
			raw_printf(f, "{\"pinned\": true, \"value\": %d, \"algorithm\": ", value);
			raw_json_string(f, label[0] ? label : "unnamed");
			raw_printf(f, "}");
		} else
			raw_printf(f, "{\"pinned\": false, \"value\": %d, \"algorithm\": \"tuned fixed decision rules\"}", value);
	}
	raw_printf(f, "}}\n");
	MPI_T_finalize();
}
