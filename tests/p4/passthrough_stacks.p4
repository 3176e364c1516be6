// passthrough_stacks.p4 -- a parser-heavy program that forwards every packet unchanged.
//
// Used by the fuzz/property tests: VLAN tag stacks (a select loop), IPv4 or IPv6, an IPv6
// segment routing header whose segment list is a header stack sized by a field, lookahead,
// masks, ranges, verify and value comparisons. Ingress never modifies a header, so whatever the
// parser accepts or rejects, the deparsed packet must equal the input byte for byte.
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }
header vlan_t { bit<3> pcp; bit<1> dei; bit<12> vid; bit<16> ether_type; }
header ipv4_t {
    bit<4> version; bit<4> ihl; bit<8> tos; bit<16> total_len; bit<16> id; bit<3> flags;
    bit<13> frag; bit<8> ttl; bit<8> proto; bit<16> csum; bit<32> src; bit<32> dst;
}
header ipv6_t {
    bit<4> version; bit<8> tc; bit<20> flow; bit<16> plen; bit<8> nh; bit<8> hlim;
    bit<128> src; bit<128> dst;
}
header srh_t {
    bit<8> nh; bit<8> hdr_ext_len; bit<8> routing_type; bit<8> segments_left;
    bit<8> last_entry; bit<8> flags; bit<16> tag;
}
header sid_t { bit<128> sid; }
header udp_t { bit<16> sport; bit<16> dport; bit<16> len; bit<16> csum; }

struct headers_t {
    ethernet_t ethernet;
    vlan_t[3] vlan;
    ipv4_t ipv4;
    ipv6_t ipv6;
    srh_t srh;
    sid_t[4] sids;
    udp_t udp;
}
struct meta_t { bit<8> sids_left; bit<8> kind; }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            0x8100 &&& 0xEFFF: parse_vlan;   // 0x8100 and 0x9100
            0x0800: parse_ipv4;
            0x86dd: parse_ipv6;
            default: accept;
        }
    }
    state parse_vlan {
        pkt.extract(hdr.vlan.next);
        transition select(hdr.vlan.last.ether_type) {
            0x8100: parse_vlan;
            0x0800: parse_ipv4;
            0x86dd: parse_ipv6;
            default: accept;
        }
    }
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        verify(hdr.ipv4.version == 4, error.HeaderTooShort);
        transition select(hdr.ipv4.proto, hdr.ipv4.ihl) {
            (17, 5): parse_udp;
            (_, 0 .. 4): reject;
            default: accept;
        }
    }
    state parse_ipv6 {
        pkt.extract(hdr.ipv6);
        transition select(hdr.ipv6.nh) {
            43: parse_srh;
            17: parse_udp;
            default: accept;
        }
    }
    state parse_srh {
        pkt.extract(hdr.srh);
        meta.sids_left = hdr.srh.last_entry + 1;
        transition select(hdr.srh.routing_type, pkt.lookahead<bit<8>>()) {
            (4, _): parse_sids;
            default: accept;
        }
    }
    state parse_sids {
        pkt.extract(hdr.sids.next);
        meta.sids_left = meta.sids_left - 1;
        transition select(meta.sids_left) {
            0: after_sids;
            default: parse_sids;
        }
    }
    state after_sids {
        transition select(hdr.srh.nh) {
            17: parse_udp;
            default: accept;
        }
    }
    state parse_udp {
        pkt.extract(hdr.udp);
        transition accept;
    }
}

control V(inout headers_t hdr, inout meta_t meta) { apply { } }

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        if (sm.parser_error != error.NoError) {
            meta.kind = 1;
        }
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control C(inout headers_t hdr, inout meta_t meta) { apply { } }

control D(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.vlan);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.ipv6);
        pkt.emit(hdr.srh);
        pkt.emit(hdr.sids);
        pkt.emit(hdr.udp);
    }
}

V1Switch(P(), V(), I(), E(), C(), D()) main;
