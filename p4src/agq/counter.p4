/* Step 3 (PROTOCOL.md §4): slot_count, paired 8+8 (lo = version 0, hi =
 * version 1), indexed by slot_idx — C++ slot_count_inc() / slot_count_read().
 * A new contribution counts count_v = (count_v == N ? 1 : count_v + 1), so
 * the first contribution of a new use wraps N -> 1 without a reset; a seen
 * packet only reads. Four register actions (the limit). The two kinds return
 * into two fields (count_new, count_old): first = count_new == 1 needs no
 * `seen` term, so slot_window (stage 5) can test it inside its SALU.
 * A new contribution counts agq_contributions (and agq_overflow when it
 * clipped), as the C++, and gets its slot_window operand here.
 *
 * Stage 4: seen (gateway on bitmap_old & worker_bit), slot_count (1 SALU), the
 * slot_window operand (resub.window, see window_alloc.p4).
 * first / complete: stage 5 (ingress apply). */

control SlotCounter(inout ingress_headers_t hdr,
                    inout ingress_metadata_t md) {

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

    Counter<bit<64>, bit<1>>(1, CounterType_t.PACKETS) agq_contributions;
    Counter<bit<64>, bit<1>>(1, CounterType_t.PACKETS) agq_overflow;

    /* One table per kind, keyed on v (the half), not gateways. */
    action inc_v0() {
        md.count_new = (bit<16>)slot_count_inc_v0.execute(md.slot_idx);
        agq_contributions.count(0);
    }
    action inc_v1() {
        md.count_new = (bit<16>)slot_count_inc_v1.execute(md.slot_idx);
        agq_contributions.count(0);
    }
    table count_inc_t {
        key = { md.v : exact; }
        actions = { inc_v0; inc_v1; @defaultonly NoAction; }
        const default_action = NoAction;   /* every (key) is an entry; a register action cannot be a default */
        size = 2;
        const entries = { 0 : inc_v0(); 1 : inc_v1(); }
    }
    action read_v0() { md.seen = 1; md.count_old = slot_count_read_v0.execute(md.slot_idx); }
    action read_v1() { md.seen = 1; md.count_old = slot_count_read_v1.execute(md.slot_idx); }
    table count_read_t {
        key = { md.v : exact; }
        actions = { read_v0; read_v1; @defaultonly NoAction; }
        const default_action = NoAction;   /* every (key) is an entry; a register action cannot be a default */
        size = 2;
        const entries = { 0 : read_v0(); 1 : read_v1(); }
    }

    apply {
        if (md.bitmap_old == 0) {                /* seen = old & worker_bit != 0 */
            count_inc_t.apply();
            if (md.ovf == 1) {
                agq_overflow.count(0);
                md.resub.window = WIN_OVERFLOW;     /* slot_window_merge's operand */
            }
        } else {
            count_read_t.apply();
        }
    }
}
