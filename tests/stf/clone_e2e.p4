// clone_e2e.p4 -- egress-to-egress clone with a mirroring session.
//
// Covers: clone(CloneType.E2E, session) called in egress for normal packets
// only (the guard on instance_type avoids cloning the clone again). BMv2
// simple_switch facts this test relies on:
//  - the E2E clone is made at the end of the original's egress and carries the
//    headers as modified by that egress run; metadata is reset to 0;
//  - the clone then runs egress itself with instance_type 2 (egress clone) and
//    egress_port = the session's port (from STF `mirroring_add`);
//  - the clone is made even when the original is dropped at the end of egress
//    (second packet: mark_to_drop in egress drops only the original).
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> v;
    bit<8> x;
    bit<8> inst;
    bit<8> port;
    bit<8> drop;
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
    }
}

control MyEgress(inout headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    apply {
        hdr.h.inst = (bit<8>)standard_metadata.instance_type;
        hdr.h.port = (bit<8>)standard_metadata.egress_port;
        if (standard_metadata.instance_type == 0) {
            hdr.h.v = 0x22;
            clone(CloneType.E2E, 32w7);
            if (hdr.h.drop == 1) {
                mark_to_drop(standard_metadata);
            }
        } else {
            hdr.h.x = 0xCC;
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
