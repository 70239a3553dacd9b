/* Ordinary ToR switching for traffic that is not aggregation traffic (the
 * software switch's pipeline/forwarding.hpp, same table names), and the
 * traffic-manager settings of each agq verdict.
 *
 *   ipv4_host  key ipv4.dst_addr (exact)       send(port) | NoAction
 *   dmac       key ethernet.dst_addr (exact)   send(port) | flood
 *   smac       key ethernet.src_addr, port     NoAction | learn (digest)
 *   arp_proxy  key arp.tpa (exact)             answer(mac) | NoAction
 *
 * Order: ARP request for a proxied address -> answered out of the ingress
 * port; IPv4 with a host route -> that port; else L2: flood (PRE group
 * FLOOD_GROUP, the ingress port pruned through level2_exclusion_id) or the
 * learned/static port; a destination behind the ingress port is dropped.
 * Stage 0/1 (keys are packet fields), in parallel with job_t/worker_t. */

control Forwarding(inout ingress_headers_t hdr,
                   inout ingress_metadata_t md,
                   in ingress_intrinsic_metadata_t ig_intr_md,
                   inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                   inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {

    bool routed = false;
    bool answered = false;

    action send(PortId_t port) {
        ig_tm_md.ucast_egress_port = port;
    }
    action flood() {
        /* Flood nodes have rid 0; L2 pruning applies to nodes whose rid equals
         * ig_tm_md.rid, with the prune mask of level2_exclusion_id (setup_agq.py:
         * L2 XID = port -> that port). */
        ig_tm_md.mcast_grp_a = FLOOD_GROUP;
        ig_tm_md.rid = 0;
        ig_tm_md.level2_exclusion_id = (L2ExclusionId_t)ig_intr_md.ingress_port;
    }
    action route(PortId_t port) {
        ig_tm_md.ucast_egress_port = port;
        routed = true;
    }
    action learn() {
        ig_dprsr_md.digest_type = SMAC_DIGEST_TYPE;
        md.learn_port = ig_intr_md.ingress_port;
    }
    action answer(bit<48> mac) {
        /* ARP reply from the switch, back out of the ingress port. */
        hdr.arp.oper = 2;
        hdr.arp.tha = hdr.arp.sha;
        hdr.arp.sha = mac;
        bit<32> tpa = hdr.arp.tpa;
        hdr.arp.tpa = hdr.arp.spa;
        hdr.arp.spa = tpa;
        hdr.ethernet.dst_addr = hdr.ethernet.src_addr;
        hdr.ethernet.src_addr = mac;
        ig_tm_md.ucast_egress_port = ig_intr_md.ingress_port;
    }

    table ipv4_host {
        key = { hdr.ipv4.dst_addr : exact; }
        actions = { route; @defaultonly NoAction; }
        const default_action = NoAction;
        size = FWD_TABLE_SIZE;
    }
    table dmac {
        key = { hdr.ethernet.dst_addr : exact; }
        actions = { send; flood; }
        const default_action = flood;
        size = FWD_TABLE_SIZE;
    }
    table smac {
        key = {
            hdr.ethernet.src_addr     : exact;
            ig_intr_md.ingress_port   : exact;
        }
        actions = { NoAction; learn; }
        const default_action = learn;
        size = FWD_TABLE_SIZE;
        idle_timeout = true;       /* ageing: the control plane removes idle entries */
    }
    table arp_proxy {
        key = { hdr.arp.tpa : exact; }
        actions = { answer; @defaultonly NoAction; }
        const default_action = NoAction;
        size = 4096;
    }

    apply {
        hdr.bridge.setValid();
        hdr.bridge.rewrite = 0;
        hdr.bridge.extract = 0;
        hdr.bridge.win = 0;
        if (hdr.arp.isValid() && hdr.arp.oper == 1) {
            if (arp_proxy.apply().hit) { answered = true; }
        }
        if (!answered) {
            smac.apply();
            if (hdr.ipv4.isValid()) { ipv4_host.apply(); }
            if (!routed) {
                if (hdr.ethernet.dst_addr[40:40] == 1) {
                    flood();                           /* broadcast / multicast */
                } else {
                    dmac.apply();
                    if (ig_tm_md.ucast_egress_port == ig_intr_md.ingress_port) {
                        ig_dprsr_md.drop_ctl = 1;      /* l2_same_port */
                    }
                }
            }
        }
    }
}

/* What an agq packet does at the end of the ingress — C++ Ingress::forward()
 * and the pass decisions of AgqProgram::process():
 *   - the header of what leaves (RESULT: width, pos, guard, flags = v |
 *     OVERFLOW; FALLBACK_DATA: width 0, pos 0, guard; PS_RESULT: RETRANSMIT
 *     cleared), then agq_forward_t(verdict, delivery) — generated from the C++
 *     table: port or PRE group, destination, type, added flags;
 *   - the per-verdict counters of forward() (results, result_resent,
 *     absorbed, duplicate);
 *   - pass 1 of a first contribution: resubmit (never with drop_ctl, whose
 *     bit 0 would cancel it);
 *   - a Tofino-only retry: the original packet, ResubmitMd prepended
 *     (hdr.recirc), to AGQ_RECIRC_PORT with bypass_egress.
 * RESULT lanes are extracted in the egress (bridge.extract). */
control AgqForward(inout ingress_headers_t hdr,
                   inout ingress_metadata_t md,
                   in ingress_intrinsic_metadata_t ig_intr_md,
                   inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                   inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {

    Counter<bit<64>, bit<1>>(1, CounterType_t.PACKETS) agq_results;
    Counter<bit<64>, bit<1>>(1, CounterType_t.PACKETS) agq_result_resent;
    Counter<bit<64>, bit<1>>(1, CounterType_t.PACKETS) agq_absorbed;
    Counter<bit<64>, bit<1>>(1, CounterType_t.PACKETS) agq_duplicate;
    /* ResultSelect's decisions, counted here (leaves: nothing waits for them) */
    Counter<bit<64>, bit<1>>(1, CounterType_t.PACKETS) agq_first;
    Counter<bit<64>, bit<1>>(1, CounterType_t.PACKETS) agq_resubmits;
    Counter<bit<64>, bit<1>>(1, CounterType_t.PACKETS) agq_fallback;
    Counter<bit<64>, bit<1>>(1, CounterType_t.PACKETS) agq_fallback_data;
    Counter<bit<64>, bit<1>>(1, CounterType_t.PACKETS) agq_cas_retries;

#include "generated/agq_forward_t.p4"

    /* Every step below is a table on the decision fields, applied without
     * a gateway: on Tofino 1 (no long branches) if-blocks run one after the
     * other, so an if-chain here would start only after the lanes. A miss
     * does nothing. */

    /* pass 1 of a first contribution: arm the resubmit */
    action arm_resubmit() { ig_dprsr_md.resubmit_type = AGQ_RESUBMIT_TYPE; }
    table resubmit_t {
        key = { md.resubmit : exact; }
        actions = { arm_resubmit; @defaultonly NoAction; }
        const default_action = NoAction;
        size = 1;
        const entries = { 1 : arm_resubmit(); }
    }

    /* a Tofino-only retry: CAS lost (pass 2) -> realloc; PENDING -> reread */
    action recirculate(bit<8> realloc, bit<8> reread) {
        hdr.bridge.setInvalid();
        hdr.recirc.setValid();
        hdr.recirc.complete = (bit<8>)md.complete;
        hdr.recirc.seen = (bit<8>)md.seen;
        hdr.recirc.realloc = realloc;
        hdr.recirc.reread = reread;
        hdr.recirc.in_port = (bit<16>)md.in_port;
        ig_tm_md.ucast_egress_port = AGQ_RECIRC_PORT;
        ig_tm_md.bypass_egress = 1;
    }
    table recirc_t {
        key = {
            md.recirculate           : exact;
            ig_intr_md.resubmit_flag : exact;
        }
        actions = { recirculate; @defaultonly NoAction; }
        const default_action = NoAction;
        size = 2;
        const entries = { (1, 1) : recirculate(1, 0); (1, 0) : recirculate(0, 1); }
    }

    /* the header of what leaves (C++ forward()): RESULT: guard, flags =
     * v | OVERFLOW (v is flags bit 0 already: bits 7..1 from action data),
     * the egress extracts the lanes; width, pos and bridge.win come from
     * result_t (lanes.p4). FALLBACK_DATA: width 0, pos 0, guard. PS_RESULT:
     * RETRANSMIT cleared. Every frame the switch makes: the epoch. */
    action out_result(bit<7> flags_hi) {
        hdr.agq.guard = md.guard;
        hdr.agq.flags[7:1] = flags_hi;
        hdr.bridge.extract = 1;
        hdr.agq.epoch = md.epoch;
        md.ipv4_csum = 1;
    }
    action out_fallback() {
        hdr.agq.width = 0;
        hdr.agq.pos = 0;
        hdr.agq.guard = md.guard;
        hdr.agq.epoch = md.epoch;
        md.ipv4_csum = 1;
    }
    action out_ps() {
        hdr.agq.flags = hdr.agq.flags & ~AGQ_FLAG_RETRANSMIT;
        hdr.agq.epoch = md.epoch;
        md.ipv4_csum = 1;
    }
    action out_other() {
        hdr.agq.epoch = md.epoch;
        md.ipv4_csum = 1;
    }
    table out_hdr_t {
        key = {
            md.resubmit    : ternary;
            md.recirculate : ternary;
            md.verdict     : ternary;
            md.win         : ternary;   /* OVERFLOW */
        }
        actions = { out_result; out_fallback; out_ps; out_other; @defaultonly NoAction; }
        const default_action = NoAction;
        size = 8;
        const entries = {
            (0, 0, V_RESULT, WIN_OVERFLOW &&& WIN_OVERFLOW) : out_result((AGQ_FLAG_OVERFLOW >> 1)[6:0]);
            (0, 0, V_RESULT, _)                             : out_result(0);
            (0, 0, V_RESEND, WIN_OVERFLOW &&& WIN_OVERFLOW) : out_result((AGQ_FLAG_OVERFLOW >> 1)[6:0]);
            (0, 0, V_RESEND, _)                             : out_result(0);
            (0, 0, V_FALLBACK_DATA, _)                      : out_fallback();
            (0, 0, V_PS_RESULT, _)                          : out_ps();
            (0, 0, _, _)                                    : out_other();
        }
    }

    /* One counter per table (a Tofino table addresses one counter). */
#define AGQ_COUNT_ACTION(C) action count_##C() { C.count(0); }
    AGQ_COUNT_ACTION(agq_resubmits)
    AGQ_COUNT_ACTION(agq_first)
    AGQ_COUNT_ACTION(agq_cas_retries)
    AGQ_COUNT_ACTION(agq_fallback_data)
    AGQ_COUNT_ACTION(agq_fallback)
    AGQ_COUNT_ACTION(agq_absorbed)
    AGQ_COUNT_ACTION(agq_duplicate)
    AGQ_COUNT_ACTION(agq_results)
    AGQ_COUNT_ACTION(agq_result_resent)
#undef AGQ_COUNT_ACTION
    table resubmits_t {          /* C++ first_pass1 / first_pass2 / the PENDING retry */
        key = { md.resubmit : ternary; md.recirculate : ternary; }
        actions = { count_agq_resubmits; @defaultonly NoAction; }
        const default_action = NoAction;
        size = 2;
        const entries = { (1, _) : count_agq_resubmits(); (_, 1) : count_agq_resubmits(); }
    }
    table first_t {
        key = { md.resubmit : exact; md.realloc : exact; }
        actions = { count_agq_first; @defaultonly NoAction; }
        const default_action = NoAction;
        size = 1;
        const entries = { (1, 0) : count_agq_first(); }
    }
    table cas_retries_t {
        key = { md.recirculate : exact; ig_intr_md.resubmit_flag : exact; }
        actions = { count_agq_cas_retries; @defaultonly NoAction; }
        const default_action = NoAction;
        size = 1;
        const entries = { (1, 1) : count_agq_cas_retries(); }
    }
    table fallback_data_t {
        key = { md.verdict : exact; }
        actions = { count_agq_fallback_data; @defaultonly NoAction; }
        const default_action = NoAction;
        size = 1;
        const entries = { V_FALLBACK_DATA : count_agq_fallback_data(); }
    }
    table fallback_t {           /* pass 2 found no window (C++ first_pass2) */
        key = { md.verdict : exact; ig_intr_md.resubmit_flag : exact; }
        actions = { count_agq_fallback; @defaultonly NoAction; }
        const default_action = NoAction;
        size = 1;
        const entries = { (V_FALLBACK_DATA, 1) : count_agq_fallback(); }
    }
    /* forward()'s counters; a resubmitted / recirculated packet has V_DROP */
#define AGQ_VERDICT_COUNT(T, V, C) \
    table T { \
        key = { md.verdict : exact; } \
        actions = { count_##C; @defaultonly NoAction; } \
        const default_action = NoAction; \
        size = 1; \
        const entries = { V : count_##C(); } \
    }
    AGQ_VERDICT_COUNT(absorbed_t, V_ABSORB, agq_absorbed)
    AGQ_VERDICT_COUNT(duplicate_t, V_DUPLICATE, agq_duplicate)
    AGQ_VERDICT_COUNT(results_t, V_RESULT, agq_results)
    AGQ_VERDICT_COUNT(result_resent_t, V_RESEND, agq_result_resent)
#undef AGQ_VERDICT_COUNT

    apply {
        out_hdr_t.apply();
        if (md.resubmit == 0 && md.recirculate == 0) {
            agq_forward_t.apply();        /* TM settings of the verdict (generated) */
        }
        resubmit_t.apply();
        recirc_t.apply();
        resubmits_t.apply();
        first_t.apply();
        cas_retries_t.apply();
        fallback_data_t.apply();
        fallback_t.apply();
        absorbed_t.apply();
        duplicate_t.apply();
        results_t.apply();
        result_resent_t.apply();
    }
}
