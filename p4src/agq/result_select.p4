/* Step 7 (PROTOCOL.md §4, §7) for an admitted DATA packet: the C++ verdict
 * and pass decisions of Ingress::apply(), first_pass1() and first_pass2(),
 * with the counters the C++ counts there. Gateways on metadata (stage 6,
 * after slot_window). The traffic-manager settings of each verdict are
 * agq_forward_t (forwarding.p4, generated from the C++ table).
 *
 * Tofino-only retries (PROTOCOL.md §4 step 5): pass 2 whose CAS failed
 * recirculates with realloc (C++: resub.realloc, agq_cas_retries); a packet
 * that is not first and reads a PENDING window recirculates with reread. The
 * C++ passes of a packet are atomic, so software takes neither. */

control ResultSelect(inout ingress_metadata_t md,
                     in ingress_intrinsic_metadata_t ig_intr_md) {

    Counter<bit<64>, bit<1>>(1, CounterType_t.PACKETS) agq_first;
    Counter<bit<64>, bit<1>>(1, CounterType_t.PACKETS) agq_resubmits;
    Counter<bit<64>, bit<1>>(1, CounterType_t.PACKETS) agq_fallback;
    Counter<bit<64>, bit<1>>(1, CounterType_t.PACKETS) agq_fallback_data;
    Counter<bit<64>, bit<1>>(1, CounterType_t.PACKETS) agq_cas_retries;

    apply {
        md.verdict = V_DROP;
        if (ig_intr_md.resubmit_flag == 1) {                      /* first_pass2 */
            if (md.cas_ok == 0) {
                md.recirculate = 1;
                agq_cas_retries.count(0);
                agq_resubmits.count(0);
            } else if ((md.win & WIN_FALLBACK) != 0) {
                md.verdict = V_FALLBACK_DATA;
                agq_fallback.count(0);
                agq_fallback_data.count(0);
            } else {
                md.lane_run = 1;
                if (md.complete == 1) { md.verdict = V_RESULT; } else { md.verdict = V_ABSORB; }
            }
        } else if (md.first == 1) {                               /* first_pass1 */
            md.resubmit = 1;
            if (md.realloc == 0) { agq_first.count(0); }
            agq_resubmits.count(0);
        } else if ((md.win & WIN_PENDING) != 0) {                 /* Tofino only */
            md.recirculate = 1;
            agq_resubmits.count(0);
        } else if ((md.win & WIN_FALLBACK) != 0) {
            md.verdict = V_FALLBACK_DATA;
            agq_fallback_data.count(0);
        } else if (md.seen == 0) {
            md.lane_run = 1;
            if (md.complete == 1) { md.verdict = V_RESULT; } else { md.verdict = V_ABSORB; }
        } else if (md.complete == 1) {
            md.lane_run = 1;                                      /* add 0: read the kept result */
            md.verdict = V_RESEND;
        } else {
            md.verdict = V_DUPLICATE;
        }
    }
}
