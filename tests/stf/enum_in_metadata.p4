// enum_in_metadata.p4 -- an enum without an underlying type in metadata, as a table key and
// in a hash field list. BMv2 stores such an enum in 32 bits (p4c's v1model back end turns it
// into bit<32>, members numbered from 0 in declaration order).
//
// Covers: a metadata field of a plain enum type set with `?:`; an exact table key on it (the
// STF gives the member's number); crc16 over { the enum, an 8-bit field } (the enum counts as
// 32 bits).
#include <core.p4>
#include <v1model.p4>

enum color_t { GREEN, RED, YELLOW }

header h_t {
    bit<8>  a;
    bit<8>  b;     // set by the table's action
    bit<16> hash;  // crc16 of { m.c, a }
}

struct headers_t {
    h_t h;
}

struct meta_t {
    color_t c;
    bit<8>  x;
}

parser P(packet_in pkt, out headers_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        transition accept;
    }
}

control MyIngress(inout headers_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    action set_b(bit<8> v) {
        hdr.h.b = v;
    }

    table t {
        key = { m.c: exact; }
        actions = { set_b; NoAction; }
        default_action = NoAction();
    }

    apply {
        sm.egress_spec = 1;
        m.c = hdr.h.a == 1 ? color_t.RED : color_t.GREEN;
        t.apply();
        hash(hdr.h.hash, HashAlgorithm.crc16, 16w0, { m.c, hdr.h.a }, 17w65536);
    }
}

control MyEgress(inout headers_t hdr, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control VC(inout headers_t hdr, inout meta_t m) { apply { } }
control CC(inout headers_t hdr, inout meta_t m) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.h); } }

V1Switch(P(), VC(), MyIngress(), MyEgress(), CC(), D()) main;
