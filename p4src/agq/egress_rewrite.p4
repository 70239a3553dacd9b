/* Egress, once per packet or replica (PROTOCOL.md §4 step 7, §7):
 *   E0  egress_worker_t(job_id, egress_rid)  (bridge.rewrite: a multicast
 *       replica) -> destination MAC, IPv4 and worker_id = rid — the C++
 *       AgqProgram::egress(); extract_t(bridge.win_pos, win_w) (bridge.extract: a
 *       RESULT) lane_k >>= 4(8 - end) — the C++ lanes(extract)
 *   E1  result_mask_t(bridge.win): lane_k &= low W bits (action data: the C++
 *       grant_t result mask of a window that exists)
 * The IPv4 checksum of a rewritten replica: egress deparser. */

control EgressRewrite(inout egress_headers_t hdr,
                      inout egress_metadata_t md,
                      in egress_intrinsic_metadata_t eg_intr_md,
                      inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {

#include "generated/extract_t.p4"
#include "generated/result_mask_t.p4"

    action set_worker(bit<48> mac, bit<32> ipv4) {
        hdr.ethernet.dst_addr = mac;
        hdr.ipv4.dst_addr = ipv4;
        hdr.agq.worker_id = eg_intr_md.egress_rid[7:0];
        md.ipv4_csum = 1;
    }

    table egress_worker_t {
        key = {
            hdr.agq.job_id        : exact;
            eg_intr_md.egress_rid : exact;
        }
        actions = { set_worker; @defaultonly NoAction; }
        const default_action = NoAction;
        size = AGQ_MAX_WORKERS;
    }

    apply {
        if (hdr.agq.isValid()) {
            /* C++ egress(): only a RESULT replica is rewritten. */
            if (hdr.bridge.rewrite == 1 && hdr.agq.type == AGQ_TYPE_RESULT) {
                egress_worker_t.apply();
            }
            if (hdr.bridge.extract == 1) {
                extract_t.apply();                  /* E0 */
                result_mask_t.apply();              /* E1 */
            }
        }
    }
}
