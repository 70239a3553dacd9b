/* Step 6 (PROTOCOL.md §4): the lane path — C++ Ingress::lanes() without the
 * extraction (extract_t and the result mask run in the egress,
 * egress_rewrite.p4; docs/PIPELINE.md, stage map).
 *
 * LanePrep, contributions (two VLIW steps per lane, both constant):
 *   6  trunc_t(R/4, w, g): lane_k &= keep, keep = value_mask << 4d — the C++
 *      trunc_t shift (d = max(R/4 - w, 0)) and the value mask (low W - g
 *      bits) folded into one AND: (u >> 4d) & m == (u & (m << 4d)) >> 4d.
 *   7  align_t(R/4, pos, w): one constant shift, 4(8 - pos - w) - 4d
 *      (left, or right when negative) — the C++ trunc_t shift and align_t
 *      in one: the low 4d bits are already zero.
 *   6  result_t(pos, w): the RESULT header's width and pos and the bridged
 *      window byte, as action data (used when the verdict is a RESULT).
 * The tables are generated from the C++ tables (gen_agq_tables), so the
 * bits are the C++ ones. A resend (seen, complete) adds 0: the C++ masks
 * with 0, here lane_k = 0. A first contribution's pass 1 loads lane_k = the
 * keep mask of the released window (window_t, stage 6) for lane_clear.
 *
 * Lanes (stages 8-11 for lane00..15, 12-15 for lane16..31): paired registers
 * (lo = version 0, hi = version 1) indexed by row_idx, 4 per stage (4 SALUs
 * per stage). Each lane is one instance lane00..lane31 of LaneProcessor,
 * whose register `cells` has the C++ register actions lane_add_v0/_v1
 * (half += x, returns the new half) and lane_clear_v0/_v1 (half &= keep). The
 * new cell goes back into lane_k. A 16-lane job's packets (no agq_hi header)
 * touch lane00..lane15 only, as the C++ (job.lanes). */

control LanePrep(inout ingress_headers_t hdr,
                 inout ingress_metadata_t md) {

#include "generated/trunc_t.p4"
#include "generated/align_t.p4"
#include "generated/result_t.p4"

#define AGQ_OPERAND_ 0
    action lanes_load_zero() { AGQ_LANES_FOR_EACH(AGQ_LANE_SET_) }
#undef AGQ_OPERAND_

    apply {
        result_t.apply();                        /* stage 6: RESULT width, pos; bridged window */
        if (md.seen == 1) {
            lanes_load_zero();                   /* resend: read the kept result */
        } else {
            trunc_t.apply();                     /* stage 6 */
            align_t.apply();                     /* stage 7 */
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

    action add_v0() { lane = lane_add_v0.execute(md.row_idx); }
    action add_v1() { lane = lane_add_v1.execute(md.row_idx); }
    action clear_v0() { lane = lane_clear_v0.execute(md.row_idx); }
    action clear_v1() { lane = lane_clear_v1.execute(md.row_idx); }
    /* (lane_run, lane_clear, v) -> the register action: one table per
     * lane, applied without a gateway (lane_run = 0 misses): on Tofino 1 an
     * if-block around the lanes would wait for every earlier if-block. */
    table lane_t {
        key = {
            md.lane_run   : exact;
            md.lane_clear : exact;
            md.v          : exact;
        }
        actions = { add_v0; add_v1; clear_v0; clear_v1; @defaultonly NoAction; }
        const default_action = NoAction;   /* a register action cannot be a default */
        size = 4;
        const entries = {
            (1, 0, 0) : add_v0();   (1, 0, 1) : add_v1();
            (1, 1, 0) : clear_v0(); (1, 1, 1) : clear_v1();
        }
    }

    apply {
        lane_t.apply();
    }
}

#define LANE_INSTANCE(H, L) LaneProcessor() lane##L;
#define LANE_APPLY(H, L) lane##L.apply(hdr.H.lane##L, md);

control Lanes(inout ingress_headers_t hdr,
              inout ingress_metadata_t md) {

    AGQ_LANES_FOR_EACH(LANE_INSTANCE)

    apply {
        /* No dependency between lanes: 4 per stage (one SALU each). */
        AGQ_LANES_LO(LANE_APPLY)
#if AGQ_LANES == 32
        if (hdr.agq_hi.isValid()) {
            AGQ_LANES_HI(LANE_APPLY)
        }
#endif
    }
}
