/* Egress, once per replica (PROTOCOL.md §4 step 7, §7): align the result
 * window and rewrite the destination of each replica.
 *
 *   S0 extract_t(win_end)      lane_k >>= 4(8 - win_end): the window
 *                              right-aligned (generated, one action per shift)
 *      egress_rewrite_t(rid)   destination MAC, IPv4 and worker_id of this
 *                              replica (rid = eg_intr_md.egress_rid for
 *                              multicast, the bridged rid for unicast)
 *   S1 lane_k &= result_mask  (low W bits, grant_t, bridged)
 * The IPv4 checksum is recomputed by the egress deparser. */

control EgressRewrite(inout egress_headers_t hdr,
                      inout egress_metadata_t md,
                      in egress_intrinsic_metadata_t eg_intr_md,
                      inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {

#include "generated/extract_t.p4"

#define LANE_RES_MASK(L) hdr.agq.lane##L = hdr.agq.lane##L & hdr.bridge.result_mask;
    action lanes_res_mask() { AGQ_LANES_FOR_EACH(LANE_RES_MASK) }

    action rewrite(bit<48> dst_mac, bit<32> dst_ipv4, bit<8> worker_id) {
        hdr.ethernet.dst_addr = dst_mac;
        hdr.ipv4.dst_addr = dst_ipv4;
        hdr.agq.worker_id = worker_id;
    }

    table egress_rewrite_t {
        key = { md.rid : exact; }
        actions = { rewrite; @defaultonly NoAction; }
        const default_action = NoAction;
        size = AGQ_MAX_JOBS * 33;      /* every worker and the PS of every job */
    }

    apply {
        if (hdr.bridge.kind != BRIDGE_PLAIN && hdr.agq.isValid()) {
            if (eg_intr_md.egress_rid != 0) { md.rid = eg_intr_md.egress_rid; }
            else                            { md.rid = hdr.bridge.rid; }
            egress_rewrite_t.apply();
            if (hdr.bridge.kind == BRIDGE_RESULT) {
                extract_t.apply();
                lanes_res_mask();
            }
        }
    }
}
