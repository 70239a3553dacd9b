/* Parsers: Ethernet, one optional 802.1Q tag, IPv4 (IHL 5), ARP, UDP, and the
 * agq header on UDP destination port 50100 (PROTOCOL.md §1). A truncated agq
 * header is a parser error; the parser error is not cleared, so the packet is
 * dropped by the ingress (drops_parser_error, as in the software switch). */

parser AgqIngressParser(packet_in pkt,
                        out ingress_headers_t hdr,
                        out ingress_metadata_t md,
                        out ingress_intrinsic_metadata_t ig_intr_md) {
    state start {
        pkt.extract(ig_intr_md);
        /* Metadata the ingress reads before it writes them. */
        md.job_hit = 0;
        md.worker_hit = 0;
        md.realloc = 0;
        md.reread = 0;
        md.seen = 0;
        md.count_new = 0;
        md.count_old = 0;
        md.first = 0;
        md.complete = 0;
        md.cas_ok = 0;
        md.old_hit = 0;
        md.lane_run = 0;
        md.lane_clear = 0;
        md.lane_load = 0;
        md.resubmit = 0;
        md.recirculate = 0;
        md.ipv4_csum = 0;
        md.verdict = 0;
        md.adm = 0;
        md.slot_chk = 0;
        md.count_it = 0;
        md.go = 0;
        transition select(ig_intr_md.resubmit_flag) {
            1: parse_resubmit;
            default: parse_port_metadata;
        }
    }

    state parse_resubmit {
        /* Pass 2 of a first contribution: the 64-bit ResubmitMd sits where the
         * port metadata (PORT_METADATA_SIZE, 192 bits on Tofino 2) would be. */
        pkt.extract(md.resub);
#if __TARGET_TOFINO__ != 1
        pkt.advance(PORT_METADATA_SIZE - 64);
#endif
        transition parse_ethernet;
    }

    state parse_port_metadata {
        pkt.advance(PORT_METADATA_SIZE);
        /* Pass 1: md.resub is valid from here on; its window is slot_window_merge's
         * operand until stage 10 fills the header (window_alloc.p4). */
        md.resub.setValid();
        md.resub.window = 0;
        transition select(ig_intr_md.ingress_port) {
            AGQ_RECIRC_PORT: parse_recirc;    /* only agq retries recirculate */
            default: parse_ethernet;
        }
    }

    state parse_recirc {
        pkt.extract(hdr.recirc);
        transition parse_ethernet;
    }

    state parse_ethernet {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_VLAN: parse_vlan;
            ETHERTYPE_IPV4: parse_ipv4;
            ETHERTYPE_ARP:  parse_arp;
            default: accept;
        }
    }

    state parse_vlan {
        pkt.extract(hdr.vlan);
        transition select(hdr.vlan.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            ETHERTYPE_ARP:  parse_arp;
            default: accept;
        }
    }

    state parse_arp {
        pkt.extract(hdr.arp);
        transition accept;
    }

    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition select(hdr.ipv4.ihl, hdr.ipv4.protocol) {
            (5, IPPROTO_UDP): parse_udp;
            default: accept;
        }
    }

    state parse_udp {
        pkt.extract(hdr.udp);
        transition select(hdr.udp.dst_port) {
            AGQ_UDP_PORT: parse_agq;
            default: accept;
        }
    }

    state parse_agq {
        pkt.extract(hdr.agq);
#if AGQ_LANES == 32
        transition select(hdr.agq.n_lanes) {
            32: parse_agq_hi;
            default: accept;          /* 16 lanes (or malformed: JobCheck drops it) */
        }
    }

    state parse_agq_hi {
        pkt.extract(hdr.agq_hi);
        transition accept;
#else
        transition accept;            /* Tofino 1: 16 lanes; a 32-lane job is not installed */
#endif
    }
}

/* Egress: the bridged header, then the same stack (no ARP: ARP replies are
 * complete when they leave the ingress). */
parser AgqEgressParser(packet_in pkt,
                       out egress_headers_t hdr,
                       out egress_metadata_t md,
                       out egress_intrinsic_metadata_t eg_intr_md) {
    state start {
        pkt.extract(eg_intr_md);
        md.ipv4_csum = 0;
        pkt.extract(hdr.bridge);
        transition select(hdr.bridge.rewrite, hdr.bridge.extract) {
            (0, 0): accept;                /* nothing to rewrite: the rest is payload */
            default: parse_ethernet;
        }
    }

    state parse_ethernet {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_VLAN: parse_vlan;
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }

    state parse_vlan {
        pkt.extract(hdr.vlan);
        transition select(hdr.vlan.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }

    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition select(hdr.ipv4.protocol) {
            IPPROTO_UDP: parse_udp;
            default: accept;
        }
    }

    state parse_udp {
        pkt.extract(hdr.udp);
        transition select(hdr.udp.dst_port) {
            AGQ_UDP_PORT: parse_agq;
            default: accept;
        }
    }

    state parse_agq {
        pkt.extract(hdr.agq);
#if AGQ_LANES == 32
        transition select(hdr.agq.n_lanes) {
            32: parse_agq_hi;
            default: accept;          /* 16 lanes (or malformed: JobCheck drops it) */
        }
    }

    state parse_agq_hi {
        pkt.extract(hdr.agq_hi);
        transition accept;
#else
        transition accept;            /* Tofino 1: 16 lanes; a 32-lane job is not installed */
#endif
    }
}
