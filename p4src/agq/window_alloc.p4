/* Steps 4 and 5 (PROTOCOL.md §4): row_occupancy, slot_window and the
 * occupancy-aware allocation of a first contribution — C++ first_pass1(),
 * first_pass2() and the slot_window step of Ingress::apply().
 *
 *   stage 3  row_occupancy   pass 1: row_occupancy_read_v   -> occ (every
 *                            admitted DATA reads it: a read changes nothing,
 *                            and "first" is not known before stage 5)
 *                            pass 2: row_occupancy_cas_v    old -> new
 *   stage 4  cas_ok = (the half before the CAS == resub.occ_old)
 *   stage 5  slot_window     pass 1 / others: slot_window_merge_v — the SALU
 *                            ORs PENDING when count_new == 1 (a first
 *                            contribution), else resub.window (OVERFLOW of a
 *                            new clipped contribution, or 0)
 *                            pass 2: slot_window_write_v(new window), only if the CAS held
 *   stage 6  window_t(old pos, w, FALLBACK): keep mask into the lanes, occ mask
 *   stage 7  avail = occ & ~old_occ_mask
 *   stage 8  alloc_t(avail, req_units)
 *   stage 9  grant_alloc_t(W, min_units): W >= min_width, else FALLBACK
 *   stage 10 the resubmit header (ResubmitMd)
 *
 * row_occupancy: 4 register actions (read_v0/v1, cas_v0/v1); slot_window: 4
 * (merge_v0/v1, write_v0/v1). */

control RowOccupancy(inout ingress_metadata_t md,
                     in ingress_intrinsic_metadata_t ig_intr_md) {

    Register<agq_pair8_t, row_idx_t>(AGQ_ROWS, {0, 0}) row_occupancy;

    RegisterAction<agq_pair8_t, row_idx_t, bit<8>>(row_occupancy) row_occupancy_read_v0 = {
        void apply(inout agq_pair8_t o, out bit<8> rv) { rv = o.lo; }
    };
    RegisterAction<agq_pair8_t, row_idx_t, bit<8>>(row_occupancy) row_occupancy_read_v1 = {
        void apply(inout agq_pair8_t o, out bit<8> rv) { rv = o.hi; }
    };
    /* Compare-and-set. The C++ action returns 1/0; a SALU returns a register
     * or PHV value, so this returns the half as it was and the next stage
     * tests it against the expected value (cas_ok): the same outcome. */
    RegisterAction<agq_pair8_t, row_idx_t, bit<8>>(row_occupancy) row_occupancy_cas_v0 = {
        void apply(inout agq_pair8_t o, out bit<8> before) {
            before = o.lo;
            if (o.lo == md.resub.occ_old) { o.lo = md.resub.occ_new; }
        }
    };
    RegisterAction<agq_pair8_t, row_idx_t, bit<8>>(row_occupancy) row_occupancy_cas_v1 = {
        void apply(inout agq_pair8_t o, out bit<8> before) {
            before = o.hi;
            if (o.hi == md.resub.occ_old) { o.hi = md.resub.occ_new; }
        }
    };

    action read_v0() { md.occ = row_occupancy_read_v0.execute(md.row_idx); }
    action read_v1() { md.occ = row_occupancy_read_v1.execute(md.row_idx); }
    action cas_v0() { md.cas_old = row_occupancy_cas_v0.execute(md.row_idx); }
    action cas_v1() { md.cas_old = row_occupancy_cas_v1.execute(md.row_idx); }
    /* (pass, v) -> the register action: a table, not nested gateways */
    table occ_t {
        key = {
            ig_intr_md.resubmit_flag : exact;
            md.v                     : exact;
        }
        actions = { read_v0; read_v1; cas_v0; cas_v1; @defaultonly NoAction; }
        const default_action = NoAction;   /* every (key) is an entry; a register action cannot be a default */
        size = 4;
        const entries = {
            (0, 0) : read_v0(); (0, 1) : read_v1();
            (1, 0) : cas_v0();  (1, 1) : cas_v1();
        }
    }

    apply {
        occ_t.apply();                                            /* stage 3 */
        if (ig_intr_md.resubmit_flag == 1 && md.cas_old == md.resub.occ_old) {
            md.cas_ok = 1;                                        /* stage 4 */
        }
    }
}

control SlotWindow(inout ingress_metadata_t md,
                   in ingress_intrinsic_metadata_t ig_intr_md) {

    Register<agq_pair16_t, slot_idx_t>(AGQ_SLOTS, {0, 0}) slot_window;

    /* C++ slot_window_merge(first ? PENDING : operand): the choice is made
     * inside the SALU (count_new == 1 is "first"), so no stage computes the
     * operand after slot_count. A stateful ALU has two PHV inputs shared by
     * all its register actions, each in its own half of the SALU's input
     * crossbar bytes: count_new (the condition) and resub.window, which is
     * both the merge operand (pass 1 / others: OVERFLOW or 0, written by
     * SlotCounter or the recirculation; the resubmit header is filled only
     * after this stage) and the written window (pass 2: as parsed). A third
     * field (a separate merge operand) is what bf-p4c refused for Tofino 1:
     * "not allocated in a valid region on the input xbar". */
    RegisterAction<agq_pair16_t, slot_idx_t, bit<16>>(slot_window) slot_window_merge_v0 = {
        void apply(inout agq_pair16_t w, out bit<16> rv) {
            if (md.count_new == 1) { w.lo = w.lo | WIN_PENDING; } else { w.lo = w.lo | md.resub.window; }
            rv = w.lo;
        }
    };
    RegisterAction<agq_pair16_t, slot_idx_t, bit<16>>(slot_window) slot_window_merge_v1 = {
        void apply(inout agq_pair16_t w, out bit<16> rv) {
            if (md.count_new == 1) { w.hi = w.hi | WIN_PENDING; } else { w.hi = w.hi | md.resub.window; }
            rv = w.hi;
        }
    };
    RegisterAction<agq_pair16_t, slot_idx_t, bit<16>>(slot_window) slot_window_write_v0 = {
        void apply(inout agq_pair16_t w, out bit<16> rv) { w.lo = md.resub.window; rv = md.resub.window; }
    };
    RegisterAction<agq_pair16_t, slot_idx_t, bit<16>>(slot_window) slot_window_write_v1 = {
        void apply(inout agq_pair16_t w, out bit<16> rv) { w.hi = md.resub.window; rv = md.resub.window; }
    };

    action merge_v0() { md.win = slot_window_merge_v0.execute(md.slot_idx); }
    action merge_v1() { md.win = slot_window_merge_v1.execute(md.slot_idx); }
    action write_v0() { md.win = slot_window_write_v0.execute(md.slot_idx); }
    action write_v1() { md.win = slot_window_write_v1.execute(md.slot_idx); }
    /* (pass, CAS held, v) -> the register action; pass 2 whose CAS failed
     * leaves the window alone (it recirculates). */
    table window_op_t {
        key = {
            ig_intr_md.resubmit_flag : exact;
            md.cas_ok                : exact;
            md.v                     : exact;
        }
        actions = { merge_v0; merge_v1; write_v0; write_v1; @defaultonly NoAction; }
        const default_action = NoAction;
        size = 8;
        const entries = {
            (0, 0, 0) : merge_v0(); (0, 0, 1) : merge_v1();
            (0, 1, 0) : merge_v0(); (0, 1, 1) : merge_v1();
            (1, 1, 0) : write_v0(); (1, 1, 1) : write_v1();
        }
    }

    apply {
        window_op_t.apply();                                      /* stage 5 */
    }
}

/* Pass 1 of a first contribution after slot_window: release the slot's
 * previous window of version v (every worker has its result, PROTOCOL §8),
 * choose the new one, fill the resubmit header. Tables generated from the
 * C++ (p4src/gen/gen_agq_tables.cpp): window_t, alloc_t, grant_alloc_t.
 * Two controls, applied as two separate steps of the ingress (agq.p4): the
 * lanes wait only for WindowRelease (window_t loads them with the keep mask
 * for lane_clear, stage 6), not for the allocation chain (stages 7-10). */
control WindowRelease(inout ingress_headers_t hdr,
                      inout ingress_metadata_t md) {
#include "generated/window_t.p4"
    apply {
        window_t.apply();                                    /* stage 6; w = 0 / FALLBACK miss: masks 0 */
    }
}

/* Stage 7: pass 1 of a first contribution that released a window zeroes it
 * in the lanes (lane_clear with window_t's keep mask), except on a realloc
 * retry (the window is already zeroed). A table, no gateway (see Lanes). */
control LaneClear(inout ingress_metadata_t md,
                  in ingress_intrinsic_metadata_t ig_intr_md) {
    action clear_lanes() {
        md.lane_run = 1;
        md.lane_clear = 1;
    }
    table lane_clear_t {
        key = {
            md.first                 : exact;
            ig_intr_md.resubmit_flag : exact;
            md.old_hit               : exact;
            md.realloc               : exact;
        }
        actions = { clear_lanes; @defaultonly NoAction; }
        const default_action = NoAction;
        size = 1;
        const entries = { (1, 0, 1, 0) : clear_lanes(); }
    }
    apply {
        lane_clear_t.apply();
    }
}

control WindowAlloc(inout ingress_headers_t hdr,
                    inout ingress_metadata_t md,
                    in ingress_intrinsic_metadata_t ig_intr_md) {

#include "generated/alloc_t.p4"
#include "generated/grant_alloc_t.p4"

    /* Each step an action of its own: one VLIW op per field per stage
     * (the compiler would otherwise fold avail into the OR of stage 10). */
    action release() { md.avail = md.occ & ~md.old_occ_mask; }
    action resub_common() {
        md.resub.setValid();
        md.resub.occ_old = md.occ;
        md.resub.complete = (bit<8>)md.complete;
        md.resub.realloc = 0;          /* a resubmit to pass 2 (C++: resub.realloc = false) */
        md.resub.reserved = 0;
    }
    action resub_grant(bit<16> flags) {
        resub_common();
        md.resub.occ_new = md.avail | md.new_occ_mask;
        md.resub.window = md.new_window | flags;        /* pack_window(pos, w, 0, ovf) */
    }
    action resub_fallback(bit<16> flags) {
        resub_common();
        md.resub.occ_new = md.avail;
        md.resub.window = WIN_FALLBACK | flags;         /* pack_window(0, 0, 1, ovf) */
    }

    /* (pass 1 of a first contribution, grant usable, OVERFLOW) -> the
     * resubmit header (C++ first_pass1) */
    table resub_t {
        key = {
            md.first                 : exact;
            ig_intr_md.resubmit_flag : exact;
            md.alloc_ok              : exact;
            md.ovf                   : exact;
        }
        actions = { resub_grant; resub_fallback; @defaultonly NoAction; }
        const default_action = NoAction;
        size = 4;
        const entries = {
            (1, 0, 1, 1) : resub_grant(WIN_OVERFLOW);
            (1, 0, 1, 0) : resub_grant(0);
            (1, 0, 0, 1) : resub_fallback(WIN_OVERFLOW);
            (1, 0, 0, 0) : resub_fallback(0);
        }
    }

    /* Applied to every agq packet without a gateway (see Lanes): release,
     * alloc_t and grant_alloc_t only compute metadata; resub_t hits only on
     * pass 1 of a first contribution. */
    apply {
        release();                                           /* stage 7 */
        alloc_t.apply();                                     /* stage 8 */
        grant_alloc_t.apply();                               /* stage 9 */
        resub_t.apply();                                     /* stage 10: the resubmit header */
    }
}
