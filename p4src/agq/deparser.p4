/* Deparsers. The ingress deparser arms the resubmit of a first contribution
 * (PROTOCOL.md §4 step 5) with its 64-bit pass-1 state (ResubmitMd); drop_ctl
 * bit 0 would cancel it, so that path never sets drop_ctl. A recirculated
 * retry carries the same header in front of Ethernet (hdr.recirc, bypass_egress:
 * no bridged header). The IPv4 checksum is recomputed for every agq packet
 * that leaves (the C++ recomputes it after a unicast rewrite; unchanged
 * headers give the same value) and again in the egress after a replica's
 * destination rewrite. The UDP checksum is 0 (PROTOCOL.md §1). */

control AgqIngressDeparser(packet_out pkt,
                           inout ingress_headers_t hdr,
                           in ingress_metadata_t md,
                           in ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    Resubmit(AGQ_RESUBMIT_TYPE) resubmit_alloc;
    Digest<smac_learn_digest_t>(SMAC_DIGEST_TYPE) smac_learn;
    Checksum() ipv4_checksum;

    apply {
        if (ig_dprsr_md.resubmit_type == AGQ_RESUBMIT_TYPE) {
            resubmit_alloc.emit(md.resub);
        }
        if (ig_dprsr_md.digest_type == SMAC_DIGEST_TYPE) {
            smac_learn.pack({hdr.ethernet.src_addr, md.learn_port});
        }
        if (md.ipv4_csum == 1) {
            hdr.ipv4.hdr_checksum = ipv4_checksum.update({
                hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv,
                hdr.ipv4.total_len, hdr.ipv4.identification,
                hdr.ipv4.flags, hdr.ipv4.frag_offset,
                hdr.ipv4.ttl, hdr.ipv4.protocol,
                hdr.ipv4.src_addr, hdr.ipv4.dst_addr});
        }
        pkt.emit(hdr.bridge);
        pkt.emit(hdr.recirc);
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.vlan);
        pkt.emit(hdr.arp);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.udp);
        pkt.emit(hdr.agq);
        pkt.emit(hdr.agq_hi);
    }
}

control AgqEgressDeparser(packet_out pkt,
                          inout egress_headers_t hdr,
                          in egress_metadata_t md,
                          in egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {
    Checksum() ipv4_checksum;

    apply {
        if (md.ipv4_csum == 1) {
            hdr.ipv4.hdr_checksum = ipv4_checksum.update({
                hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv,
                hdr.ipv4.total_len, hdr.ipv4.identification,
                hdr.ipv4.flags, hdr.ipv4.frag_offset,
                hdr.ipv4.ttl, hdr.ipv4.protocol,
                hdr.ipv4.src_addr, hdr.ipv4.dst_addr});
        }
        /* The bridged header is not emitted: it never leaves the switch. */
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.vlan);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.udp);
        pkt.emit(hdr.agq);
        pkt.emit(hdr.agq_hi);
    }
}
