// parser_errors.p4 -- verify() with a user-declared error, PacketTooShort,
// and what BMv2 does after a parser error.
//
// Covers: an `error { ... }` declaration; verify(cond, error.BadVersion);
// error.PacketTooShort when an extract needs more bytes than are left.
// BMv2 simple_switch does not drop a packet on a parser error: ingress runs
// with standard_metadata.parser_error set, the headers extracted before the
// error are valid, the header whose extract failed (or that was never reached)
// is invalid, and the bytes not extracted are kept as payload.
// ingress writes h1.code = 0x80 if h2 is valid, plus 0 for NoError,
// 1 for PacketTooShort, 2 for BadVersion, 3 for anything else.
#include <core.p4>
#include <v1model.p4>

error {
    BadVersion
}

header h1_t {
    bit<8> ver;
    bit<8> code;
}

header h2_t {
    bit<32> body;
}

struct headers_t {
    h1_t h1;
    h2_t h2;
}

struct metadata_t { }

parser MyParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        pkt.extract(hdr.h1);
        verify(hdr.h1.ver == 4, error.BadVersion);
        pkt.extract(hdr.h2);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control MyIngress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        bit<8> code;
        if (standard_metadata.parser_error == error.NoError) {
            code = 0;
        } else if (standard_metadata.parser_error == error.PacketTooShort) {
            code = 1;
        } else if (standard_metadata.parser_error == error.BadVersion) {
            code = 2;
        } else {
            code = 3;
        }
        if (hdr.h2.isValid()) {
            code = code | 0x80;
        }
        if (hdr.h1.isValid()) {
            hdr.h1.code = code;
        }
        standard_metadata.egress_spec = 1;
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
        pkt.emit(hdr.h1);
        pkt.emit(hdr.h2);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
