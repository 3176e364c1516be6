// generics.p4 -- user-defined generic declarations (P4-16 type parameters),
// which this target monomorphises: one copy per list of type arguments.
//
// Covers: a generic struct (`pair<T>`) used with two type arguments and nested
// (`pair<pair<bit<8>>>`), a generic header (`tagged_h<T>`) in the headers and
// in a header stack; a generic function with its type argument inferred
// (`pick(c, a, b)`) and written (`pick<bit<16>>(...)`), one calling another
// (`pick3` calls `pick` with its own T), one with inout arguments (`swap`, on
// bit<8> and on headers), one taking a generic struct with the type written
// (`first<bit<8>>(p)`), one called from an action; a generic sub-parser
// instantiated for two header types; a generic control instantiated for two
// types and applied, and applied directly with its type argument
// (`Swap<bit<8>>.apply(...)`); a generic egress whose type arguments come from
// V1Switch's parameters and a generic checksum control given them explicitly.
// The generic bodies only move values (no operators on a type parameter).
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

T pick<T>(in bool first, in T a, in T b) {
    if (first) {
        return a;
    }
    return b;
}

// a for which 0, b for 1, else c
T pick3<T>(in bit<2> which, in T a, in T b, in T c) {
    return pick(which == 0, a, pick(which == 1, b, c));
}

void swap<T>(inout T a, inout T b) {
    T t = a;
    a = b;
    b = t;
}

T first<T>(in pair<T> p) {
    return p.a;
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

    action choose_tag() {
        hdr.w.tag = pick3(hdr.w.tag[1:0], hdr.s[0].v, hdr.s[1].v, hdr.w.tag);
    }

    apply {
        standard_metadata.egress_spec = 1;
        pair<bit<16>> pq = { hdr.h.p, hdr.h.q };
        meta.m.a = pick(hdr.h.x > hdr.h.y, hdr.h.x, hdr.h.y);  // the larger
        meta.m.b = hdr.h.x;
        meta.mm.a = meta.m;
        meta.mm.b = { 1, 2 };
        hdr.h.p = pick<bit<16>>(pq.a > pq.b, pq.a, pq.b);
        swap8.apply(hdr.h.x, hdr.h.y);
        swap16.apply(hdr.w.v, hdr.h.q);
        choose_tag();
        // the larger of x, y plus 1 (the a of mm.b)
        hdr.s[0].tag = first<bit<8>>(meta.mm.a) + first<bit<8>>(meta.mm.b);
        swap(hdr.s[0], hdr.s[1]);
        // swaps s[1].v and s[1].tag when tag is 0x33
        if (hdr.s[1].tag == 0x33) {
            Swap<bit<8>>.apply(hdr.s[1].v, hdr.s[1].tag);
        }
    }
}

control MyEgress<H, M>(inout H hdr, inout M meta,
                       inout standard_metadata_t standard_metadata) {
    apply { }
}

control MyComputeChecksum<H, M>(inout H hdr, inout M meta) {
    apply { }
}

control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum<headers_t, metadata_t>(), MyDeparser()) main;
