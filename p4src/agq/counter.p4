/* Step 3 (PROTOCOL.md §4): slot_count, paired 8+8 (lo = version 0, hi =
 * version 1), indexed by slot_idx. A new contribution counts
 * count_v = (count_v == N ? 1 : count_v + 1), so the first contribution of a
 * new use wraps N -> 1 without a separate reset; a seen packet only reads.
 * Four register actions: count_v0, count_v1, read_v0, read_v1 (the limit).
 *
 * Stage 4: slot_count (1 SALU).
 * Stage 5: first / complete (gateways on the SALU output). */

control SlotCounter(inout ingress_metadata_t md) {

    Register<agq_pair8_t, slot_idx_t>(AGQ_SLOTS, {0, 0}) slot_count;

    RegisterAction<agq_pair8_t, slot_idx_t, bit<8>>(slot_count) slot_count_inc_v0 = {
        void apply(inout agq_pair8_t c, out bit<8> n) {
            if (c.lo == md.job_n) { c.lo = 1; } else { c.lo = c.lo + 1; }
            n = c.lo;
        }
    };
    RegisterAction<agq_pair8_t, slot_idx_t, bit<8>>(slot_count) slot_count_inc_v1 = {
        void apply(inout agq_pair8_t c, out bit<8> n) {
            if (c.hi == md.job_n) { c.hi = 1; } else { c.hi = c.hi + 1; }
            n = c.hi;
        }
    };
    RegisterAction<agq_pair8_t, slot_idx_t, bit<8>>(slot_count) slot_count_read_v0 = {
        void apply(inout agq_pair8_t c, out bit<8> n) { n = c.lo; }
    };
    RegisterAction<agq_pair8_t, slot_idx_t, bit<8>>(slot_count) slot_count_read_v1 = {
        void apply(inout agq_pair8_t c, out bit<8> n) { n = c.hi; }
    };

    apply {
        if (md.seen_bits == 0) {
            if (md.v == 0) { md.count = slot_count_inc_v0.execute(md.slot_idx); }
            else           { md.count = slot_count_inc_v1.execute(md.slot_idx); }
        } else {
            if (md.v == 0) { md.count = slot_count_read_v0.execute(md.slot_idx); }
            else           { md.count = slot_count_read_v1.execute(md.slot_idx); }
        }
        if (md.seen_bits == 0 && md.count == 1) { md.first = 1; }
        if (md.count == md.job_n) { md.complete = 1; }
    }
}
