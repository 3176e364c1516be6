// drop.p4 -- dropping packets in ingress and egress.
//
// Covers: mark_to_drop(standard_metadata) in ingress; egress_spec = 511 (the
// BMv2 simple_switch drop port) set directly; mark_to_drop overridden by a
// later assignment to egress_spec (the packet is forwarded); mark_to_drop in
// egress (dropped at the end of egress, after egress ran).
// h.op selects the case; ports 1 and 2 are used for the forwarded packets;
// egress records egress_port in h.eg.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> op;
    bit<8> eg;
}

struct headers_t { h_t h; }
struct metadata_t { }

parser MyParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        pkt.extract(hdr.h);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control MyIngress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        standard_metadata.egress_spec = 1;
        if (hdr.h.op == 1) {
            mark_to_drop(standard_metadata);
        } else if (hdr.h.op == 2) {
            standard_metadata.egress_spec = 511;
        } else if (hdr.h.op == 3) {
            mark_to_drop(standard_metadata);
            standard_metadata.egress_spec = 2;
        }
    }
}

control MyEgress(inout headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    apply {
        hdr.h.eg = (bit<8>)standard_metadata.egress_port;
        if (hdr.h.op == 4) {
            mark_to_drop(standard_metadata);
        }
    }
}

control MyComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.h);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
