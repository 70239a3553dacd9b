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

#ifndef FLOOD_GROUP
#define FLOOD_GROUP 0xFFFF
#endif
#ifndef AGQ_RECIRC_PORT
#define AGQ_RECIRC_PORT 6          /* Tofino 2 pipe 0 recirculation port; Tofino 1: 68 */
#endif
const bit<8> AGQ_RECIRC_REALLOC   = 0xA1;  /* agq.reserved[15:8] of a CAS retry (only from AGQ_RECIRC_PORT) */
const bit<8> AGQ_RECIRC_AGGREGATE = 0xA2;  /* ... of a contribution that found its window PENDING */

control Forwarding(inout ingress_headers_t hdr,
                   inout ingress_metadata_t md,
                   in ingress_intrinsic_metadata_t ig_intr_md,
                   inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                   inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {

    bool routed = false;

    action send(PortId_t port) {
        ig_tm_md.ucast_egress_port = port;
    }
    action flood() {
        ig_tm_md.mcast_grp_a = FLOOD_GROUP;
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
        size = 65536;
    }
    table dmac {
        key = { hdr.ethernet.dst_addr : exact; }
        actions = { send; flood; }
        const default_action = flood;
        size = 65536;
    }
    table smac {
        key = {
            hdr.ethernet.src_addr     : exact;
            ig_intr_md.ingress_port   : exact;
        }
        actions = { NoAction; learn; }
        const default_action = learn;
        size = 65536;
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
        hdr.bridge.kind = BRIDGE_PLAIN;
        hdr.bridge.rid = 0;
        if (hdr.arp.isValid() && hdr.arp.oper == 1 && arp_proxy.apply().hit) {
            /* answered */
        } else {
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

/* Traffic-manager settings and header fields of every agq verdict: the
 * C++ pipeline's agq_forward_t (drop_invalid, drop_absorbed, drop_duplicate,
 * result_multicast, result_to_ps, result_resend, fallback_to_ps,
 * ps_result_multicast, ps_result_unicast). Multicast replicas get their
 * destination in the egress (egress_worker_t); unicast packets here. */
control AgqForward(inout ingress_headers_t hdr,
                   inout ingress_metadata_t md,
                   in ingress_intrinsic_metadata_t ig_intr_md,
                   inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                   inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {

    action result_fields() {
        hdr.agq.type = AGQ_TYPE_RESULT;
        hdr.agq.width = (bit<8>)md.w << 2;
        hdr.agq.pos = (bit<8>)md.pos;
        hdr.agq.guard = md.guard;
        hdr.bridge.win_end = md.win_end;
        hdr.bridge.result_mask = md.grant_result_mask;
        hdr.udp.checksum = 0;
    }
    action set_dst(bit<48> mac, bit<32> ipv4) {
        hdr.ethernet.dst_addr = mac;
        hdr.ipv4.dst_addr = ipv4;
    }

    apply {
        hdr.bridge.setValid();
        hdr.bridge.kind = BRIDGE_PLAIN;
        hdr.bridge.rid = 0;
        hdr.bridge._pad = 0;
        if (md.verdict == V_RESUBMIT) {
            ig_dprsr_md.resubmit_type = AGQ_RESUBMIT_TYPE;    /* never with drop_ctl */
        } else if (md.verdict == V_RESULT_MCAST) {             /* result_multicast */
            result_fields();
            hdr.bridge.kind = BRIDGE_RESULT_MCAST;
            ig_tm_md.mcast_grp_a = md.mcast_grp;               /* replica rid = worker_id */
        } else if (md.verdict == V_RESULT_PS) {                /* result_to_ps */
            result_fields();
            hdr.bridge.kind = BRIDGE_RESULT_UCAST;
            set_dst(md.ps_mac, md.ps_ipv4);
            ig_tm_md.ucast_egress_port = md.ps_port;
        } else if (md.verdict == V_RESULT_RESEND) {            /* result_resend: back, addresses swapped */
            result_fields();
            hdr.agq.flags = hdr.agq.flags | AGQ_FLAG_RETRANSMIT;
            hdr.bridge.kind = BRIDGE_RESULT_UCAST;
            bit<48> mac = hdr.ethernet.dst_addr;
            hdr.ethernet.dst_addr = hdr.ethernet.src_addr;
            hdr.ethernet.src_addr = mac;
            bit<32> ip = hdr.ipv4.dst_addr;
            hdr.ipv4.dst_addr = hdr.ipv4.src_addr;
            hdr.ipv4.src_addr = ip;
            ig_tm_md.ucast_egress_port = ig_intr_md.ingress_port;
        } else if (md.verdict == V_FALLBACK_DATA) {            /* fallback_to_ps */
            hdr.agq.type = AGQ_TYPE_FALLBACK;
            hdr.bridge.kind = BRIDGE_AGQ_UCAST;
            set_dst(md.ps_mac, md.ps_ipv4);
            ig_tm_md.ucast_egress_port = md.ps_port;
        } else if (md.verdict == V_PS_RESULT) {                /* ps_result_multicast */
            hdr.agq.type = AGQ_TYPE_RESULT;
            hdr.agq.flags = hdr.agq.flags | AGQ_FLAG_FALLBACK;
            hdr.bridge.kind = BRIDGE_AGQ_MCAST;
            ig_tm_md.mcast_grp_a = md.mcast_grp;
        } else if (md.verdict == V_PS_RESULT_UNICAST) {        /* ps_result_unicast */
            hdr.agq.type = AGQ_TYPE_RESULT;
            hdr.agq.flags = hdr.agq.flags | AGQ_FLAG_FALLBACK;
            hdr.bridge.kind = BRIDGE_AGQ_UCAST;
            set_dst(md.w_mac, md.w_ipv4);
            ig_tm_md.ucast_egress_port = md.w_port;
        } else if (md.verdict == V_RECIRCULATE) {
            /* CAS failed (realloc) or the window was PENDING (re-aggregate):
             * the packet comes back on the recirculation port carrying its
             * count, and skips slot_bitmap/slot_count (already counted). */
            hdr.agq.reserved = md.recirc_mark ++ md.count;
            ig_tm_md.ucast_egress_port = AGQ_RECIRC_PORT;
        } else {
            ig_dprsr_md.drop_ctl = 1;          /* drop_invalid, drop_absorbed, drop_duplicate */
        }
        if (md.verdict == V_RESULT_MCAST || md.verdict == V_RESULT_PS ||
            md.verdict == V_RESULT_RESEND) {
            if ((md.win & WIN_OVERFLOW) != 0) {
                hdr.agq.flags = hdr.agq.flags | AGQ_FLAG_OVERFLOW;
            }
        }
    }
}
