/* agq-switch's agq pipeline (docs/PROTOCOL.md, docs/PIPELINE.md) for the
 * Tofino native architectures: Tofino 2 (t2na) with 32 lanes per pass and
 * Tofino 1 (tna) with the 16-lane profile (PROTOCOL.md §10), plus one
 * resubmitted pass for the first contribution of a sequence. Both targets
 * compile from this one text (AGQ_LANES follows __TARGET_TOFINO__).
 * Stage map and compiled resources: docs/PIPELINE.md. Register, table and
 * action names are the C++ pipeline's (switch/pipeline/agq/). Constant
 * tables: p4src/agq/generated/, written by p4src/gen/gen_agq_tables (never
 * edit them by hand).
 *
 *   bf-p4c --target tofino2 --arch t2na --no-clot -I p4src/agq -o build/p4/agq-t2 p4src/agq/agq.p4
 *   (no CLOTs: bf-p4c 9.13.4 leaves the egress CLOTs without length or tag;
 *   placement, stages, resources: docs/PIPELINE.md "Stage map")
 *   bf-p4c --target tofino  --arch tna  -I p4src/agq -o build/p4/agq-t1 p4src/agq/agq.p4
 */
#include <core.p4>
#if __TARGET_TOFINO__ == 1
#include <tna.p4>
#else
#include <t2na.p4>
#endif

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

/* PHV: the agq header bytes the ingress rewrites from different sources
 * (constants, metadata, the byte itself) each get an 8-bit container; a
 * shared 16/32-bit container would need more sources than one VLIW
 * instruction has. */
@pa_container_size("ingress", "hdr.agq.flags", 8)
@pa_container_size("ingress", "hdr.agq.width", 8)
@pa_container_size("ingress", "hdr.agq.pos", 8)
@pa_container_size("ingress", "hdr.agq.guard", 8)
@pa_container_size("egress", "hdr.agq.worker_id", 8)
#if __TARGET_TOFINO__ != 1
/* Tofino 2: the recirculation decode copies bit 0 of four header bytes into
 * these 1-bit fields in one action; packed into one container they would
 * need four different shifts ("PHV allocation creates an invalid container
 * action"). Each in its own container. (Tofino 1's allocation packs them
 * so that it works.) */
@pa_solitary("ingress", "md.realloc")
@pa_solitary("ingress", "md.reread")
@pa_solitary("ingress", "md.seen")
@pa_solitary("ingress", "md.complete")
#endif
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
    WindowRelease() window_release;
    WindowAlloc()  window_alloc;
    LaneClear()    lane_clear;
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
             * (pass 2), or a Tofino-only recirculated retry. Each metadata
             * field written once here (a second write would be a stage). */
            hdr.bridge.setValid();                 /* to the egress (not on a recirculation) */
            hdr.bridge.rewrite = 0;
            hdr.bridge.extract = 0;
            hdr.bridge.win = 0;
            if (hdr.recirc.isValid()) {
                md.in_port = (PortId_t)hdr.recirc.in_port;
                md.realloc = hdr.recirc.realloc[0:0];
                md.reread = hdr.recirc.reread[0:0];
                md.seen = hdr.recirc.seen[0:0];
                md.complete = hdr.recirc.complete[0:0];
                if (hdr.recirc.realloc == 1) {
                    md.count_new = 1;            /* counted; first again (slot_window: PENDING) */
                } else if (hdr.recirc.seen == 0 && (hdr.agq.flags & AGQ_FLAG_OVERFLOW) != 0) {
                    md.resub.window = WIN_OVERFLOW;  /* reread: merge the OVERFLOW again */
                }
                hdr.recirc.setInvalid();
            } else {
                md.in_port = ig_intr_md.ingress_port;
                if (ig_intr_md.resubmit_flag == 0) { agq_packets.count(0); }
            }
            job_lookup.apply(hdr, md, ig_intr_md);              /* stages 0-2 */
            job_check.apply(hdr, md, ig_intr_md);               /* stages 1-2: admit_t, md.go */
            /* The slot stages of an admitted DATA within its job's slots
             * (md.go, stage 2). Each step is its own top-level statement
             * guarded by md.go, not one block: on Tofino 1 (no long
             * branches) a statement after an if-block waits for the block's
             * last table, so one block would put agq_forward after the lanes
             * and the lanes after the allocation chain. The choices between
             * register actions are tables on (pass, v) — see each control. */
            if (md.count_it == 1 && md.slot_room != 0) {
                bitmap_check.apply(md);                         /* stages 2-3 */
            }
            if (md.go == 1) {
                row_occupancy_ctl.apply(md, ig_intr_md);        /* stages 3-4 */
            }
            if (md.go == 1 && md.count_it == 1) {
                slot_counter.apply(hdr, md);                    /* stage 4 */
            }
            /* stage 5: first / complete (pass 2: from the resubmit header) */
            if (md.go == 1 && ig_intr_md.resubmit_flag == 1) {
                md.first = 1;
                md.complete = md.resub.complete[0:0];
            }
            if (md.go == 1 && ig_intr_md.resubmit_flag == 0 && md.count_new == 1) {
                md.first = 1;
            }
            if (md.go == 1 && ig_intr_md.resubmit_flag == 0 &&
                (md.count_new == (bit<16>)md.job_n || md.count_old == md.job_n)) {
                md.complete = 1;
            }
            if (md.go == 1) {
                slot_window_ctl.apply(md, ig_intr_md);          /* stage 5 */
            }
            if (md.go == 1) {
                result_select.apply(md, ig_intr_md);            /* stage 6 */
            }
            /* stages 6-7: the lane operands — pass 1 of a first contribution:
             * the released window's keep mask (lane_clear); otherwise the
             * contribution truncated and aligned (or 0 for a resend) */
            if (md.go == 1 && ig_intr_md.resubmit_flag == 0 && md.count_new == 1) {
                window_release.apply(hdr, md);                  /* stage 6 */
            } else if (md.go == 1 && (md.win & (WIN_PENDING | WIN_FALLBACK)) == 0 &&
                       (ig_intr_md.resubmit_flag == 0 || md.cas_ok == 1)) {
                lane_prep.apply(hdr, md);                       /* stages 6-7 */
            }
            /* The verdict's forwarding first (stages 7-8): on Tofino 1 an
             * if-block (agq_forward_t's) is placed after every table before
             * it in program order, and nothing below feeds it. */
            agq_forward.apply(hdr, md, ig_intr_md, ig_dprsr_md, ig_tm_md);
            /* Then tables without gateways (keys carry the conditions), so
             * that they share stages 7-11. */
            lane_clear.apply(md, ig_intr_md);                   /* stage 7: zero the released window */
            lanes.apply(hdr, md);                               /* stages 8-11 (Tofino 2: 8-15) */
            window_alloc.apply(hdr, md, ig_intr_md);            /* stages 7-10 (pass 1 of a first) */
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
