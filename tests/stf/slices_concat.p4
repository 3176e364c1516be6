// slices_concat.p4 -- bit slices as rvalues and lvalues, ++ and width casts.
//
// Covers: x[h:l] reads (byte-aligned, crossing a byte boundary, 4-bit wide),
// a slice of a parenthesised expression, slice assignment (x[h:l] = e) that
// leaves the other bits untouched, single-bit slice assignment, ++ of
// bit<8> and bit<16> into bit<24>, truncating cast bit<16> -> bit<8> (keeps the
// low bits) and widening cast bit<8> -> bit<16> (zero extension).
#include <core.p4>
#include <v1model.p4>

header d_t {
    bit<32> x;
    bit<16> y;
    bit<8>  hi;       // x[31:24]
    bit<8>  mid;      // x[19:12]
    bit<4>  nib_lo;   // x[3:0]
    bit<4>  nib_y;    // y[15:12]
    bit<24> cat;      // x[7:0] ++ y
    bit<32> lv;       // x with slices overwritten
    bit<8>  tr;       // (bit<8>)y
    bit<16> wid;      // (bit<16>)x[31:24]
    bit<8>  shsl;     // (x >> 4)[7:0]
}

struct headers_t { d_t d; }
struct metadata_t { }

parser MyParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        pkt.extract(hdr.d);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control MyIngress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        hdr.d.hi = hdr.d.x[31:24];
        hdr.d.mid = hdr.d.x[19:12];
        hdr.d.nib_lo = hdr.d.x[3:0];
        hdr.d.nib_y = hdr.d.y[15:12];
        hdr.d.cat = hdr.d.x[7:0] ++ hdr.d.y;
        hdr.d.lv = hdr.d.x;
        hdr.d.lv[15:8] = 8w0xAB;
        hdr.d.lv[31:28] = hdr.d.y[3:0];
        hdr.d.lv[0:0] = 1w1;
        hdr.d.tr = (bit<8>)hdr.d.y;
        hdr.d.wid = (bit<16>)(hdr.d.x[31:24]);
        hdr.d.shsl = (hdr.d.x >> 4)[7:0];
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
        pkt.emit(hdr.d);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
