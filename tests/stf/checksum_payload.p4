// checksum_payload.p4 -- verify_checksum_with_payload / update_checksum_with_payload.
//
// Covers: the _with_payload variants, where the checksum covers the listed
// fields followed by the payload, i.e. all packet bytes the parser did not
// extract; checksum_error visible in ingress; update in ComputeChecksum after
// ingress changed a covered field.
// Header c = (csum, err, pad); checksum = csum16 over err ++ pad ++ payload.
// Ingress copies standard_metadata.checksum_error into c.err; the outgoing
// csum is then recomputed over the new err. All packets go to port 1.
// Expected values computed with Python (RFC 1071 ones'-complement checksum).
#include <core.p4>
#include <v1model.p4>

header c_t {
    bit<16> csum;
    bit<8>  err;
    bit<8>  pad;
}

struct headers_t { c_t c; }
struct metadata_t { }

parser MyParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        pkt.extract(hdr.c);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        verify_checksum_with_payload(hdr.c.isValid(), { hdr.c.err, hdr.c.pad },
                                     hdr.c.csum, HashAlgorithm.csum16);
    }
}

control MyIngress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        hdr.c.err = (bit<8>)standard_metadata.checksum_error;
        standard_metadata.egress_spec = 1;
    }
}

control MyEgress(inout headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    apply { }
}

control MyComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        update_checksum_with_payload(hdr.c.isValid(), { hdr.c.err, hdr.c.pad },
                                     hdr.c.csum, HashAlgorithm.csum16);
    }
}

control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.c);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
