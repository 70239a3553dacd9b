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

    apply {
        /* ResultSelect's counters (C++ first_pass1 / first_pass2 / apply()) */
        if (md.resubmit == 1 || md.recirculate == 1) { agq_resubmits.count(0); }
        if (md.resubmit == 1 && md.realloc == 0) { agq_first.count(0); }
        if (md.recirculate == 1 && ig_intr_md.resubmit_flag == 1) { agq_cas_retries.count(0); }
        if (md.verdict == V_FALLBACK_DATA) {
            agq_fallback_data.count(0);
            if (ig_intr_md.resubmit_flag == 1) { agq_fallback.count(0); }
        }
        if (md.resubmit == 1) {
            ig_dprsr_md.resubmit_type = AGQ_RESUBMIT_TYPE;
        } else if (md.recirculate == 1) {
            hdr.bridge.setInvalid();
            hdr.recirc.setValid();
            hdr.recirc.complete = (bit<8>)md.complete;
            hdr.recirc.seen = (bit<8>)md.seen;
            if (ig_intr_md.resubmit_flag == 1) {     /* CAS lost: back to pass 1 */
                hdr.recirc.realloc = 1;
                hdr.recirc.reread = 0;
            } else {                                 /* PENDING window: read it again */
                hdr.recirc.realloc = 0;
                hdr.recirc.reread = 1;
            }
            hdr.recirc.in_port = (bit<16>)md.in_port;
            ig_tm_md.ucast_egress_port = AGQ_RECIRC_PORT;
            ig_tm_md.bypass_egress = 1;
        } else {
            if (md.verdict == V_RESULT || md.verdict == V_RESEND) {
                /* width, pos and bridge.win: result_t (lanes.p4, stage 6) */
                hdr.agq.guard = md.guard;
                /* flags = v | OVERFLOW: v is flags bit 0 already, so bits
                 * 7..1 get a constant (one deposit per case) */
                if ((md.win & WIN_OVERFLOW) != 0) {
                    hdr.agq.flags[7:1] = (AGQ_FLAG_OVERFLOW >> 1)[6:0];
                } else {
                    hdr.agq.flags[7:1] = 0;
                }
                hdr.bridge.extract = 1;
            } else if (md.verdict == V_FALLBACK_DATA) {
                hdr.agq.width = 0;
                hdr.agq.pos = 0;
                hdr.agq.guard = md.guard;
            } else if (md.verdict == V_PS_RESULT) {
                hdr.agq.flags = hdr.agq.flags & ~AGQ_FLAG_RETRANSMIT;
            }
            hdr.agq.epoch = md.epoch;          /* every frame the switch makes (PROTOCOL.md §11) */
            md.ipv4_csum = 1;
            agq_forward_t.apply();
            if (md.verdict == V_ABSORB) {
                agq_absorbed.count(0);
            } else if (md.verdict == V_DUPLICATE) {
                agq_duplicate.count(0);
            } else if (md.verdict == V_RESULT) {
                agq_results.count(0);
            } else if (md.verdict == V_RESEND) {
                agq_result_resent.count(0);
            }
        }
    }
}
