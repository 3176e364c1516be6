// subparser.p4 -- a parser instantiated inside another parser and applied.
//
// Covers: a parser type with its own parameters (packet_in, an out header and
// an inout counter); two instances of it declared in the top-level parser and
// invoked with .apply(...) from parser states; extraction inside the sub-parser
// advancing the shared packet_in; copy-in/copy-out of the inout counter.
// outer.n is set to the number of sub-parser invocations.
#include <core.p4>
#include <v1model.p4>

header outer_t {
    bit<8> kind;
    bit<8> n;
}

header inner_t {
    bit<16> v;
}

struct headers_t {
    outer_t outer;
    inner_t in1;
    inner_t in2;
}

struct metadata_t {
    bit<8> cnt;
}

parser InnerParser(packet_in pkt, out inner_t h, inout bit<8> cnt) {
    state start {
        pkt.extract(h);
        cnt = cnt + 1;
        transition accept;
    }
}

parser MyParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    InnerParser() ip1;
    InnerParser() ip2;

    state start {
        pkt.extract(hdr.outer);
        meta.cnt = 0;
        transition select(hdr.outer.kind) {
            1: one;
            2: two;
            default: accept;
        }
    }
    state one {
        ip1.apply(pkt, hdr.in1, meta.cnt);
        transition accept;
    }
    state two {
        ip1.apply(pkt, hdr.in1, meta.cnt);
        ip2.apply(pkt, hdr.in2, meta.cnt);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control MyIngress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        hdr.outer.n = meta.cnt;
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
        pkt.emit(hdr.outer);
        pkt.emit(hdr.in1);
        pkt.emit(hdr.in2);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
