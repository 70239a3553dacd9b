/* Step 1 (PROTOCOL.md §4): job_t and worker_t, the admission checks and the
 * register indices — C++ Ingress::validate() and stage 1 of Ingress::apply().
 * Nothing of any job is touched before these pass, and a job can only index
 * its own rows and slots: slot_idx = slot_base + slot with slot < slots,
 * row_idx = row_base + (slot >> row_shift).
 *
 * Stage 0: job_t, worker_t (keys are packet fields).
 * Stage 1: admission gateways, slot_idx, slot_row_t, req_units.
 * Stage 2: row_idx (docs/PIPELINE.md, stage map). */

control JobLookup(inout ingress_headers_t hdr,
                  inout ingress_metadata_t md) {

    action set_job(bit<16> job_index, bit<8> num_workers, bit<8> guard, bit<4> w_min_units,
                   bit<4> max_units, bit<16> slots, slot_idx_t slot_base, row_idx_t row_base,
                   bit<5> row_shift, bit<1> deliver_ps, PortId_t ps_port, bit<32> ps_ipv4,
                   bit<48> ps_mac, MulticastGroupId_t mcast_grp) {
        /* job_index and w_min_units are the C++ JobAction's; the data plane
         * uses neither (grant_t / grant_alloc_t decide W - g >= 2). */
        md.job_hit = 1;
        md.job_n = num_workers;
        md.guard = guard;
        md.max_units = max_units;
        md.job_slots = slots;
        md.slot_base = slot_base;
        md.row_base = row_base;
        md.row_shift = row_shift;
        md.deliver_ps = deliver_ps;
        md.ps_port = ps_port;
        md.ps_ipv4 = ps_ipv4;
        md.ps_mac = ps_mac;
        md.mcast_grp = mcast_grp;
    }
    action job_miss() { md.job_hit = 0; }

    table job_t {
        key = { hdr.agq.job_id : exact; }
        actions = { set_job; @defaultonly job_miss; }
        const default_action = job_miss();
        size = AGQ_MAX_JOBS;
    }

    action set_worker(bit<32> worker_bit, PortId_t port, bit<32> ipv4, bit<48> mac) {
        md.worker_hit = 1;
        md.w_bit = worker_bit;
        md.w_port = port;
        md.w_ipv4 = ipv4;
        md.w_mac = mac;
    }
    action worker_miss() { md.worker_hit = 0; }

    table worker_t {
        key = {
            hdr.agq.job_id    : exact;
            hdr.agq.worker_id : exact;
        }
        actions = { set_worker; @defaultonly worker_miss; }
        const default_action = worker_miss();
        size = AGQ_MAX_JOBS * 32;
    }

    /* slot >> row_shift: one action per constant shift (generated). */
#include "generated/slot_row_t.p4"

    apply {
        job_t.apply();
        worker_t.apply();
        md.v = hdr.agq.flags[0:0];
        md.guard3 = md.guard[2:0];
        md.r_units = hdr.agq.req_width[5:2];
        md.req_units = min(hdr.agq.req_width[5:2], md.max_units);   /* min(R / 4, max_units) */
        md.req_units_m1 = (bit<3>)(md.req_units - 1);
        md.slot_idx = md.slot_base + hdr.agq.slot;
        slot_row_t.apply();
        md.row_idx = md.row_base + md.row_off;
    }
}

/* The C++ validate(), in its order; sets md.verdict = V_DROP and counts the
 * drop reason (PROTOCOL.md §9) on the first failing check. PS_RESULT that
 * passes gets its verdict here (stateless, C++ apply()). */
control JobCheck(inout ingress_headers_t hdr,
                 inout ingress_metadata_t md) {

    Counter<bit<64>, bit<1>>(1, CounterType_t.PACKETS) drops_agq_malformed;
    Counter<bit<64>, bit<1>>(1, CounterType_t.PACKETS) drops_agq_unknown_job;
    Counter<bit<64>, bit<1>>(1, CounterType_t.PACKETS) drops_agq_bad_worker;
    Counter<bit<64>, bit<1>>(1, CounterType_t.PACKETS) drops_agq_bad_slot;
    Counter<bit<64>, bit<1>>(1, CounterType_t.PACKETS) drops_agq_bad_width;
    Counter<bit<64>, bit<1>>(1, CounterType_t.PACKETS) agq_ps_results;

    apply {
        md.verdict = V_DROP;
        if (hdr.agq.ver != AGQ_VERSION || hdr.agq.n_lanes != 32 ||
            (hdr.agq.type != AGQ_TYPE_DATA && hdr.agq.type != AGQ_TYPE_PS_RESULT)) {
            drops_agq_malformed.count(0);
        } else if (md.job_hit == 0) {
            drops_agq_unknown_job.count(0);
        } else if (hdr.agq.type == AGQ_TYPE_DATA &&
                   (md.worker_hit == 0 || md.w_port != md.in_port ||
                    md.w_ipv4 != hdr.ipv4.src_addr || hdr.agq.num_workers != md.job_n)) {
            /* A host cannot speak for another worker or another job. */
            drops_agq_bad_worker.count(0);
        } else if (hdr.agq.type == AGQ_TYPE_PS_RESULT &&
                   (md.in_port != md.ps_port || hdr.ipv4.src_addr != md.ps_ipv4 ||
                    ((hdr.agq.flags & AGQ_FLAG_RETRANSMIT) != 0 && md.worker_hit == 0))) {
            /* Only the job's PS; a unicast answer needs a real worker. */
            drops_agq_bad_worker.count(0);
        } else if (hdr.agq.slot >= md.job_slots) {
            drops_agq_bad_slot.count(0);
        } else if (hdr.agq.type == AGQ_TYPE_DATA &&
                   (hdr.agq.req_width[1:0] != 0 || hdr.agq.req_width < 4 || hdr.agq.req_width > 32)) {
            drops_agq_bad_width.count(0);
        } else if (hdr.agq.type == AGQ_TYPE_PS_RESULT) {
            agq_ps_results.count(0);
            if ((hdr.agq.flags & AGQ_FLAG_RETRANSMIT) != 0) {
                md.verdict = V_PS_RESULT_UNICAST;
            } else {
                md.verdict = V_PS_RESULT;
            }
        } else {
            md.data_ok = 1;           /* DATA admitted: the slot stages decide (ResultSelect) */
        }
    }
}
