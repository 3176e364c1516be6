// dont_care_args.p4 -- don't-care arguments `_` (P4-16 "Don't care arguments": an `out`
// argument whose value is discarded).
//
// Covers: `pkt.extract<skip_t>(_)` reads a header of the given type and drops it (the packet
// advances; the skipped bytes are not re-emitted); `_` for `out` header and scalar arguments
// of an action and of a function (the other arguments are still copied back, each to its own
// l-value); extract<H>(_) on a packet too short for H sets error.PacketTooShort like any
// extract.
#include <core.p4>
#include <v1model.p4>

header skip_t {
    bit<16> junk;
}

header h_t {
    bit<8> a;
    bit<8> b;
    bit<8> c;
}

struct headers_t {
    h_t h;
}

struct meta_t { }

bit<8> two_outs(out bit<8> x, out bit<8> y) {
    x = 0x11;
    y = 0x22;
    return 0x33;
}

parser P(packet_in pkt, out headers_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start {
        pkt.extract<skip_t>(_);
        pkt.extract(hdr.h);
        transition accept;
    }
}

control MyIngress(inout headers_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    action get2(out skip_t x, out bit<8> p, out bit<8> q) {
        x.setValid();
        x.junk = 0xFFFF;
        p = 0xA1;
        q = 0xA2;
    }

    apply {
        sm.egress_spec = 1;
        if (sm.parser_error != error.NoError) {
            hdr.h.setValid();
            hdr.h.a = 0xEE;
            hdr.h.b = 0xEE;
            hdr.h.c = 0xEE;
        } else {
            get2(_, _, hdr.h.b);
            hdr.h.c = two_outs(hdr.h.a, _);
        }
    }
}

control MyEgress(inout headers_t hdr, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control VC(inout headers_t hdr, inout meta_t m) { apply { } }
control CC(inout headers_t hdr, inout meta_t m) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.h); } }

V1Switch(P(), VC(), MyIngress(), MyEgress(), CC(), D()) main;
