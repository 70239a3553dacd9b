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

    /* PROTOCOL.md §9: one Counter per name (each counted at most once per
     * pass); the others live in the control that decides them. */
    Counter<bit<64>, bit<1>>(1, CounterType_t.PACKETS) agq_packets;
    Counter<bit<64>, bit<1>>(1, CounterType_t.PACKETS) parser_errors;

    JobLookup()    job_lookup;
    JobCheck()     job_check;
    BitmapCheck()  bitmap_check;
    SlotCounter()  slot_counter;
    RowOccupancy() row_occupancy_ctl;
    SlotWindow()   slot_window_ctl;
    WindowAlloc()  window_alloc;
    ResultSelect() result_select;
    LanePrep()     lane_prep;
    Lanes()        lanes;
    AgqForward()   agq_forward;
    Forwarding()   forwarding;

    apply {
        if (ig_prsr_md.parser_err != PARSER_ERROR_OK) {
            ig_dprsr_md.drop_ctl = 1;
            parser_errors.count(0);
        } else if (!hdr.agq.isValid()) {
            forwarding.apply(hdr, md, ig_intr_md, ig_dprsr_md, ig_tm_md);
        } else {
            /* Which pass (C++ AgqProgram::process): original, resubmitted
             * (pass 2), or a Tofino-only recirculated retry. */
            md.in_port = ig_intr_md.ingress_port;
            if (hdr.recirc.isValid()) {
                md.in_port = hdr.recirc.in_port;
                md.realloc = hdr.recirc.realloc;
                md.reread = hdr.recirc.reread;
                md.seen = hdr.recirc.seen;
                md.complete = hdr.recirc.complete;
                hdr.recirc.setInvalid();
            } else if (ig_intr_md.resubmit_flag == 0) {
                agq_packets.count(0);
            }
            job_lookup.apply(hdr, md);                          /* stages 0-2 */
            job_check.apply(hdr, md);                           /* stage 1 */
            if (md.data_ok == 1) {
                if (ig_intr_md.resubmit_flag == 1) {
                    md.first = 1;                               /* first_pass2 */
                    md.complete = md.resub.complete;
                } else if (md.realloc == 1) {
                    md.first = 1;                               /* counted; pass 1 again */
                } else if (md.reread == 0) {
                    bitmap_check.apply(md);                     /* stages 2-3 */
                    slot_counter.apply(hdr, md);                /* stage 4 */
                }
                /* slot_window_merge operand (one call site, as the C++):
                 * pass 1 PENDING, else OVERFLOW for a new clipped contribution. */
                if (md.first == 1) {
                    md.win_operand = WIN_PENDING;
                } else if (md.seen == 0 && (hdr.agq.flags & AGQ_FLAG_OVERFLOW) != 0) {
                    md.win_operand = WIN_OVERFLOW;
                }
                if (ig_intr_md.resubmit_flag == 1 || md.first == 1) {
                    row_occupancy_ctl.apply(md, ig_intr_md);    /* stage 5 */
                }
                slot_window_ctl.apply(md, ig_intr_md);          /* stage 6 */
                if (ig_intr_md.resubmit_flag == 0 && md.first == 1) {
                    window_alloc.apply(hdr, md);                /* stages 7-11 */
                    if (md.old_hit == 1 && md.realloc == 0) {
                        md.lane_run = 1;                        /* zero the released window */
                        md.lane_clear = 1;
                    }
                }
                result_select.apply(md, ig_intr_md);            /* stage 7 */
                if (md.lane_run == 1) {
                    lane_prep.apply(hdr, md);                   /* stages 7-9 */
                    lanes.apply(hdr, md);                       /* stages 10-17 */
                }
            }
            agq_forward.apply(hdr, md, ig_intr_md, ig_dprsr_md, ig_tm_md);
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
