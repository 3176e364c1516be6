// truncate.p4 -- the v1model truncate(length) extern.
//
// Covers: truncate(n) called in ingress keeps only the first n bytes of the
// packet as it is sent (after deparsing, so header changes made in ingress and
// egress are visible in the kept bytes); a length larger than the packet has no
// effect; h.len selects the length, 0 means "do not call truncate".
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> len;
    bit<8> mark;
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
        if (hdr.h.len != 0) {
            truncate((bit<32>)hdr.h.len);
        }
        hdr.h.mark = 0xAA;
        standard_metadata.egress_spec = 1;
    }
}

control MyEgress(inout headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    apply {
        hdr.h.mark = hdr.h.mark | 0x0B;
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
