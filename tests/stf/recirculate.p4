// recirculate.p4 -- recirculate_preserving_field_list with @field_list metadata.
//
// Covers: recirculate_preserving_field_list(0) in egress. BMv2 simple_switch
// facts this test relies on:
//  - the packet is deparsed first (egress header changes are kept), then sent
//    back to the ingress parser instead of being transmitted;
//  - metadata fields annotated @field_list(0) keep their values, all other
//    metadata is reset to 0;
//  - ingress of the recirculated packet sees instance_type == 4 (recirculate);
//  - at the end of ingress BMv2 sets instance_type back to 0 (normal) before a
//    unicast packet is enqueued, so the second egress pass sees 0.
// The first ingress pass writes 0 into h.ig_inst; egress recirculates only
// while h.ig_inst == 0, so the second pass (ig_inst = 4) is transmitted.
// The program never reads ingress_port: BMv2 resets standard metadata of a
// recirculated packet, so ingress_port is not a reliable value there.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> v;
    bit<8> ig_inst;
    bit<8> eg_inst;
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
        hdr.h.ig_inst = (bit<8>)standard_metadata.instance_type;
        hdr.h.kept = meta.kept;
        hdr.h.lost = meta.lost;
        standard_metadata.egress_spec = 1;
    }
}

control MyEgress(inout headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    apply {
        hdr.h.eg_inst = (bit<8>)standard_metadata.instance_type;
        if (hdr.h.ig_inst == 0) {
            hdr.h.v = hdr.h.v + 1;
            meta.kept = 0x33;
            meta.lost = 0x44;
            recirculate_preserving_field_list(0);
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
