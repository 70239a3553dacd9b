/* Egress, once per replica (PROTOCOL.md §4 step 7, §7): align the result
 * window and rewrite the destination of each replica.
 *
 *   S0 extract_t(win_end)      lane_k >>= 4(8 - win_end): the window
 *                              right-aligned (generated, one action per shift)
 *      egress_worker_t(job_id, egress_rid)  destination MAC, IPv4 and
 *                              worker_id (= rid) of a multicast replica
 *   S1 lane_k &= result_mask  (low W bits, grant_t, bridged)
 * The IPv4 checksum is recomputed by the egress deparser. */

control EgressRewrite(inout egress_headers_t hdr,
                      inout egress_metadata_t md,
                      in egress_intrinsic_metadata_t eg_intr_md,
                      inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {

#include "generated/extract_t.p4"

#define LANE_RES_MASK(L) hdr.agq.lane##L = hdr.agq.lane##L & hdr.bridge.result_mask;
    action lanes_res_mask() { AGQ_LANES_FOR_EACH(LANE_RES_MASK) }

    /* The C++ pipeline's egress_worker_t: (job_id, rid = worker_id) -> the
     * replica's destination; worker_id = rid. */
    action set_worker(bit<48> mac, bit<32> ipv4) {
        hdr.ethernet.dst_addr = mac;
        hdr.ipv4.dst_addr = ipv4;
        hdr.agq.worker_id = eg_intr_md.egress_rid[7:0];
    }

    table egress_worker_t {
        key = {
            hdr.agq.job_id        : exact;
            eg_intr_md.egress_rid : exact;
        }
        actions = { set_worker; @defaultonly NoAction; }
        const default_action = NoAction;
        size = AGQ_MAX_JOBS * 32;
    }

    apply {
        if (hdr.agq.isValid()) {
            if (hdr.bridge.kind == BRIDGE_RESULT_MCAST || hdr.bridge.kind == BRIDGE_AGQ_MCAST) {
                egress_worker_t.apply();
            }
            if (hdr.bridge.kind == BRIDGE_RESULT_MCAST || hdr.bridge.kind == BRIDGE_RESULT_UCAST) {
                extract_t.apply();
                lanes_res_mask();
            }
        }
    }
}
