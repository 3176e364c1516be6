// arith_unsigned.p4 -- unsigned bit<W> arithmetic, logic and comparisons.
//
// Covers: + - * and unary - with wrap-around modulo 2^W; saturating |+| and
// |-| on bit<8>; & | ^ ~; << and >> by a run-time amount (an amount >= the
// width gives 0); == != < <= > >= on bit<8>; && || ! on bool; casting bool to
// bit<1>; concatenating eight bit<1> values with ++; ?: ; a bit<16> wrap.
// Every result is written back into the packet, which leaves on port 1.
#include <core.p4>
#include <v1model.p4>

header ops_t {
    bit<8>  a;
    bit<8>  b;
    bit<8>  s;        // shift amount
    bit<8>  add;
    bit<8>  sub;
    bit<8>  mul;
    bit<8>  neg;
    bit<8>  sat_add;
    bit<8>  sat_sub;
    bit<8>  band;
    bit<8>  bor;
    bit<8>  bxor;
    bit<8>  bnot;
    bit<8>  shl;
    bit<8>  shr;
    bit<8>  cmp;      // flags, MSB first: == != < <= > >= (< && b!=0) (!< || a==0)
    bit<8>  larger;   // (a > b) ? a : b
    bit<16> w;
    bit<16> w_dec;    // w + 0xFFFF, i.e. w - 1 modulo 2^16
}

struct headers_t { ops_t ops; }
struct metadata_t { }

parser MyParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        pkt.extract(hdr.ops);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control MyIngress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        bit<8> a = hdr.ops.a;
        bit<8> b = hdr.ops.b;
        hdr.ops.add = a + b;
        hdr.ops.sub = a - b;
        hdr.ops.mul = a * b;
        hdr.ops.neg = -a;
        hdr.ops.sat_add = a |+| b;
        hdr.ops.sat_sub = a |-| b;
        hdr.ops.band = a & b;
        hdr.ops.bor = a | b;
        hdr.ops.bxor = a ^ b;
        hdr.ops.bnot = ~a;
        hdr.ops.shl = a << hdr.ops.s;
        hdr.ops.shr = a >> hdr.ops.s;
        bool lt = a < b;
        hdr.ops.cmp = ((bit<1>)(a == b)) ++ ((bit<1>)(a != b)) ++ ((bit<1>)lt)
                      ++ ((bit<1>)(a <= b)) ++ ((bit<1>)(a > b)) ++ ((bit<1>)(a >= b))
                      ++ ((bit<1>)(lt && b != 0)) ++ ((bit<1>)(!lt || a == 0));
        hdr.ops.larger = (a > b) ? a : b;
        hdr.ops.w_dec = hdr.ops.w + 16w0xFFFF;
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
        pkt.emit(hdr.ops);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
