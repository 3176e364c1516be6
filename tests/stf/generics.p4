// generics.p4 -- user-defined generic declarations (P4-16 type parameters),
// which this target monomorphises: one copy per list of type arguments.
//
// Covers: a generic struct (`pair<T>`) used with two type arguments and nested
// (`pair<pair<bit<8>>>`), a generic header (`tagged_h<T>`) in the headers and
// in a header stack; a generic function with its type argument inferred
// (`max(a, b)`) and written (`max<bit<16>>(...)`), one calling another
// (`max3` calls `max` with its own T), one with an inout argument (`swap`),
// one taking a generic struct with the type written (`sum<bit<8>>(p)`), and
// one called from an action; a generic sub-parser instantiated for two header
// types; a generic control instantiated for two types and applied; a generic
// egress whose type arguments come from V1Switch's parameters.
#include <core.p4>
#include <v1model.p4>

struct pair<T> {
    T a;
    T b;
}

header tagged_h<T> {
    T      v;
    bit<8> tag;
}

header h_t {
    bit<8>  x;
    bit<8>  y;
    bit<16> p;
    bit<16> q;
}

struct headers_t {
    h_t                h;
    tagged_h<bit<16>>  w;
    tagged_h<bit<8>>[2] s;
}

struct metadata_t {
    pair<bit<8>>       m;
    pair<pair<bit<8>>> mm;
}

T max<T>(in T a, in T b) {
    return a > b ? a : b;
}

T max3<T>(in T a, in T b, in T c) {
    return max(max(a, b), c);
}

void swap<T>(inout T a, inout T b) {
    T t = a;
    a = b;
    b = t;
}

T sum<T>(in pair<T> p) {
    return p.a + p.b;
}

parser Sub<H>(packet_in pkt, out H hdr) {
    state start {
        pkt.extract(hdr);
        transition accept;
    }
}

parser MyParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    Sub<h_t>() sub_h;
    Sub<tagged_h<bit<16>>>() sub_w;
    state start {
        sub_h.apply(pkt, hdr.h);
        sub_w.apply(pkt, hdr.w);
        pkt.extract(hdr.s.next);
        pkt.extract(hdr.s.next);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control Swap<T>(inout T a, inout T b) {
    apply {
        swap(a, b);
    }
}

control MyIngress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    Swap<bit<16>>() swap16;
    Swap<bit<8>>() swap8;

    action biggest_tag() {
        hdr.w.tag = max3(hdr.s[0].v, hdr.s[1].v, hdr.w.tag);
    }

    apply {
        standard_metadata.egress_spec = 1;
        pair<bit<16>> pq = { hdr.h.p, hdr.h.q };
        meta.m.a = max(hdr.h.x, hdr.h.y);
        meta.m.b = hdr.h.x;
        meta.mm.a = meta.m;
        meta.mm.b = { 1, 2 };
        hdr.h.p = max<bit<16>>(pq.a, pq.b);
        swap8.apply(hdr.h.x, hdr.h.y);
        swap16.apply(hdr.w.v, hdr.h.q);
        biggest_tag();
        // sum of the larger and the first of x, y: then + 1 + 2 from mm.b
        hdr.s[0].tag = sum<bit<8>>(meta.mm.a) + sum<bit<8>>(meta.mm.b);
        swap(hdr.s[0], hdr.s[1]);
    }
}

control MyEgress<H, M>(inout H hdr, inout M meta,
                       inout standard_metadata_t standard_metadata) {
    apply { }
}

control MyComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
