// arith_signed.p4 -- signed int<W> arithmetic, comparisons and casts.
//
// Covers: int<8> + - and unary - with two's-complement wrap-around; saturating
// |+| and |-| on int<8> (clamp to -128..127); arithmetic >> on int<8> (inputs
// are chosen so that the result is exact, i.e. independent of rounding);
// signed < <= > >= == != and a comparison against 0; the same operands compared
// as unsigned after a cast to bit<8>; casts int<8> -> int<16> (sign extension),
// int<8> -> bit<8> -> bit<16> (zero extension), int<16> -> int<8> (truncation),
// int<8> -> bit<8> (reinterpretation); ?: on int<8>.
#include <core.p4>
#include <v1model.p4>

header sops_t {
    int<8>  a;
    int<8>  b;
    int<16> w;
    int<8>  add;
    int<8>  sub;
    int<8>  sat_add;
    int<8>  sat_sub;
    int<8>  neg;
    int<8>  shr2;     // a >> 2
    bit<8>  cmp;      // flags, MSB first: < <= > >= == != (a<0) (unsigned a < unsigned b)
    int<16> sext;     // (int<16>)a
    bit<16> zext;     // (bit<16>)(bit<8>)a
    int<8>  narrow;   // (int<8>)w
    bit<8>  ucast;    // (bit<8>)b
    int<8>  minv;     // (a < b) ? a : b
}

struct headers_t { sops_t s; }
struct metadata_t { }

parser MyParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        pkt.extract(hdr.s);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control MyIngress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        int<8> a = hdr.s.a;
        int<8> b = hdr.s.b;
        hdr.s.add = a + b;
        hdr.s.sub = a - b;
        hdr.s.sat_add = a |+| b;
        hdr.s.sat_sub = a |-| b;
        hdr.s.neg = -a;
        hdr.s.shr2 = a >> 2;
        hdr.s.cmp = ((bit<1>)(a < b)) ++ ((bit<1>)(a <= b)) ++ ((bit<1>)(a > b))
                    ++ ((bit<1>)(a >= b)) ++ ((bit<1>)(a == b)) ++ ((bit<1>)(a != b))
                    ++ ((bit<1>)(a < 0)) ++ ((bit<1>)((bit<8>)a < (bit<8>)b));
        hdr.s.sext = (int<16>)a;
        hdr.s.zext = (bit<16>)((bit<8>)a);
        hdr.s.narrow = (int<8>)hdr.s.w;
        hdr.s.ucast = (bit<8>)b;
        hdr.s.minv = (a < b) ? a : b;
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
        pkt.emit(hdr.s);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
