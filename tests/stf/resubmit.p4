// resubmit.p4 -- resubmit_preserving_field_list with @field_list metadata.
//
// Covers: resubmit_preserving_field_list(0) at the end of ingress; the packet
// is not forwarded on that pass, and ingress runs again. BMv2 simple_switch
// facts this test relies on:
//  - the resubmitted packet is the packet as it originally arrived (ingress
//    header changes are discarded) and it is parsed again;
//  - user metadata fields annotated @field_list(0) keep their values, all
//    other metadata is reset to 0;
//  - ingress sees standard_metadata.instance_type == 6 (resubmit).
// The program never reads ingress_port: BMv2 resets standard metadata of a
// resubmitted packet, so ingress_port is not a reliable value there.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> v;
    bit<8> inst;
    bit<8> kept;
    bit<8> lost;
}

struct headers_t { h_t h; }

struct metadata_t {
    @field_list(0)
    bit<8> kept;
    bit<8> lost;
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
        if (standard_metadata.instance_type == 0) {
            hdr.h.v = 0xFF;
            meta.kept = 0x5A;
            meta.lost = 0xA5;
            standard_metadata.egress_spec = 2;
            resubmit_preserving_field_list(0);
        } else {
            hdr.h.inst = (bit<8>)standard_metadata.instance_type;
            hdr.h.kept = meta.kept;
            hdr.h.lost = meta.lost;
            standard_metadata.egress_spec = 1;
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
        pkt.emit(hdr.h);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
