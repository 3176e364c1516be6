// expect-error: 19:20: {#}
// `{#}` (an invalid header or header union) given to a bit<8> variable.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> a;
}

struct headers_t {
    h_t h;
}

struct meta_t { }

parser P(packet_in pkt, out headers_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        bit<8> x = {#};
        transition accept;
    }
}

control Ing(inout headers_t hdr, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control Eg(inout headers_t hdr, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control VC(inout headers_t hdr, inout meta_t m) { apply { } }
control CC(inout headers_t hdr, inout meta_t m) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.h); } }

V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
