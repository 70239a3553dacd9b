/* Step 7 (PROTOCOL.md §4, §7): what a packet does next, from the slot state
 * the earlier stages returned. Pure gateways on metadata (no table lookups);
 * bf-p4c places them from S6 (after slot_window) and S10 (after alloc). The
 * traffic-manager settings for each verdict are in forwarding.p4 (AgqForward). */

control ResultSelect(inout ingress_headers_t hdr,
                     inout ingress_metadata_t md,
                     in ingress_intrinsic_metadata_t ig_intr_md) {
    apply {
        if (md.verdict != V_NONE) {
            /* V_DROP (admission) or V_PS_RESULT: decided by JobCheck. */
        } else if (ig_intr_md.resubmit_flag == 1) {
            if (md.cas_ok == 0) {
                md.verdict = V_RECIRCULATE; md.ctr = C_AGQ_CAS_RETRY;
                md.recirc_mark = AGQ_RECIRC_REALLOC;
            } else if ((md.resub.window & WIN_FALLBACK) != 0) {
                md.verdict = V_FALLBACK_DATA; md.ctr = C_AGQ_FALLBACK;
            } else if (md.resub.complete == 1) {
                if (md.deliver_ps == 1) { md.verdict = V_RESULT_PS; }
                else                    { md.verdict = V_RESULT_MCAST; }
                md.ctr = C_AGQ_RESULTS;
            } else {
                md.verdict = V_ABSORBED; md.ctr = C_AGQ_ABSORBED;
            }
        } else if (md.first == 1) {
            md.verdict = V_RESUBMIT; md.ctr = C_AGQ_RESUBMITS;
        } else if ((md.win & WIN_PENDING) != 0 && md.seen_bits == 0) {
            /* The window is being replaced (pass 2 of the first contribution
             * not yet done): come back after it. */
            md.verdict = V_RECIRCULATE; md.ctr = C_AGQ_CAS_RETRY;
            md.recirc_mark = AGQ_RECIRC_AGGREGATE;
        } else if ((md.win & WIN_FALLBACK) != 0) {
            md.verdict = V_FALLBACK_DATA; md.ctr = C_AGQ_FALLBACK_DATA;
        } else if (md.seen_bits != 0) {
            if (md.count == md.job_n) {
                md.verdict = V_RESULT_RESEND; md.ctr = C_AGQ_RESULT_RESENT;
            } else {
                md.verdict = V_DUPLICATE; md.ctr = C_AGQ_DUPLICATE;
            }
        } else if (md.complete == 1) {
            if (md.deliver_ps == 1) { md.verdict = V_RESULT_PS; }
            else                    { md.verdict = V_RESULT_MCAST; }
            md.ctr = C_AGQ_RESULTS;
        } else {
            md.verdict = V_ABSORBED; md.ctr = C_AGQ_ABSORBED;
        }
    }
}
