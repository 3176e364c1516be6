// Default initializers `...` (P4-16 1.2.4, "Default values" and "Structure-valued
// expressions"): `x = ...` gives x its type's default value (0, false, error.NoError, the first
// member of an enum without underlying type, 0 for a serializable enum, an invalid header,
// structs and tuples field by field); `{f = a, ...}` and `{a, ...}` initialize the named or
// leading fields and give the others their default values; `...` works in constants too.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8>  mode;
    bit<8>  a;
    bit<16> b;
    bit<8>  c;
    bit<8>  d;
}

header p_t { bit<8> x; }

enum Color { Red, Green, Blue }
enum bit<8> Code { One = 1, Two = 2 }

struct S {
    bit<8>  x;
    bit<16> y;
    bool    f;
    Color   col;
    Code    code;
}

struct headers_t { h_t h; p_t p; }
struct meta_t { }

const bit<8> ZERO = ...;
const int ZI = ...;

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); pkt.extract(hdr.p); transition accept; }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) { apply { } }

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        if (hdr.h.mode == 1) {
            // named fields, the rest default
            S s = { y = 0x1234, ... };
            hdr.h.a = s.x;
            hdr.h.b = s.y;
            hdr.h.c = (s.f ? 8w1 : 8w0) + (s.col == Color.Red ? 8w0x10 : 8w0);
            hdr.h.d = (bit<8>) s.code;
        } else if (hdr.h.mode == 2) {
            // leading fields by position, the rest default
            S s = { 7, ... };
            tuple<bit<8>, bool, bit<16>> t = { 9, ... };
            hdr.h.a = s.x;
            hdr.h.b = s.y + t[2];
            hdr.h.c = t[0];
            hdr.h.d = t[1] ? 8w1 : 8w0;
        } else if (hdr.h.mode == 3) {
            // assignment of `...` to scalars, a struct and a header (becomes invalid)
            hdr.h.a = ...;
            bit<16> v = 5;
            v = ...;
            hdr.h.b = v + (bit<16>) ZERO + ZI;
            error e = error.PacketTooShort;
            e = ...;
            hdr.h.c = e == error.NoError ? 8w1 : 8w0;
            hdr.p = ...;
        } else if (hdr.h.mode == 4) {
            // a header from { ..., ... }: valid, with the fields not named at 0
            hdr.p = { ... };
            h_t h2 = { mode = 4, a = 0xaa, ... };
            hdr.h = h2;
        }
    }
}

control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply { }
}

control MyCompute(inout headers_t hdr, inout meta_t meta) { apply { } }

control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.h); pkt.emit(hdr.p); }
}

V1Switch(MyParser(), MyVerify(), MyIngress(), MyEgress(), MyCompute(), MyDeparser()) main;
