// parser_select.p4 -- select on a tuple with values, masks, ranges, _ and
// default; select on a slice without a default case (error.NoMatch).
//
// Covers: keysets (v1, v2), (v &&& mask, _), (lo .. hi, lo .. hi), (_, v) and
// default, checked in order (first match wins, ranges are inclusive); an
// assignment to metadata in each target state; a select with no matching case
// and no default, which BMv2 reports as standard_metadata.parser_error ==
// error.NoMatch (ingress still runs).
// Output: k.path = number of the state reached (0xEE if the parser ended with
// an error), k.err = 1 if parser_error == NoMatch.
#include <core.p4>
#include <v1model.p4>

header k_t {
    bit<8>  a;
    bit<8>  b;
    bit<16> c;
    bit<8>  path;
    bit<8>  err;
}

struct headers_t { k_t k; }

struct metadata_t {
    bit<8> path;
}

parser MyParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        pkt.extract(hdr.k);
        transition select(hdr.k.a, hdr.k.b) {
            (8w1, 8w2): s_exact;
            (8w0x10 &&& 8w0xF0, _): s_mask;
            (8w0x20 .. 8w0x2F, 8w0x00 .. 8w0x0F): s_range;
            (_, 8w0xFF): s_dontcare;
            default: s_default;
        }
    }
    state s_exact {
        meta.path = 1;
        transition accept;
    }
    state s_mask {
        meta.path = 2;
        transition accept;
    }
    state s_range {
        meta.path = 3;
        transition accept;
    }
    state s_dontcare {
        meta.path = 4;
        transition accept;
    }
    state s_default {
        meta.path = 5;
        transition select(hdr.k.c[15:8]) {
            8w0x12: accept;
        }
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control MyIngress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        if (standard_metadata.parser_error == error.NoError) {
            hdr.k.path = meta.path;
        } else {
            hdr.k.path = 0xEE;
        }
        if (standard_metadata.parser_error == error.NoMatch) {
            hdr.k.err = 1;
        } else {
            hdr.k.err = 0;
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
        pkt.emit(hdr.k);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
