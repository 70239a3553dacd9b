/* Step 6 (PROTOCOL.md §4): the lane path — C++ Ingress::lanes() without the
 * extraction (extract_t and the result mask run in the egress,
 * egress_rewrite.p4; docs/PIPELINE.md, stage map).
 *
 * LanePrep (stages 7-9), contributions:
 *   7  grant_t(w, g):     value_mask = low W - g bits, result_mask = low W bits
 *      trunc_t(R/4, w):   lane_k >>= 4d, d = max(R/4 - w, 0) (one action per amount)
 *      win_end = pos + w
 *   8  lane_k &= value_mask  (a worker can never reach a neighbour's units)
 *   9  align_t(win_end):  lane_k <<= 4(8 - win_end), into the window
 * A resend (seen, complete) adds 0: the C++ masks with 0, here lane_k = 0.
 * A first contribution's pass 1 loads lane_k = ~cells of the released window
 * (window_t, stage 7) for lane_clear.
 *
 * Lanes (stages 10-17): 32 paired registers (lo = version 0, hi = version 1)
 * indexed by row_idx, 4 per stage (4 SALUs per stage). Each lane is one
 * instance lane00..lane31 of LaneProcessor, whose register `cells` has the
 * C++ register actions lane_add_v0/_v1 (half += x, returns the new half) and
 * lane_clear_v0/_v1 (half &= keep). The new cell goes back into lane_k. */

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
        md.pos = md.win[2:0];
        md.w = md.win[6:3];
        md.win_end = (bit<4>)md.win[2:0] + md.win[6:3];
        if (md.lane_clear == 1) {
            lanes_load_clear();                  /* clear_mask from window_t (stage 7) */
        } else {
            grant_t.apply();                     /* stage 7: masks of the window (result_mask: egress) */
            if (md.lane_load == 1) {
                lanes_load_zero();               /* read the kept result */
            } else {
                trunc_t.apply();                 /* stage 7 */
                lanes_mask();                    /* stage 8 */
                align_t.apply();                 /* stage 9 */
            }
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
        /* No dependency between lanes: 4 per stage (one SALU each), stages 10-17. */
        AGQ_LANES_FOR_EACH(LANE_APPLY)
    }
}
