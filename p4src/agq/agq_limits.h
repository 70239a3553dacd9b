/* The compiled sizes of the agq program's tables and registers: the one
 * source of truth for what a configuration may ask for.
 *   P4:     #include "agq_limits.h"   (p4src/agq/headers.p4)
 *   C++:    #include "agq_limits.h"   (switch/control/config_agq.cpp refuses
 *           a config beyond them; include dir p4src/agq)
 *   Python: p4src/bfrt/setup_agq.py parses the #define lines.
 * Plain `#define NAME VALUE` lines only (the Python parser reads nothing
 * else). Sized so every table fits SRAM on Tofino 1 and 2 beside the lane
 * registers (docs/PIPELINE.md, "Compiled resources"). */
#ifndef AGQ_LIMITS_H
#define AGQ_LIMITS_H

#define AGQ_ROWS 4096          /* row registers (row_occupancy, lane00..): [agq] total_rows */
#define AGQ_SLOTS 32768        /* slot registers (slot_bitmap, slot_count, slot_window): [agq] total_slots */
#define AGQ_MAX_JOBS 4096      /* job_t entries: [[job]] tables (= AgqProgram::kMaxJobs) */
#define AGQ_MAX_WORKERS 8192   /* worker_t / egress_worker_t entries: workers summed over all jobs */

#endif
