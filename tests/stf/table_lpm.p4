// table_lpm.p4 -- longest-prefix match.
//
// Covers: an lpm key on a bit<32> field; overlapping prefixes /8, /16, /24, /32
// added out of order (the longest matching prefix wins regardless of insertion
// order); a prefix length that is not a multiple of 8 (/20); a miss running the
// default action.
// h.route = id of the matching entry (0xFF on a miss, which goes to port 3).
#include <core.p4>
#include <v1model.p4>

header ip_t {
    bit<32> dst;
    bit<8>  route;
}

struct headers_t { ip_t ip; }
struct metadata_t { }

parser MyParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        pkt.extract(hdr.ip);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control MyIngress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    action route_to(bit<8> id, bit<9> port) {
        hdr.ip.route = id;
        standard_metadata.egress_spec = port;
    }
    action no_route() {
        hdr.ip.route = 0xFF;
        standard_metadata.egress_spec = 3;
    }

    table tbl_lpm {
        key = {
            hdr.ip.dst: lpm;
        }
        actions = {
            route_to;
            no_route;
        }
        default_action = no_route();
        size = 1024;
    }

    apply {
        tbl_lpm.apply();
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
        pkt.emit(hdr.ip);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
