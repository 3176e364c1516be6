// clone_i2e.p4 -- ingress-to-egress clone with a mirroring session.
//
// Covers: clone(CloneType.I2E, session) with the session's port set from STF
// `mirroring_add <session> <port>`; both the original and the clone run
// egress. BMv2 simple_switch facts this test relies on:
//  - the I2E clone is made from the packet as it arrived: it is re-parsed, so
//    header changes made in ingress are not in the clone;
//  - user metadata of the clone is reset to 0 (plain clone preserves no field);
//  - standard_metadata.instance_type is 1 (ingress clone) for the clone and
//    0 (normal) for the original; egress_port is the session's port.
// Egress records instance_type, egress_port and a metadata byte set in
// ingress into the packet.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> v;
    bit<8> inst;
    bit<8> port;
    bit<8> m;
}

struct headers_t { h_t h; }

struct metadata_t {
    bit<8> m;
}

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
        hdr.h.v = 0x11;
        meta.m = 0x42;
        clone(CloneType.I2E, 32w5);
        standard_metadata.egress_spec = 1;
    }
}

control MyEgress(inout headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    apply {
        hdr.h.inst = (bit<8>)standard_metadata.instance_type;
        hdr.h.port = (bit<8>)standard_metadata.egress_port;
        hdr.h.m = meta.m;
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
