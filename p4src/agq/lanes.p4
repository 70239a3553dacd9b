/* Step 6 (PROTOCOL.md §4): the lane processors.
 *
 * LanePrep, contributions (the C++ pipeline's order, tables generated from it):
 *   S7  unpack the window: pos, w, win_end = pos + w
 *   S8  trunc_t(R, w):     lane_k >>= 4d, d = max(R/4 - w, 0) (one action per amount)
 *       grant_t(w, g):     value_mask = low W - g bits, result_mask = low W bits
 *   S9  lane_k &= value_mask  (a worker can never reach a neighbour's units)
 *   S10 align_t(win_end):  lane_k <<= 4(8 - win_end), into the window
 * A first contribution's pass 1 instead loads lane_k = ~cells of the released
 * window (clear_mask, window_t); a resend of a completed result loads 0 (add 0
 * returns the kept result).
 *
 * Lanes (S11..S18): 32 paired registers lane00..lane31 (lo = version 0, hi =
 * version 1) indexed by row_idx, 4 per stage (4 SALUs per stage). Each lane is
 * one instance of LaneProcessor with the C++ register actions lane_add_v0/_v1
 * (half += lane, returns the new half) and lane_clear_v0/_v1 (half &= lane).
 * The new cell goes back into lane_k; the egress extracts the window
 * (extract_t, egress_rewrite.p4). */

#define AGQ_LANES_FOR_EACH(M) \
    M(00) M(01) M(02) M(03) M(04) M(05) M(06) M(07) \
    M(08) M(09) M(10) M(11) M(12) M(13) M(14) M(15) \
    M(16) M(17) M(18) M(19) M(20) M(21) M(22) M(23) \
    M(24) M(25) M(26) M(27) M(28) M(29) M(30) M(31)

control LanePrep(inout ingress_headers_t hdr,
                 inout ingress_metadata_t md) {

#include "generated/trunc_t.p4"
#include "generated/grant_t.p4"
#include "generated/align_t.p4"

#define LANE_MASK(L) hdr.agq.lane##L = hdr.agq.lane##L & md.grant_value_mask;
#define LANE_LOAD_CLEAR(L) hdr.agq.lane##L = md.clear_mask;
#define LANE_LOAD_ZERO(L) hdr.agq.lane##L = 0;

    action lanes_mask()       { AGQ_LANES_FOR_EACH(LANE_MASK) }
    action lanes_load_clear() { AGQ_LANES_FOR_EACH(LANE_LOAD_CLEAR) }
    action lanes_load_zero()  { AGQ_LANES_FOR_EACH(LANE_LOAD_ZERO) }

    apply {
        md.pos = md.win[2:0];                    /* S7 */
        md.w = md.win[6:3];
        md.win_end = (bit<4>)md.win[2:0] + md.win[6:3];
        grant_t.apply();                         /* S8: result_mask for every result path */
        if (md.lane_clear == 1) {
            lanes_load_clear();                  /* clear_mask from window_t (S8) */
        } else if (md.seen_bits != 0) {
            lanes_load_zero();
        } else {
            trunc_t.apply();                     /* S8 */
            lanes_mask();                        /* S9 */
            align_t.apply();                     /* S10 */
        }
    }
}

control LaneProcessor(inout bit<32> lane,
                      in ingress_metadata_t md) {
    Register<agq_pair32_t, row_idx_t>(AGQ_ROWS, {0, 0}) cells;

    RegisterAction<agq_pair32_t, row_idx_t, bit<32>>(cells) lane_add_v0 = {
        void apply(inout agq_pair32_t c, out bit<32> rv) { c.lo = c.lo + lane; rv = c.lo; } };
    RegisterAction<agq_pair32_t, row_idx_t, bit<32>>(cells) lane_add_v1 = {
        void apply(inout agq_pair32_t c, out bit<32> rv) { c.hi = c.hi + lane; rv = c.hi; } };
    RegisterAction<agq_pair32_t, row_idx_t, bit<32>>(cells) lane_clear_v0 = {
        void apply(inout agq_pair32_t c, out bit<32> rv) { c.lo = c.lo & lane; rv = c.lo; } };
    RegisterAction<agq_pair32_t, row_idx_t, bit<32>>(cells) lane_clear_v1 = {
        void apply(inout agq_pair32_t c, out bit<32> rv) { c.hi = c.hi & lane; rv = c.hi; } };

    apply {
        if (md.lane_clear == 1) {
            if (md.v == 0) { lane = lane_clear_v0.execute(md.row_idx); }
            else           { lane = lane_clear_v1.execute(md.row_idx); }
        } else {
            if (md.v == 0) { lane = lane_add_v0.execute(md.row_idx); }
            else           { lane = lane_add_v1.execute(md.row_idx); }
        }
    }
}

#define LANE_INSTANCE(L) LaneProcessor() lane##L;
#define LANE_APPLY(L) lane##L.apply(hdr.agq.lane##L, md);

control Lanes(inout ingress_headers_t hdr,
              inout ingress_metadata_t md) {

    AGQ_LANES_FOR_EACH(LANE_INSTANCE)

    apply {
        if (md.lane_run == 1) {
            /* No dependency between lanes: bf-p4c packs them 4 per stage
             * (one SALU each), S11..S18 on Tofino 2. */
            AGQ_LANES_FOR_EACH(LANE_APPLY)
        }
    }
}
