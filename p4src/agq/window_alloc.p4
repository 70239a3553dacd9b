/* Steps 4 and 5 (PROTOCOL.md §4): row_occupancy, slot_window and the
 * occupancy-aware window allocation of a first contribution.
 *
 * Pass 1, first contribution:
 *   S5  row_occupancy_read_v   occ = occupancy_v of the row
 *   S6  slot_window_merge_v    sets PENDING and returns the slot's previous
 *                              window of version v (the use before last, now
 *                              released)
 *   S7  unpack (old_pos, old_w)
 *   S8  window_t               its occupancy bits and ~cell mask (lanes clear it)
 *   S9  avail = occ & ~old_occ_mask
 *   S10 alloc_t(avail, R)      best-fit free run of W <= R units
 *   S11 grant_alloc_t(W, g)    W - g >= 2 ? (else FALLBACK)
 *   S12 fill the resubmit header (ResubmitMd)
 * Pass 2 (resubmitted):
 *   S5  row_occupancy_cas_v    old_occ -> new_occ; a concurrent change fails
 *                              it and the packet recirculates to pass 1
 *   S6  slot_window_write_v    only after a successful CAS, so a failed pass
 *                              never publishes a window it does not own
 * Other contributions: S6 slot_window_merge_v ORs this packet's OVERFLOW and
 * returns the window.
 *
 * row_occupancy: 4 register actions (read_v0/v1, cas_v0/v1); slot_window: 4
 * (upd_v0/v1, write_v0/v1). */

control RowOccupancy(inout ingress_metadata_t md,
                     in ingress_intrinsic_metadata_t ig_intr_md) {

    Register<agq_pair8_t, row_idx_t>(AGQ_ROWS, {0, 0}) row_occupancy;

    RegisterAction<agq_pair8_t, row_idx_t, bit<8>>(row_occupancy) row_occupancy_read_v0 = {
        void apply(inout agq_pair8_t o, out bit<8> rv) { rv = o.lo; }
    };
    RegisterAction<agq_pair8_t, row_idx_t, bit<8>>(row_occupancy) row_occupancy_read_v1 = {
        void apply(inout agq_pair8_t o, out bit<8> rv) { rv = o.hi; }
    };
    RegisterAction<agq_pair8_t, row_idx_t, bit<8>>(row_occupancy) row_occupancy_cas_v0 = {
        void apply(inout agq_pair8_t o, out bit<8> ok) {
            if (o.lo == md.resub.occ_old) { o.lo = md.resub.occ_new; ok = 1; } else { ok = 0; }
        }
    };
    RegisterAction<agq_pair8_t, row_idx_t, bit<8>>(row_occupancy) row_occupancy_cas_v1 = {
        void apply(inout agq_pair8_t o, out bit<8> ok) {
            if (o.hi == md.resub.occ_old) { o.hi = md.resub.occ_new; ok = 1; } else { ok = 0; }
        }
    };

    bit<8> ok = 0;
    apply {
        if (ig_intr_md.resubmit_flag == 1) {
            if (md.v == 0) { ok = row_occupancy_cas_v0.execute(md.row_idx); }
            else           { ok = row_occupancy_cas_v1.execute(md.row_idx); }
            md.cas_ok = ok[0:0];
        } else if (md.first == 1) {
            if (md.v == 0) { md.occ = row_occupancy_read_v0.execute(md.row_idx); }
            else           { md.occ = row_occupancy_read_v1.execute(md.row_idx); }
        }
    }
}

control SlotWindow(inout ingress_metadata_t md,
                   in ingress_intrinsic_metadata_t ig_intr_md) {

    Register<agq_pair16_t, slot_idx_t>(AGQ_SLOTS, {0, 0}) slot_window;

    RegisterAction<agq_pair16_t, slot_idx_t, bit<16>>(slot_window) slot_window_merge_v0 = {
        void apply(inout agq_pair16_t w, out bit<16> rv) { w.lo = w.lo | md.ovf_in; rv = w.lo; }
    };
    RegisterAction<agq_pair16_t, slot_idx_t, bit<16>>(slot_window) slot_window_merge_v1 = {
        void apply(inout agq_pair16_t w, out bit<16> rv) { w.hi = w.hi | md.ovf_in; rv = w.hi; }
    };
    RegisterAction<agq_pair16_t, slot_idx_t, bit<16>>(slot_window) slot_window_write_v0 = {
        void apply(inout agq_pair16_t w, out bit<16> rv) { w.lo = md.resub.window; rv = w.lo; }
    };
    RegisterAction<agq_pair16_t, slot_idx_t, bit<16>>(slot_window) slot_window_write_v1 = {
        void apply(inout agq_pair16_t w, out bit<16> rv) { w.hi = md.resub.window; rv = w.hi; }
    };

    apply {
        if (ig_intr_md.resubmit_flag == 1) {
            if (md.cas_ok == 1) {
                if (md.v == 0) { md.win = slot_window_write_v0.execute(md.slot_idx); }
                else           { md.win = slot_window_write_v1.execute(md.slot_idx); }
            }
        } else {
            if (md.v == 0) { md.win = slot_window_merge_v0.execute(md.slot_idx); }
            else           { md.win = slot_window_merge_v1.execute(md.slot_idx); }
        }
    }
}

/* S7..S11 of a first contribution's pass 1. The tables are generated from
 * the C++ pipeline's tables (p4src/gen/gen_agq_tables.cpp): window_t, alloc_t.
 * grant_alloc_t (a copy of grant_t: one apply per table) says whether the
 * new window leaves W - g >= 2 value bits; if not -> FALLBACK. */
control WindowAlloc(inout ingress_headers_t hdr,
                    inout ingress_metadata_t md) {

#include "generated/window_t.p4"
#include "generated/alloc_t.p4"
#include "generated/grant_alloc_t.p4"

    action fallback() {
        md.resub.window = WIN_FALLBACK;
        md.resub.occ_new = md.avail;
    }
    action grant() {
        md.resub.window = 4w0 ++ 5w0 ++ md.new_w ++ md.new_pos;
        md.resub.occ_new = md.avail | md.new_occ_mask;
    }

    apply {
        md.old_pos = md.win[2:0];                /* S7 */
        md.old_w = md.win[6:3];
        window_t.apply();                        /* S8: old window -> old_occ_mask, clear_mask */
        md.avail = md.occ & ~md.old_occ_mask;    /* S9 */
        alloc_t.apply();                         /* S10: new_pos, new_w, new_occ_mask */
        grant_alloc_t.apply();                   /* S11: alloc_ok = W - g >= 2 */
        md.resub.setValid();
        md.resub.occ_old = md.occ;
        md.resub.rtype = AGQ_RESUBMIT_ALLOC;
        md.resub.complete = 0;
        if (md.job_n == 1) { md.resub.complete = 1; }
        md.resub.realloc = 0;
        md.resub._pad = 0;
        if (md.alloc_ok == 0) { fallback(); } else { grant(); }   /* S12 */
        if ((hdr.agq.flags & AGQ_FLAG_OVERFLOW) != 0) {
            md.resub.window = md.resub.window | WIN_OVERFLOW;
        }
    }
}
