/* Step 7 (PROTOCOL.md §4, §7) for an admitted DATA packet: the C++ verdict
 * and pass decisions of Ingress::apply(), first_pass1() and first_pass2(),
 * as one ternary table on the slot stages' results (stage 6, after
 * slot_window): first matching entry wins, the entries are the C++ if-chain
 * in its order. Its counters (agq_first, agq_resubmits, agq_fallback,
 * agq_fallback_data, agq_cas_retries) are counted from its outputs in
 * AgqForward (forwarding.p4), off the slot path. The traffic-manager
 * settings of each verdict are agq_forward_t (forwarding.p4, generated from
 * the C++ table).
 *
 * Tofino-only retries (PROTOCOL.md §4 step 5): pass 2 whose CAS failed
 * recirculates with realloc (C++: resub.realloc, agq_cas_retries); a packet
 * that is not first and reads a PENDING window recirculates with reread. The
 * C++ passes of a packet are atomic, so software takes neither. */

control ResultSelect(inout ingress_metadata_t md,
                     in ingress_intrinsic_metadata_t ig_intr_md) {

    action pass_resubmit() { md.resubmit = 1; }              /* first_pass1 */
    action pass_recirculate() { md.recirculate = 1; }        /* Tofino-only retry */
    action pass_verdict(bit<3> verdict, bit<1> lane_run) {
        md.verdict = verdict;
        md.lane_run = lane_run;                              /* add (or add 0: a resend) */
    }

    table verdict_t {
        key = {
            ig_intr_md.resubmit_flag : ternary;
            md.cas_ok                : ternary;
            md.first                 : ternary;
            md.win                   : ternary;   /* PENDING, FALLBACK bits */
            md.seen                  : ternary;
            md.complete              : ternary;
        }
        actions = { pass_resubmit; pass_recirculate; pass_verdict; }
        const default_action = pass_verdict(V_DROP, 0);
        size = 16;
        const entries = {
            /* pass 2 (first_pass2) */
            (1, 0, _, _, _, _) : pass_recirculate();                         /* CAS lost */
            (1, 1, _, WIN_FALLBACK &&& WIN_FALLBACK, _, _) : pass_verdict(V_FALLBACK_DATA, 0);
            (1, 1, _, _, _, 1) : pass_verdict(V_RESULT, 1);
            (1, 1, _, _, _, 0) : pass_verdict(V_ABSORB, 1);
            /* one pass, or pass 1 */
            (0, _, 1, _, _, _) : pass_resubmit();                            /* first_pass1 */
            (0, _, 0, WIN_PENDING &&& WIN_PENDING, _, _) : pass_recirculate();
            (0, _, 0, WIN_FALLBACK &&& WIN_FALLBACK, _, _) : pass_verdict(V_FALLBACK_DATA, 0);
            (0, _, 0, _, 0, 1) : pass_verdict(V_RESULT, 1);
            (0, _, 0, _, 0, 0) : pass_verdict(V_ABSORB, 1);
            (0, _, 0, _, 1, 1) : pass_verdict(V_RESEND, 1);                  /* add 0: the kept result */
            (0, _, 0, _, 1, 0) : pass_verdict(V_DUPLICATE, 0);
        }
    }

    apply {
        verdict_t.apply();                                   /* stage 6 */
    }
}
