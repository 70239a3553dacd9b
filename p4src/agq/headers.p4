/* agq pipeline (docs/PROTOCOL.md) for TNA/T2NA: headers and metadata.
 * Field names follow proto/agq.hpp and PROTOCOL.md §1. */
#ifndef _AGQ_HEADERS_P4_
#define _AGQ_HEADERS_P4_

const bit<16> ETHERTYPE_IPV4 = 0x0800;
const bit<16> ETHERTYPE_ARP  = 0x0806;
const bit<16> ETHERTYPE_VLAN = 0x8100;
const bit<8>  IPPROTO_UDP    = 17;
const bit<16> AGQ_UDP_PORT   = 50100;

const bit<4> AGQ_VERSION          = 1;
const bit<4> AGQ_TYPE_DATA        = 1;
const bit<4> AGQ_TYPE_RESULT      = 2;
const bit<4> AGQ_TYPE_PS_RESULT   = 3;
const bit<4> AGQ_TYPE_FALLBACK    = 4;   /* FALLBACK_DATA */

const bit<8> AGQ_FLAG_VERSION    = 0x01;
const bit<8> AGQ_FLAG_RETRANSMIT = 0x02;
const bit<8> AGQ_FLAG_OVERFLOW   = 0x04;
const bit<8> AGQ_FLAG_FALLBACK   = 0x08;

/* Register sizes: rows and slots shared by all jobs (AgqConfig defaults). */
#ifndef AGQ_ROWS
#define AGQ_ROWS 4096
#endif
#ifndef AGQ_SLOTS
#define AGQ_SLOTS 32768
#endif
#ifndef AGQ_MAX_JOBS
#define AGQ_MAX_JOBS 4096     /* AgqProgram::kMaxJobs */
#endif
typedef bit<16> row_idx_t;
typedef bit<16> slot_idx_t;

header ethernet_h {
    bit<48> dst_addr;
    bit<48> src_addr;
    bit<16> ether_type;
}

header vlan_h {
    bit<3>  pcp;
    bit<1>  cfi;
    bit<12> vid;
    bit<16> ether_type;
}

header ipv4_h {
    bit<4>  version;
    bit<4>  ihl;
    bit<8>  diffserv;
    bit<16> total_len;
    bit<16> identification;
    bit<3>  flags;
    bit<13> frag_offset;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> hdr_checksum;
    bit<32> src_addr;
    bit<32> dst_addr;
}

header udp_h {
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> length;
    bit<16> checksum;
}

header arp_h {
    bit<16> htype;
    bit<16> ptype;
    bit<8>  hlen;
    bit<8>  plen;
    bit<16> oper;
    bit<48> sha;
    bit<32> spa;
    bit<48> tha;
    bit<32> tpa;
}

/* PROTOCOL.md §1: 20 fixed bytes + 32 lanes = 148 bytes. */
header agq_h {
    bit<4>  ver;
    bit<4>  type;
    bit<8>  flags;
    bit<16> job_id;
    bit<8>  worker_id;
    bit<8>  num_workers;
    bit<16> slot;
    bit<32> seq;
    bit<8>  req_width;
    bit<8>  width;
    bit<8>  pos;
    bit<8>  guard;
    bit<8>  exponent;
    bit<8>  n_lanes;
    bit<16> reserved;
    bit<32> lane00; bit<32> lane01; bit<32> lane02; bit<32> lane03;
    bit<32> lane04; bit<32> lane05; bit<32> lane06; bit<32> lane07;
    bit<32> lane08; bit<32> lane09; bit<32> lane10; bit<32> lane11;
    bit<32> lane12; bit<32> lane13; bit<32> lane14; bit<32> lane15;
    bit<32> lane16; bit<32> lane17; bit<32> lane18; bit<32> lane19;
    bit<32> lane20; bit<32> lane21; bit<32> lane22; bit<32> lane23;
    bit<32> lane24; bit<32> lane25; bit<32> lane26; bit<32> lane27;
    bit<32> lane28; bit<32> lane29; bit<32> lane30; bit<32> lane31;
}

/* Pass-1 -> pass-2 state of a first contribution (PROTOCOL.md §4 step 5).
 * 64 bits: the resubmit budget of Tofino 1 and Tofino 2. */
header agq_resubmit_h {      /* ResubmitMd of switch/pipeline/agq/ingress.hpp */
    bit<8>  occ_old;       /* row_occupancy_v as read in pass 1 (the CAS's expected value) */
    bit<8>  occ_new;       /* with the old window released and the new one taken */
    bit<16> window;        /* new slot_window half (pos, w, FALLBACK, OVERFLOW) */
    bit<8>  rtype;         /* AGQ_RESUBMIT_ALLOC */
    bit<1>  complete;      /* the first contribution is also the last (N = 1) */
    bit<1>  realloc;       /* recirculated after a failed CAS: no lane clear */
    bit<22> _pad;
}

/* Ingress -> egress (bridged in front of Ethernet for every packet that
 * leaves through the traffic manager). */
header agq_bridge_h {
    bit<8>  kind;          /* BRIDGE_* */
    bit<16> rid;           /* unused (multicast replicas carry eg_intr_md.egress_rid = worker_id) */
    bit<4>  win_end;       /* result window: pos + w (extract_t key) */
    bit<4>  _pad;
    bit<32> result_mask;   /* low W bits (grant_t) */
}

const bit<8> BRIDGE_PLAIN          = 0;  /* ordinary switching: no rewrite */
const bit<8> BRIDGE_RESULT_MCAST   = 1;  /* RESULT: extract the window, rewrite per replica */
const bit<8> BRIDGE_RESULT_UCAST   = 2;  /* RESULT to the PS / resend: extract only */
const bit<8> BRIDGE_AGQ_MCAST      = 3;  /* PS_RESULT relayed to the workers: rewrite only */
const bit<8> BRIDGE_AGQ_UCAST      = 4;  /* FALLBACK_DATA, PS_RESULT unicast: checksum only */

const bit<8> AGQ_RESUBMIT_ALLOC = 1;
const ResubmitType_t AGQ_RESUBMIT_TYPE = 1;   /* non-zero: see reference §3 on Tofino 1 */
const DigestType_t SMAC_DIGEST_TYPE = 1;

struct smac_learn_digest_t {
    bit<48>  src_mac;
    PortId_t port;
}

/* Verdicts of result_select (PROTOCOL.md §4 step 7, §7). */
const bit<8> V_NONE            = 0;   /* not agq: ordinary forwarding */
const bit<8> V_DROP            = 1;   /* drop; md.ctr says why */
const bit<8> V_RESUBMIT        = 2;   /* first contribution, pass 1 */
const bit<8> V_RESULT_MCAST    = 3;   /* complete: RESULT to the job's workers */
const bit<8> V_RESULT_PS       = 4;   /* complete, delivery = ps */
const bit<8> V_RESULT_RESEND   = 5;   /* seen && count == N: RESULT unicast to worker i */
const bit<8> V_ABSORBED        = 6;   /* consumed */
const bit<8> V_DUPLICATE       = 7;   /* seen, pending: dropped */
const bit<8> V_FALLBACK_DATA   = 8;   /* FALLBACK sequence: DATA to the PS unaggregated */
const bit<8> V_PS_RESULT       = 9;   /* PS_RESULT: multicast to the job as RESULT */
const bit<8> V_RECIRCULATE     = 10;  /* CAS failed / window PENDING: come back */
const bit<8> V_PS_RESULT_UNICAST = 11; /* PS_RESULT with RETRANSMIT: to worker_id only */

/* agq_counters indices: the counter names of PROTOCOL.md §9. */
const bit<8> C_AGQ_PACKETS          = 0;
const bit<8> C_AGQ_CONTRIBUTIONS    = 1;
const bit<8> C_AGQ_FIRST            = 2;
const bit<8> C_AGQ_RESUBMITS        = 3;
const bit<8> C_AGQ_RESULTS          = 4;
const bit<8> C_AGQ_RESULT_RESENT    = 5;
const bit<8> C_AGQ_ABSORBED         = 6;
const bit<8> C_AGQ_DUPLICATE        = 7;
const bit<8> C_AGQ_FALLBACK         = 8;
const bit<8> C_AGQ_FALLBACK_DATA    = 9;
const bit<8> C_AGQ_PS_RESULTS       = 10;
const bit<8> C_AGQ_OVERFLOW         = 11;
const bit<8> C_DROPS_UNKNOWN_JOB    = 12;
const bit<8> C_DROPS_BAD_WORKER     = 13;
const bit<8> C_DROPS_BAD_SLOT       = 14;
const bit<8> C_DROPS_BAD_WIDTH      = 15;
const bit<8> C_AGQ_CAS_RETRY        = 16;
const bit<8> C_COUNTERS             = 17;

/* slot_window half (16 bits), switch/pipeline/agq/tables.hpp pack_window():
 *   [2:0] pos, [6:3] width in units, [7] FALLBACK, [8] OVERFLOW, [9] PENDING
 * (PENDING: set by a first contribution's pass 1, cleared by its pass 2). */
const bit<16> WIN_FALLBACK = 0x0080;
const bit<16> WIN_OVERFLOW = 0x0100;
const bit<16> WIN_PENDING  = 0x0200;

struct agq_pair32_t { bit<32> lo; bit<32> hi; }   /* lo = version 0, hi = version 1 */
struct agq_pair16_t { bit<16> lo; bit<16> hi; }
struct agq_pair8_t  { bit<8>  lo; bit<8>  hi; }

struct ingress_headers_t {
    agq_bridge_h   bridge;    /* emitted first; set valid in ingress */
    ethernet_h     ethernet;
    vlan_h         vlan;
    ipv4_h         ipv4;
    arp_h          arp;
    udp_h          udp;
    agq_h          agq;
}

struct ingress_metadata_t {
    agq_resubmit_h resub;     /* valid only on the resubmitted pass */
    /* job_t */
    bit<1>     job_hit;
    bit<8>     job_n;          /* N */
    bit<16>    job_slots;
    slot_idx_t slot_base;
    row_idx_t  row_base;
    bit<4>     row_shift;      /* log2(slots_per_row) */
    bit<8>     guard;          /* g */
    bit<4>     w_min_units;    /* ceil((g + 2) / 4): smallest grant in units */
    bit<4>     max_units;      /* max_width / 4 */
    bit<16>    mcast_grp;      /* PRE group of the job's workers */
    bit<1>     deliver_ps;     /* result delivery = ps */
    PortId_t   ps_port;
    bit<32>    ps_ipv4;
    bit<48>    ps_mac;
    /* worker_t */
    bit<1>     worker_hit;
    PortId_t   w_port;
    bit<32>    w_ipv4;
    bit<32>    w_bit;          /* 1 << worker_id (constant shifts only: from the table) */
    bit<48>    w_mac;
    /* indices */
    slot_idx_t slot_idx;
    row_idx_t  row_off;
    row_idx_t  row_idx;
    bit<1>     v;              /* slot version (flags bit 0) */
    bit<4>     req_units;      /* min(R, max_width) / 4 */
    bit<3>     req_units_m1;   /* alloc_t key: req_units - 1 */
    /* slot state */
    bit<32>    bitmap_old;
    bit<32>    seen_bits;
    bit<8>     count;
    bit<1>     first;
    bit<1>     complete;
    bit<16>    win;            /* slot_window half of this (slot, v) */
    bit<3>     pos;            /* window of this sequence */
    bit<4>     w;              /* ... width in units */
    bit<4>     win_end;        /* pos + w (align_t key) */
    bit<4>     r_units;        /* req_width / 4, uncapped (trunc_t key: the worker encoded with R) */
    bit<3>     guard3;         /* grant_t key: g (0..5) */
    bit<1>     grant_ok;       /* grant_t */
    bit<32>    grant_result_mask;   /* low W bits (bridged to the egress) */
    bit<32>    grant_value_mask;    /* low W - g bits */
    bit<1>     alloc_ok;       /* grant_alloc_t: W - g >= 2 for the new window */
    bit<32>    alloc_value_mask;
    bit<32>    alloc_result_mask;
    bit<3>     old_pos;        /* released window (previous use of v) */
    bit<4>     old_w;
    bit<8>     old_occ_mask;
    bit<16>    ovf_in;         /* WIN_OVERFLOW when this DATA clipped and is not first */
    bit<8>     occ;            /* row_occupancy half */
    bit<8>     avail;          /* occ & ~old_occ_mask */
    bit<3>     new_pos;        /* alloc_t */
    bit<4>     new_w;
    bit<8>     new_occ_mask;
    bit<1>     cas_ok;         /* pass 2: row_occupancy compare-and-set succeeded */
    /* lanes */
    bit<1>     lane_clear;     /* pass 1 of a first contribution: clear the old window */
    bit<1>     lane_run;       /* run the lane processors at all */
    bit<32>    clear_mask;     /* ~cells of the released window */
    /* decision */
    bit<8>     verdict;
    bit<8>     recirc_mark;    /* AGQ_RECIRC_* (agq.reserved[15:8] on the recirculated copy) */
    bit<8>     ctr;            /* index into agq_counters */
    PortId_t   learn_port;     /* smac learning digest */
}

struct egress_headers_t {
    agq_bridge_h   bridge;
    ethernet_h     ethernet;
    vlan_h         vlan;
    ipv4_h         ipv4;
    udp_h          udp;
    agq_h          agq;
}

struct egress_metadata_t {
}

#endif
