// A program declaring its own extern functions (as p4c's extern-funcs-bmv2 does for BMv2's
// --load-modules): run with `tf-p4 stf --load-modules tests/extern_funcs/user_externs_impl.py`.
// Covers a result used in an expression, in/out/inout parameters copied in and out (P4-16
// "Calling convention: call by copy in / copy out"), bool, int<8> and serializable enum values,
// a call from an action, and an out argument whose l-value has a run-time index.
#include <core.p4>
#include <v1model.p4>

enum bit<8> Kind { Small = 1, Big = 2 }

extern bit<16> mix(in bit<8> a, in bit<8> b);
extern void swap_add(inout bit<8> x, inout bit<8> y, out bit<16> sum);
extern bool is_odd(in bit<8> v);
extern int<8> negate(in int<8> v);
extern Kind classify(in bit<8> v);

header h_t {
    bit<8>  mode;
    bit<8>  a;
    bit<8>  b;
    bit<16> r;
    bit<8>  f;
}

header e_t { bit<16> v; }

struct headers_t { h_t h; e_t[2] e; }
struct meta_t { }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); pkt.extract(hdr.e[0]); pkt.extract(hdr.e[1]); transition accept; }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) { apply { } }

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action swap_in_action() {
        swap_add(hdr.h.a, hdr.h.b, hdr.h.r);
    }
    apply {
        sm.egress_spec = 1;
        if (hdr.h.mode == 1) {
            hdr.h.r = mix(hdr.h.a, hdr.h.b) + 1;
        } else if (hdr.h.mode == 2) {
            swap_in_action();
        } else if (hdr.h.mode == 3) {
            hdr.h.f = is_odd(hdr.h.a) ? 8w1 : 8w0;
            hdr.h.b = (bit<8>) negate((int<8>) hdr.h.a);
            hdr.h.r = (bit<16>) (bit<8>) classify(hdr.h.a);
        } else if (hdr.h.mode == 4) {
            // the l-value hdr.e[hdr.h.f].v is taken before the call; the in argument is read
            // first
            bit<8> x = hdr.h.a;
            bit<8> y = hdr.h.b;
            swap_add(x, y, hdr.e[hdr.h.f].v);
            hdr.h.a = x;
            hdr.h.b = y;
        }
    }
}

control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply { }
}

control MyCompute(inout headers_t hdr, inout meta_t meta) { apply { } }

control MyDeparser(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.h); pkt.emit(hdr.e); } }

V1Switch(MyParser(), MyVerify(), MyIngress(), MyEgress(), MyCompute(), MyDeparser()) main;
