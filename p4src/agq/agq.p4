/* agq-switch's agq pipeline (docs/PROTOCOL.md, docs/PIPELINE.md) for the
 * Tofino 2 native architecture (t2na): 32 lanes in one pass, plus one
 * resubmitted pass for the first contribution of a sequence.
 * Stage and resource budget, Tofino 1 notes and the compile command:
 * p4src/README.md. Register, table and action names are the C++ pipeline's
 * (switch/pipeline/agq/). Constant tables: p4src/agq/generated/, written by
 * p4src/gen/gen_agq_tables (never edit them by hand).
 *
 *   bf-p4c --target tofino2 --arch t2na -I p4src/agq -o build/agq p4src/agq/agq.p4
 */
#include <core.p4>
#if __TARGET_TOFINO__ == 1
#error "agq.p4 needs 20 stages (Tofino 2); see p4src/README.md, section Tofino 1"
#endif
#include <t2na.p4>

#include "headers.p4"
#include "parser.p4"
#include "job_lookup.p4"
#include "bitmap_check.p4"
#include "counter.p4"
#include "window_alloc.p4"
#include "lanes.p4"
#include "result_select.p4"
#include "forwarding.p4"
#include "egress_rewrite.p4"
#include "deparser.p4"

control AgqIngress(inout ingress_headers_t hdr,
                   inout ingress_metadata_t md,
                   in ingress_intrinsic_metadata_t ig_intr_md,
                   in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
                   inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                   inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {

    /* PROTOCOL.md §9, indexed by C_* (headers.p4); the control plane reads
     * them by index under the same names as agqctl counters. */
    Counter<bit<64>, bit<8>>(32, CounterType_t.PACKETS) agq_counters;

    JobLookup()    job_lookup;
    JobCheck()     job_check;
    BitmapCheck()  bitmap_check;
    SlotCounter()  slot_counter;
    RowOccupancy() row_occupancy_ctl;
    SlotWindow()   slot_window_ctl;
    WindowAlloc()  window_alloc;
    LanePrep()     lane_prep;
    Lanes()        lanes;
    ResultSelect() result_select;
    AgqForward()   agq_forward;
    Forwarding()   forwarding;

    apply {
        if (ig_prsr_md.parser_err != PARSER_ERROR_OK) {
            ig_dprsr_md.drop_ctl = 1;                       /* drops_parser_error */
        } else if (!hdr.agq.isValid()) {
            forwarding.apply(hdr, md, ig_intr_md, ig_dprsr_md, ig_tm_md);
        } else {
            agq_counters.count(C_AGQ_PACKETS);
            job_lookup.apply(hdr, md, ig_intr_md);           /* S0-S2 */
            if (ig_intr_md.resubmit_flag == 0) {
                job_check.apply(hdr, md, ig_intr_md);         /* S1 */
            }
            bool from_recirc = ig_intr_md.ingress_port == AGQ_RECIRC_PORT;
            bool realloc = from_recirc && hdr.agq.reserved[15:8] == AGQ_RECIRC_REALLOC;
            bool reaggregate = from_recirc && hdr.agq.reserved[15:8] == AGQ_RECIRC_AGGREGATE;
            if (md.verdict == V_NONE) {
                if (ig_intr_md.resubmit_flag == 1) {
                    /* Pass 2 of a first contribution: no bitmap/count access. */
                    md.first = 1;
                    md.win = md.resub.window;
                } else if (realloc || reaggregate) {
                    /* Recirculated: slot_bitmap/slot_count already counted it. */
                    md.count = hdr.agq.reserved[7:0];
                    hdr.agq.reserved = 0;
                    if (realloc) { md.first = 1; }
                    if (md.count == md.job_n) { md.complete = 1; }
                } else {
                    bitmap_check.apply(md);                   /* S2-S3 */
                    slot_counter.apply(md);                   /* S4 */
                }
                if (md.first == 1 && ig_intr_md.resubmit_flag == 0) {
                    md.ovf_in = WIN_PENDING;                  /* pass 1 marks the window */
                } else if ((hdr.agq.flags & AGQ_FLAG_OVERFLOW) != 0 && md.seen_bits == 0) {
                    md.ovf_in = WIN_OVERFLOW;
                    agq_counters.count(C_AGQ_OVERFLOW);
                }
                if (ig_intr_md.resubmit_flag == 1 || md.first == 1) {
                    row_occupancy_ctl.apply(md, ig_intr_md);  /* S5 */
                }
                slot_window_ctl.apply(md, ig_intr_md);        /* S6 */
                if (ig_intr_md.resubmit_flag == 0 && md.first == 1) {
                    md.lane_clear = 1;
                    md.lane_run = 1;
                    window_alloc.apply(hdr, md);              /* S7-S11 */
                } else if ((md.win & (WIN_FALLBACK | WIN_PENDING)) == 0 && md.win[6:3] != 0 &&
                           (ig_intr_md.resubmit_flag == 0 || md.cas_ok == 1)) {
                    md.lane_run = 1;
                }
                if (md.lane_run == 1) {
                    lane_prep.apply(hdr, md);                 /* S7-S10 */
                    lanes.apply(hdr, md);                     /* S11-S18 */
                }
            }
            result_select.apply(hdr, md, ig_intr_md);
            agq_forward.apply(hdr, md, ig_intr_md, ig_dprsr_md, ig_tm_md);
            agq_counters.count(md.ctr);
        }
    }
}

control AgqEgress(inout egress_headers_t hdr,
                  inout egress_metadata_t md,
                  in egress_intrinsic_metadata_t eg_intr_md,
                  in egress_intrinsic_metadata_from_parser_t eg_prsr_md,
                  inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md,
                  inout egress_intrinsic_metadata_for_output_port_t eg_oport_md) {
    EgressRewrite() egress_rewrite;
    apply {
        egress_rewrite.apply(hdr, md, eg_intr_md, eg_dprsr_md);
    }
}

Pipeline(AgqIngressParser(), AgqIngress(), AgqIngressDeparser(),
         AgqEgressParser(), AgqEgress(), AgqEgressDeparser()) pipe;

Switch(pipe) main;
