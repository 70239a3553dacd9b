/* Step 2 (PROTOCOL.md §4): slot_bitmap, a paired register (lo = version 0,
 * hi = version 1) indexed by slot_idx — C++ slot_bitmap_add(). One access
 * per pass, two register actions (the half is a constant of each); each sets
 * worker i's bit in half v, clears it in half 1-v (worker i holds the result
 * of (s, 1-v)'s previous use) and returns half v as it was.
 * seen = old & worker_bit is a VLIW AND one stage later: a SALU condition
 * compares, it cannot AND with a PHV operand.
 *
 * Stage 2: slot_bitmap (1 SALU, 2 register actions). Stage 3: old &= worker_bit;
 * seen is a gateway on it (!= 0) in stage 4 (SlotCounter). */

control BitmapCheck(inout ingress_metadata_t md) {

    Register<agq_pair32_t, slot_idx_t>(AGQ_SLOTS, {0, 0}) slot_bitmap;

    RegisterAction<agq_pair32_t, slot_idx_t, bit<32>>(slot_bitmap) slot_bitmap_add_v0 = {
        void apply(inout agq_pair32_t b, out bit<32> old) {
            old = b.lo;
            b.lo = b.lo | md.w_bit;
            b.hi = b.hi & ~md.w_bit;
        }
    };

    RegisterAction<agq_pair32_t, slot_idx_t, bit<32>>(slot_bitmap) slot_bitmap_add_v1 = {
        void apply(inout agq_pair32_t b, out bit<32> old) {
            old = b.hi;
            b.hi = b.hi | md.w_bit;
            b.lo = b.lo & ~md.w_bit;
        }
    };

    /* The half is chosen by a table on v, not a gateway: one table level. */
    action add_v0() { md.bitmap_old = slot_bitmap_add_v0.execute(md.slot_idx); }
    action add_v1() { md.bitmap_old = slot_bitmap_add_v1.execute(md.slot_idx); }
    table bitmap_t {
        key = { md.v : exact; }
        actions = { add_v0; add_v1; @defaultonly NoAction; }
        const default_action = NoAction;   /* every (key) is an entry; a register action cannot be a default */
        size = 2;
        const entries = { 0 : add_v0(); 1 : add_v1(); }
    }

    apply {
        bitmap_t.apply();                                   /* stage 2 */
        md.bitmap_old = md.bitmap_old & md.w_bit;          /* stage 3, in place: one 32-bit container */
    }
}
