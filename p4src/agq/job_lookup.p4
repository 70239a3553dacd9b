/* Step 1 (PROTOCOL.md §4): job_t and worker_t, the admission checks and the
 * register indices — C++ Ingress::validate() and stages 0-2 of
 * Ingress::apply(). Nothing of any job is touched before these pass, and a
 * job can only index its own rows and slots: slot_idx = slot_base + slot
 * with slot < slots, row_idx = row_base + (slot >> row_shift).
 *
 * Stage 0: job_t, worker_t, epoch_t (keys are packet fields); r_units.
 * Stage 1: admission gateways (md.adm), slot_idx, slot_room, slot_row_t,
 *          req_units = min(R/4, max_units).
 * Stage 2: row_idx; the slot range and the drop counters (JobCheck).
 * (docs/PIPELINE.md, stage map: the compiler's placement.) */

control JobLookup(inout ingress_headers_t hdr,
                  inout ingress_metadata_t md,
                  in ingress_intrinsic_metadata_t ig_intr_md) {

    action set_job(bit<8> num_workers, bit<8> guard, bit<8> max_units, bit<8> lanes,
                   bit<16> slots, slot_idx_t slot_base, row_idx_t row_base,
                   bit<8> row_shift, bit<1> deliver_ps, PortId_t ps_port, bit<32> ps_ipv4,
                   bit<48> ps_mac, MulticastGroupId_t mcast_grp) {
        /* The C++ JobAction also has job_index and w_min_units; the data plane
         * uses neither (grant_alloc_t decides W - g >= 2), so they are not
         * action data here (SRAM). */
        md.job_hit = 1;
        md.job_n = num_workers;
        md.guard = guard;
        md.max_units = max_units;
        md.job_lanes = lanes;
        md.job_slots = slots;
        md.slot_base = slot_base;
        md.row_base = row_base;
        md.row_shift = row_shift;
        md.deliver_ps = deliver_ps;
        md.ps_port = ps_port;
        md.ps_ipv4 = ps_ipv4;
        md.ps_mac = ps_mac;
        md.mcast_grp = mcast_grp;
        /* The admission compares as XORs with the packet, here (one ALU op
         * each): a gateway compares at most 4 bytes + 12 bits of PHV, so two
         * 32-bit fields cannot be compared in one (Tofino 1). */
        md.n_diff = num_workers ^ hdr.agq.num_workers;
        md.lanes_diff = lanes ^ hdr.agq.n_lanes;
        md.ps_ip_diff = ps_ipv4 ^ hdr.ipv4.src_addr;
        md.ps_port_diff = ps_port ^ ig_intr_md.ingress_port;
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
        md.w_ip_diff = ipv4 ^ hdr.ipv4.src_addr;
        md.w_port_diff = port ^ ig_intr_md.ingress_port;
    }
    action worker_miss() { md.worker_hit = 0; }

    table worker_t {
        key = {
            hdr.agq.job_id    : exact;
            hdr.agq.worker_id : exact;
        }
        actions = { set_worker; @defaultonly worker_miss; }
        const default_action = worker_miss();
        size = AGQ_MAX_WORKERS;
    }

    /* The switch's boot epoch (PROTOCOL.md §11): a keyless table whose default
     * action the control plane sets at start (setup_agq.py), as the software
     * switch draws its epoch at start. */
    action set_epoch(bit<16> epoch) { md.epoch = epoch; }
    table epoch_t {
        actions = { set_epoch; }
        default_action = set_epoch(0);
        size = 1;
    }

    /* slot >> row_shift: one action per constant shift (generated). */
#include "generated/slot_row_t.p4"

    /* Register indices are computed in actions: a RegisterAction index must
     * be a plain PHV field (an expression propagated into execute() is "too
     * complex"), written a stage before the SALU that uses it. */
    action slot_index() {
        md.slot_idx = md.slot_base + hdr.agq.slot;
        md.slot_room = md.job_slots |-| hdr.agq.slot;    /* 0 iff slot >= slots */
    }
    action row_index() { md.row_idx = md.row_base + md.row_off; }

    apply {
        job_t.apply();                                   /* stage 0 */
        worker_t.apply();
        epoch_t.apply();
        md.v = hdr.agq.flags[0:0];
        md.r_units = (bit<8>)hdr.agq.req_width[5:2];     /* R / 4: a constant slice */
        md.req_units = min(md.r_units, md.max_units);    /* stage 1: min(R / 4, max_units) */
        slot_index();
        slot_row_t.apply();
        row_index();                                     /* stage 2 */
    }
}

/* The C++ validate(), in its order: malformed, unknown job, lane profile,
 * bad worker, bad slot, bad width. Stage 1 decides the header checks into
 * md.adm and the identity checks into bad_wk / bad_ps (small gateways on the
 * XORs job_t / worker_t computed: the sender's port and IPv4, N); stage 2
 * adds the slot range (slot_room) and counts the drop reason (PROTOCOL.md
 * §9) in the C++ order. A recirculated retry passed them on its first pass
 * and arrives on the recirculation port: its identity is not checked again.
 * PS_RESULT that passes gets its verdict here (stateless, C++ apply()). The
 * caller runs the slot stages only for an admitted DATA. */
control JobCheck(inout ingress_headers_t hdr,
                 inout ingress_metadata_t md) {

    Counter<bit<64>, bit<1>>(1, CounterType_t.PACKETS) drops_agq_malformed;
    Counter<bit<64>, bit<1>>(1, CounterType_t.PACKETS) drops_agq_unknown_job;
    Counter<bit<64>, bit<1>>(1, CounterType_t.PACKETS) drops_agq_bad_worker;
    Counter<bit<64>, bit<1>>(1, CounterType_t.PACKETS) drops_agq_bad_slot;
    Counter<bit<64>, bit<1>>(1, CounterType_t.PACKETS) drops_agq_bad_width;
    Counter<bit<64>, bit<1>>(1, CounterType_t.PACKETS) agq_ps_results;

    apply {
        /* stage 1: the header */
        if (hdr.agq.ver != AGQ_VERSION || (hdr.agq.n_lanes != 32 && hdr.agq.n_lanes != 16) ||
            (hdr.agq.type != AGQ_TYPE_DATA && hdr.agq.type != AGQ_TYPE_PS_RESULT)) {
            md.adm = ADM_MALFORMED;
        } else if (md.job_hit == 0) {
            md.adm = ADM_UNKNOWN;
        } else if (md.lanes_diff != 0) {
            md.adm = ADM_MALFORMED;                   /* not the job's lane profile */
        } else if (hdr.agq.type == AGQ_TYPE_DATA &&
                   (hdr.agq.req_width[1:0] != 0 || hdr.agq.req_width < 4 || hdr.agq.req_width > 32)) {
            md.adm = ADM_BAD_WIDTH;                   /* counted after the identity and slot checks */
        }
        /* stage 1: the sender (a host cannot speak for another worker or job;
         * a PS_RESULT only from the job's PS, a unicast one for a real worker) */
        if (md.realloc == 0 && md.reread == 0) {
            if (md.worker_hit == 0 || md.w_port_diff != 0 || md.n_diff != 0) { md.bad_wk = 1; }
            if (md.w_ip_diff != 0) { md.bad_wk_ip = 1; }
        }
        if (md.ps_port_diff != 0 || ((hdr.agq.flags & AGQ_FLAG_RETRANSMIT) != 0 && md.worker_hit == 0)) {
            md.bad_ps = 1;
        }
        if (md.ps_ip_diff != 0) { md.bad_ps_ip = 1; }
        /* stage 2: the verdict and the counters, in the C++ order */
        md.verdict = V_DROP;
        if (md.adm == ADM_MALFORMED) {
            drops_agq_malformed.count(0);
        } else if (md.adm == ADM_UNKNOWN) {
            drops_agq_unknown_job.count(0);
        } else if (hdr.agq.type == AGQ_TYPE_DATA && (md.bad_wk == 1 || md.bad_wk_ip == 1)) {
            drops_agq_bad_worker.count(0);
        } else if (hdr.agq.type == AGQ_TYPE_PS_RESULT && (md.bad_ps == 1 || md.bad_ps_ip == 1)) {
            drops_agq_bad_worker.count(0);
        } else if (md.slot_room == 0) {
            drops_agq_bad_slot.count(0);
        } else if (md.adm == ADM_BAD_WIDTH) {
            drops_agq_bad_width.count(0);
        } else if (hdr.agq.type == AGQ_TYPE_PS_RESULT) {
            agq_ps_results.count(0);
            if ((hdr.agq.flags & AGQ_FLAG_RETRANSMIT) != 0) {
                md.verdict = V_PS_RESULT_UNICAST;
            } else {
                md.verdict = V_PS_RESULT;
            }
        }   /* else an admitted DATA: the slot stages run (agq.p4) */
    }
}
