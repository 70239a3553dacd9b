/* Step 2 (PROTOCOL.md §4): slot_bitmap, a paired register (lo = version 0,
 * hi = version 1) indexed by slot_idx. One access per pass, two register
 * actions (one per version); each sets worker i's bit in bitmap_v, clears it
 * in bitmap_(1-v) (worker i holds the previous set's result) and returns the
 * old bitmap_v. seen = old & w_bit is one stage later (a SALU condition
 * cannot AND with a PHV operand).
 *
 * Stage 2: slot_bitmap (1 SALU, 2 of 4 register actions).
 * Stage 3: seen_bits (VLIW). */

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

    apply {
        if (md.v == 0) {
            md.bitmap_old = slot_bitmap_add_v0.execute(md.slot_idx);
        } else {
            md.bitmap_old = slot_bitmap_add_v1.execute(md.slot_idx);
        }
        md.seen_bits = md.bitmap_old & md.w_bit;
    }
}
