/* Step 1 (PROTOCOL.md §4): job_t and worker_t, the admission checks and the
 * register indices. Nothing of any job is touched before these pass, and a
 * job can only index its own rows and slots: slot_idx = slot_base + slot with
 * slot < slots, row_idx = row_base + (slot >> row_shift) with
 * slots_per_row = 2^row_shift and rows = slots / slots_per_row.
 *
 * Stage 0: job_t, worker_t (keys are packet fields).
 * Stage 1: checks (gateways), slot_idx, slot_row_t, req_units.
 * Stage 2: row_idx. */

control JobLookup(inout ingress_headers_t hdr,
                  inout ingress_metadata_t md,
                  in ingress_intrinsic_metadata_t ig_intr_md) {

    action job(bit<8> num_workers, bit<16> slots, slot_idx_t slot_base,
               row_idx_t row_base, bit<4> row_shift, bit<8> guard,
               bit<4> w_min_units, bit<4> max_units, bit<16> mcast_grp,
               bit<1> deliver_ps, PortId_t ps_port, bit<32> ps_ipv4, bit<48> ps_mac) {
        md.job_hit = 1;
        md.job_n = num_workers;
        md.job_slots = slots;
        md.slot_base = slot_base;
        md.row_base = row_base;
        md.row_shift = row_shift;
        md.guard = guard;
        md.w_min_units = w_min_units;
        md.max_units = max_units;
        md.mcast_grp = mcast_grp;
        md.deliver_ps = deliver_ps;
        md.ps_port = ps_port;
        md.ps_ipv4 = ps_ipv4;
        md.ps_mac = ps_mac;
    }

    table job_t {
        key = { hdr.agq.job_id : exact; }
        actions = { job; @defaultonly NoAction; }
        const default_action = NoAction;
        size = AGQ_MAX_JOBS;
    }

    action worker(bit<32> worker_bit, PortId_t port, bit<32> ipv4, bit<48> mac) {
        md.worker_hit = 1;
        md.w_bit = worker_bit;
        md.w_port = port;
        md.w_ipv4 = ipv4;
        md.w_mac = mac;
    }

    table worker_t {
        key = {
            hdr.agq.job_id    : exact;
            hdr.agq.worker_id : exact;
        }
        actions = { worker; @defaultonly NoAction; }
        const default_action = NoAction;
        size = AGQ_MAX_JOBS * 32;
    }

    /* slot >> row_shift: one action per constant shift (Tofino shifts are
     * constants). Entries generated with the other constant tables. */
#include "generated/slot_row_t.p4"

    apply {
        job_t.apply();
        worker_t.apply();
        md.v = hdr.agq.flags[0:0];
        md.guard3 = md.guard[2:0];
        md.r_units = hdr.agq.req_width[5:2];
        md.req_units = min(hdr.agq.req_width[5:2], md.max_units);   /* min(R, max_width) / 4 */
        md.req_units_m1 = (bit<3>)(md.req_units - 1);

        md.slot_idx = md.slot_base + hdr.agq.slot;
        slot_row_t.apply();
        md.row_idx = md.row_base + md.row_off;
    }
}

/* The admission verdict, kept apart so the top control reads like §4 step 1. */
control JobCheck(inout ingress_headers_t hdr,
                 inout ingress_metadata_t md,
                 in ingress_intrinsic_metadata_t ig_intr_md) {
    apply {
        if (md.job_hit == 0) {
            md.verdict = V_DROP; md.ctr = C_DROPS_UNKNOWN_JOB;
        } else if (hdr.agq.type == AGQ_TYPE_PS_RESULT) {
            /* From the job's PS only. */
            if (ig_intr_md.ingress_port != md.ps_port) {
                md.verdict = V_DROP; md.ctr = C_DROPS_BAD_WORKER;
            } else if ((hdr.agq.flags & AGQ_FLAG_RETRANSMIT) != 0) {
                /* The PS answers one worker's retransmission: unicast. */
                md.verdict = V_PS_RESULT_UNICAST; md.ctr = C_AGQ_PS_RESULTS;
            } else {
                md.verdict = V_PS_RESULT; md.ctr = C_AGQ_PS_RESULTS;
            }
        } else if (hdr.agq.type != AGQ_TYPE_DATA || hdr.agq.ver != AGQ_VERSION) {
            md.verdict = V_DROP; md.ctr = C_DROPS_BAD_WORKER;
        } else if (md.worker_hit == 0 || ig_intr_md.ingress_port != md.w_port ||
                   hdr.ipv4.src_addr != md.w_ipv4 || hdr.agq.num_workers != md.job_n) {
            md.verdict = V_DROP; md.ctr = C_DROPS_BAD_WORKER;
        } else if (hdr.agq.slot >= md.job_slots) {
            md.verdict = V_DROP; md.ctr = C_DROPS_BAD_SLOT;
        } else if (hdr.agq.req_width[1:0] != 0 || hdr.agq.req_width < 4 ||
                   hdr.agq.req_width > 32) {
            md.verdict = V_DROP; md.ctr = C_DROPS_BAD_WIDTH;
        }
        /* else: verdict stays V_NONE until result_select decides. */
    }
}
