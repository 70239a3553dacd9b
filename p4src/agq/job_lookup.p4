/* Step 1 (PROTOCOL.md §4): job_t and worker_t, the admission checks and the
 * register indices — C++ Ingress::validate() and stages 0-2 of
 * Ingress::apply(). Nothing of any job is touched before these pass, and a
 * job can only index its own rows and slots: slot_idx = slot_base + slot
 * with slot < slots, row_idx = row_base + (slot >> row_shift).
 *
 * Stage 0: job_t, worker_t, epoch_t, hdr_t (keys are packet fields); r_units,
 *          min_units.
 * Stage 1: admission gateways (md.adm), slot_idx, slot_room, slot_row_t,
 *          req_units = min(R/4, max_units).
 * Stage 2: row_idx; the slot range and the drop counters (JobCheck).
 * (docs/PIPELINE.md, stage map: the compiler's placement.) */

control JobLookup(inout ingress_headers_t hdr,
                  inout ingress_metadata_t md,
                  in ingress_intrinsic_metadata_t ig_intr_md) {

    action set_job(bit<8> num_workers, bit<8> guard, bit<8> w_min, bit<8> max_units, bit<8> lanes,
                   bit<16> slots, slot_idx_t slot_base, row_idx_t row_base,
                   bit<8> row_shift, bit<1> deliver_ps, PortId_t ps_port, bit<32> ps_ipv4,
                   bit<48> ps_mac, MulticastGroupId_t mcast_grp) {
        /* The C++ JobAction also has job_index, which the data plane does not
         * use (SRAM). w_min (bits, 4 * w_min_units): the narrowest min_width a
         * DATA of the job may carry (PROTOCOL.md §1, g + 2 rounded up to a
         * unit); grant_alloc_t then needs only W >= min_width. */
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
        md.minw_short = w_min |-| hdr.agq.width;     /* 0 iff min_width >= w_min (hdr_t: a multiple of 4) */
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

    /* The header checks of C++ validate() in one ternary table on the packet
     * (PROTOCOL.md §1): version 1, n_lanes 16 or 32, a DATA or a PS_RESULT,
     * and for a DATA the request width R (4..32, a multiple of 4) and its
     * min_width M (the width byte: a multiple of 4, 4 <= M <= R; M >= g + 2
     * is admit_t's, md.minw_short from job_t). One table,
     * not gateways: the width compares become range matches on overlapping
     * slices of req_width that bf-p4c cannot lay out in one gateway ("partial
     * overlapping gateway fields", Tofino 1), and every gateway level costs
     * the admission a stage. First matching entry wins. */
    action hdr_class(bit<2> c) { md.hdr_class = c; }
    table hdr_t {
        key = {
            hdr.agq.ver       : exact;
            hdr.agq.type      : exact;
            hdr.agq.n_lanes   : exact;
            hdr.agq.req_width : ternary;
            hdr.agq.width     : ternary @name("min_width");
        }
        actions = { hdr_class; }
        const default_action = hdr_class(HDR_MALFORMED);
        size = 128;
        const entries = {
#include "generated/hdr_data.p4"
            AGQ_HDR_DATA_(16)
            AGQ_HDR_DATA_(32)
            (AGQ_VERSION, AGQ_TYPE_PS_RESULT, 16, _, _) : hdr_class(HDR_PS);
            (AGQ_VERSION, AGQ_TYPE_PS_RESULT, 32, _, _) : hdr_class(HDR_PS);
#undef AGQ_HDR_DATA_
        }
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
        hdr_t.apply();
        md.v = hdr.agq.flags[0:0];
        md.ovf = hdr.agq.flags[2:2];                     /* OVERFLOW: read from here on, so the
                                                          * output header may rewrite flags early */
        md.r_units = (bit<8>)hdr.agq.req_width[5:2];     /* R / 4: a constant slice */
        md.min_units = (bit<8>)hdr.agq.width[5:2];       /* DATA: min_width / 4 (min_width_t
                                                          * rejects one that is no multiple of 4) */
        md.req_units = min(md.r_units, md.max_units);    /* stage 1: min(R / 4, max_units) */
        slot_index();
        slot_row_t.apply();
        row_index();                                     /* stage 2 */
    }
}

/* The C++ validate(), in its order: malformed, unknown job, lane profile,
 * bad worker, bad slot, bad width — one ternary table (admit_t, stage 1) on
 * the stage-0 results: the header class (hdr_t), the job and worker hits and
 * the XORs job_t / worker_t computed with the packet (the sender's port and
 * IPv4, N, the lane profile). First matching entry wins, so the entries are
 * the C++ checks in the C++ order; a field "== 0" is a ternary match on all
 * its bits. A recirculated retry passed the identity checks on its first
 * pass and arrives on the recirculation port: not checked again. Stage 2
 * adds the slot range (slot_room) and counts the drop reason (PROTOCOL.md
 * §9); a PS_RESULT that passes gets its verdict there (stateless, C++
 * apply()); an admitted DATA sets md.go, which gates the slot stages
 * (agq.p4). Decision tables instead of if-chains: each level of nested
 * gateways would cost the slot path a stage (Tofino 1 has 12). */
control JobCheck(inout ingress_headers_t hdr,
                 inout ingress_metadata_t md,
                 in ingress_intrinsic_metadata_t ig_intr_md) {

    Counter<bit<64>, bit<1>>(1, CounterType_t.PACKETS) drops_agq_malformed;
    Counter<bit<64>, bit<1>>(1, CounterType_t.PACKETS) drops_agq_unknown_job;
    Counter<bit<64>, bit<1>>(1, CounterType_t.PACKETS) drops_agq_bad_worker;
    Counter<bit<64>, bit<1>>(1, CounterType_t.PACKETS) drops_agq_bad_slot;
    Counter<bit<64>, bit<1>>(1, CounterType_t.PACKETS) drops_agq_bad_width;
    Counter<bit<64>, bit<1>>(1, CounterType_t.PACKETS) agq_ps_results;

    /* slot_chk: the slot range applies (counted as bad_slot before bad width) */
    action adm_drop(bit<3> reason, bit<1> slot_chk) { md.adm = reason; md.slot_chk = slot_chk; }
    /* count_it: run slot_bitmap / slot_count (0: pass 2 of a first
     * contribution, or a recirculated retry: already counted) */
    action adm_data(bit<1> count_it) { md.adm = ADM_DATA; md.slot_chk = 1; md.count_it = count_it; }
    action adm_ps(bit<3> verdict) { md.adm = ADM_PS; md.slot_chk = 1; md.ps_verdict = verdict; }

    table admit_t {
        key = {
            md.hdr_class    : ternary;
            md.job_hit      : ternary;
            md.lanes_diff   : ternary;
            md.worker_hit   : ternary;
            md.w_port_diff  : ternary;
            md.n_diff       : ternary;
            md.w_ip_diff    : ternary;
            md.ps_port_diff : ternary;
            md.ps_ip_diff   : ternary;
            hdr.agq.flags   : ternary;
            md.realloc      : ternary;
            md.reread       : ternary;
            ig_intr_md.resubmit_flag : ternary;
            md.minw_short   : ternary;   /* 0: min_width >= w_min (job_t) */
        }
        actions = { adm_drop; adm_data; adm_ps; }
        const default_action = adm_drop(ADM_MALFORMED, 0);     /* not the job's lane profile */
        size = 16;
        const entries = {
            /* hdr_class  hit lanes_d wk  wport   n_diff  w_ip    ps_port ps_ip   flags              realloc reread resub minw */
            (HDR_MALFORMED, _, _,     _,  _,      _,      _,      _,      _,      _,                 _, _, _, _) : adm_drop(ADM_MALFORMED, 0);
            (_,           0,   _,     _,  _,      _,      _,      _,      _,      _,                 _, _, _, _) : adm_drop(ADM_UNKNOWN, 0);
            (HDR_DATA,    1,   0,     _,  _,      _,      _,      _,      _,      _,                 1, _, _, _) : adm_data(0);
            (HDR_DATA,    1,   0,     _,  _,      _,      _,      _,      _,      _,                 _, 1, _, _) : adm_data(0);
            (HDR_DATA,    1,   0,     1,  0,      0,      0,      _,      _,      _,                 0, 0, 1, _) : adm_data(0);
            (HDR_DATA,    1,   0,     1,  0,      0,      0,      _,      _,      _,                 0, 0, 0, 0) : adm_data(1);
            (HDR_DATA,    1,   0,     1,  0,      0,      0,      _,      _,      _,                 0, 0, _, _) : adm_drop(ADM_BAD_WIDTH, 1);   /* min_width < g + 2 */
            (HDR_DATA_BAD_WIDTH, 1, 0, 1, 0,      0,      0,      _,      _,      _,                 _, _, _, _) : adm_drop(ADM_BAD_WIDTH, 1);
            (HDR_DATA &&& HDR_DATA, 1, 0, _, _,   _,      _,      _,      _,      _,                 _, _, _, _) : adm_drop(ADM_BAD_WORKER, 0);
            (HDR_PS,      1,   0,     _,  _,      _,      _,      0,      0,      0 &&& AGQ_FLAG_RETRANSMIT, _, _, _, _) : adm_ps(V_PS_RESULT);
            (HDR_PS,      1,   0,     1,  _,      _,      _,      0,      0,      AGQ_FLAG_RETRANSMIT &&& AGQ_FLAG_RETRANSMIT, _, _, _, _) : adm_ps(V_PS_RESULT_UNICAST);
            (HDR_PS,      1,   0,     _,  _,      _,      _,      _,      _,      _,                 _, _, _, _) : adm_drop(ADM_BAD_WORKER, 0);
        }
    }

    /* Stage 2: the drop reason counted (one counter per table), the PS
     * verdict, md.go — tables on (adm, slot_room), no gateways (Tofino 1:
     * if-blocks run one after the other). slot_room == 0: the slot is out of
     * range, counted as bad_slot before bad width (C++ order). */
#define AGQ_COUNT_ACTION(C) action count_##C() { C.count(0); }
    AGQ_COUNT_ACTION(drops_agq_malformed)
    AGQ_COUNT_ACTION(drops_agq_unknown_job)
    AGQ_COUNT_ACTION(drops_agq_bad_worker)
    AGQ_COUNT_ACTION(drops_agq_bad_slot)
    AGQ_COUNT_ACTION(drops_agq_bad_width)
#undef AGQ_COUNT_ACTION
#define AGQ_ADM_COUNT(T, A, C) \
    table T { \
        key = { md.adm : exact; } \
        actions = { count_##C; @defaultonly NoAction; } \
        const default_action = NoAction; \
        size = 1; \
        const entries = { A : count_##C(); } \
    }
    AGQ_ADM_COUNT(malformed_t, ADM_MALFORMED, drops_agq_malformed)
    AGQ_ADM_COUNT(unknown_job_t, ADM_UNKNOWN, drops_agq_unknown_job)
    AGQ_ADM_COUNT(bad_worker_t, ADM_BAD_WORKER, drops_agq_bad_worker)
#undef AGQ_ADM_COUNT
    table bad_slot_t {
        key = { md.slot_chk : exact; md.slot_room : exact; }
        actions = { count_drops_agq_bad_slot; @defaultonly NoAction; }
        const default_action = NoAction;
        size = 1;
        const entries = { (1, 0) : count_drops_agq_bad_slot(); }
    }
    table bad_width_t {
        key = { md.adm : exact; md.slot_room : ternary; }
        actions = { count_drops_agq_bad_width; NoAction; }
        const default_action = NoAction;
        size = 2;
        const entries = {
            (ADM_BAD_WIDTH, 0) : NoAction();
            (ADM_BAD_WIDTH, _) : count_drops_agq_bad_width();
        }
    }
    action ps_result() {
        agq_ps_results.count(0);
        md.verdict = md.ps_verdict;
    }
    table ps_result_t {
        key = { md.adm : exact; md.slot_room : ternary; }
        actions = { ps_result; NoAction; }
        const default_action = NoAction;
        size = 2;
        const entries = {
            (ADM_PS, 0) : NoAction();
            (ADM_PS, _) : ps_result();
        }
    }
    action set_go() { md.go = 1; }
#if __TARGET_TOFINO__ != 1
    /* Tofino 2: beside slot_bitmap, as the slot chain needs (row_occupancy
     * one stage later); left to itself bf-p4c put it a stage later, and
     * every stage after it (19 of 20). */
    @stage(3)
#endif
    table go_t {
        key = { md.adm : exact; md.slot_room : ternary; }
        actions = { set_go; NoAction; }
        const default_action = NoAction;
        size = 2;
        const entries = {
            (ADM_DATA, 0) : NoAction();
            (ADM_DATA, _) : set_go();
        }
    }

    apply {
        admit_t.apply();                                     /* stage 1 */
        malformed_t.apply();                                 /* stage 2 */
        unknown_job_t.apply();
        bad_worker_t.apply();
        bad_slot_t.apply();
        bad_width_t.apply();
        ps_result_t.apply();
        go_t.apply();
    }
}
