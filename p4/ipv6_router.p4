// ipv6_router.p4 -- a minimal IPv6 LPM router: the program of make bench-p4 and bench-switch.
// Its STF test is tests/stf/ipv6_router.stf.
//
// Parses Ethernet and, for EtherType 0x86DD, the fixed 40-byte IPv6 header.
// ipv6_lpm does a longest-prefix match on the destination address; its
// ipv6_forward action sets the egress port, moves the old destination MAC to
// the source MAC, writes the next-hop MAC as destination and decrements the
// hop limit. Packets are dropped when they are not IPv6, when the lookup
// misses (default action drop), or when the hop limit is 0 or 1 (it would
// reach 0), in which case the table is not even applied.
#include <core.p4>
#include <v1model.p4>

typedef bit<48>  mac_addr_t;
typedef bit<128> ipv6_addr_t;
typedef bit<9>   port_t;

const bit<16> ETHERTYPE_IPV6 = 0x86DD;

header ethernet_t {
    mac_addr_t dst_addr;
    mac_addr_t src_addr;
    bit<16>    ether_type;
}

header ipv6_t {
    bit<4>      version;
    bit<8>      traffic_class;
    bit<20>     flow_label;
    bit<16>     payload_len;
    bit<8>      next_hdr;
    bit<8>      hop_limit;
    ipv6_addr_t src_addr;
    ipv6_addr_t dst_addr;
}

struct headers_t {
    ethernet_t ethernet;
    ipv6_t     ipv6;
}

struct metadata_t { }

parser MyParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV6: parse_ipv6;
            default: accept;
        }
    }
    state parse_ipv6 {
        pkt.extract(hdr.ipv6);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control MyIngress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    action drop() {
        mark_to_drop(standard_metadata);
    }

    action ipv6_forward(mac_addr_t dst_mac, port_t port) {
        standard_metadata.egress_spec = port;
        hdr.ethernet.src_addr = hdr.ethernet.dst_addr;
        hdr.ethernet.dst_addr = dst_mac;
        hdr.ipv6.hop_limit = hdr.ipv6.hop_limit - 1;
    }

    table ipv6_lpm {
        key = {
            hdr.ipv6.dst_addr: lpm;
        }
        actions = {
            ipv6_forward;
            drop;
        }
        default_action = drop();
        size = 1024;
    }

    apply {
        if (!hdr.ipv6.isValid()) {
            drop();
        } else if (hdr.ipv6.hop_limit <= 1) {
            drop();
        } else {
            ipv6_lpm.apply();
        }
    }
}

control MyEgress(inout headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    apply { }
}

control MyComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv6);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
